#include "kiln/passes/schedule_last_uses.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/dtype.h"
#include "kiln/runtime/array.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

// Bytes of a value's buffer as the arena holds it (rounded up to runtime::kAlignment), -1 when
// its shape has an unknown dimension.
int64_t value_bytes(const Value* v) {
  if (!v->shape().is_fully_known()) return -1;
  constexpr int64_t kAlign = int64_t(runtime::kAlignment);
  const int64_t bytes = v->shape().num_elements() * int64_t(dtype_size(v->dtype()));
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// Whether a node's results are buffers of the arena (codegen/arena_layout.h): not those of
// constants, assignments (the variable's buffer) and cond / while nodes (their nested
// executables make them).
bool in_arena_kind(const Node& n) {
  return n.kind() == ir::NodeKind::kOp || n.kind() == ir::NodeKind::kFusion;
}

// The buffers of a graph's top-level values: values sharing storage (a reshape's result and
// its operand, a concat's operands and result) form one group, with the readers of all of them.
class StorageGroups {
 public:
  explicit StorageGroups(const Graph& g) {
    for (const auto& p : g.nodes()) {
      const Node& n = *p;
      if (n.is_op(OpKind::Reshape)) unite(n.output(0), n.input(0));
      if (n.is_op(OpKind::Concat))
        for (const Value* in : n.inputs()) unite(n.output(0), in);
    }
    for (const auto& p : g.nodes()) {
      for (const Value* in : p->inputs()) {
        Group& grp = group(in);
        if (grp.readers.empty() || grp.readers.back() != p.get()) grp.readers.push_back(p.get());
      }
      for (size_t i = 0; i < p->num_outputs(); ++i) group(p->output(i));
    }
    // Freeability over every member.
    for (const auto& [v, root] : parent_) add_member(v);
    for (const auto& p : g.nodes())
      for (const Value* in : p->inputs()) add_member(in);
  }

  struct Group {
    std::vector<const Node*> readers;  // top-level readers, in program order (each once)
    bool freeable = true;  // no member is outside the arena (parameter, constant, output...)
  };

  const Value* root(const Value* v) const {
    while (true) {
      auto it = parent_.find(v);
      if (it == parent_.end() || it->second == v) return v;
      v = it->second;
    }
  }
  Group& group(const Value* v) { return groups_[root(v)]; }

 private:
  void unite(const Value* a, const Value* b) {
    const Value *ra = root(a), *rb = root(b);
    parent_.emplace(ra, ra);
    parent_.emplace(rb, rb);
    if (ra != rb) parent_[rb] = ra;
  }
  void add_member(const Value* v) {
    if (!counted_.insert(v).second) return;
    Group& grp = group(v);
    // Parameters, variable entries, literal constants, assignment results (the variable's
    // buffer) and cond / while results (the nested executables' arrays) are not in the arena.
    if (v->def() != Value::Def::kNodeOutput || !in_arena_kind(*v->producer())) grp.freeable = false;
  }

  std::unordered_map<const Value*, const Value*> parent_;
  std::unordered_map<const Value*, Group> groups_;
  std::unordered_set<const Value*> counted_;
};

bool movable(const Node& n) {
  switch (n.kind()) {
    case ir::NodeKind::kOp:
      return !n.is_op(OpKind::Reshape) && !n.is_op(OpKind::AllReduce);
    case ir::NodeKind::kFusion:
    case ir::NodeKind::kWhile:
    case ir::NodeKind::kCond:
      return true;
    default:  // constants, assignments
      return false;
  }
}

class ScheduleLastUses : public Pass {
 public:
  std::string_view name() const override { return "schedule-last-uses"; }

  bool run(Graph& g) override {
    StorageGroups groups(g);
    std::vector<const Node*> order;
    for (const auto& p : g.nodes()) order.push_back(p.get());
    std::unordered_map<const Node*, int64_t> position;
    auto number = [&] {
      for (size_t i = 0; i < order.size(); ++i) position[order[i]] = int64_t(i);
    };
    number();
    auto defined_at = [&](const Value* v) -> int64_t {
      return v->producer() != nullptr ? position.at(v->producer()) : -1;
    };
    // The value each variable's assignments store (a node output of the new value).
    std::unordered_map<int, std::vector<const Value*>> stored;
    for (const auto& p : g.nodes())
      if (p->is_assignment()) stored[p->variable()].push_back(p->input(0));
    // Whether n computes a new value of the variable whose entry value `in` is.
    auto updates = [&](const Node& n, const Value* in) {
      if (in->def() != Value::Def::kVariableEntry) return false;
      auto it = stored.find(in->index());
      if (it == stored.end()) return false;
      for (const Value* v : it->second)
        if (v->producer() == &n) return true;
      return false;
    };
    // Graph outputs and variables' new values (pooled: they outlive the call) are never freed.
    std::unordered_set<const Value*> outside;
    for (const Value* v : g.outputs()) outside.insert(v);
    for (const auto& [variable, values] : stored) outside.insert(values.begin(), values.end());
    for (const Value* v : outside) groups.group(v).freeable = false;
    // The arena bytes a node's step adds (a lower bound): its results' buffers, none for a
    // node whose results live elsewhere or in its operands' buffers (a reshape's view, a
    // concat computed in place).
    auto new_arena_bytes = [&](const Node& m) -> int64_t {
      if (!in_arena_kind(m) || m.is_op(OpKind::Reshape) || m.is_op(OpKind::Concat)) return 0;
      int64_t bytes = 0;
      for (size_t o = 0; o < m.num_outputs(); ++o)
        if (!outside.count(m.output(o))) bytes += std::max<int64_t>(0, value_bytes(m.output(o)));
      return bytes;
    };
    bool changed = false;
    for (size_t i = 0; i < order.size(); ++i) {
      const Node& n = *order[i];
      if (!movable(n)) continue;
      int64_t defines = 0;
      for (size_t o = 0; o < n.num_outputs() && defines >= 0; ++o) {
        const int64_t b = value_bytes(n.output(o));
        defines = b < 0 ? -1 : defines + b;
      }
      if (defines < 0) continue;
      // The earliest position: after every operand's producer, after the other readers of each
      // group larger than n's outputs that n is the last reader of (freed there), and after
      // the other readers of each variable entry n computes the new value of.
      // A group counts with the largest of the values n reads from it: at least that buffer
      // dies with n (a concat piece n reads may have a buffer of its own, the concat's result
      // already dead; a reshape and its operand are the same size).
      int64_t earliest = 0, frees = 0;
      std::unordered_map<const Value*, int64_t> group_bytes;  // root -> bytes n reads
      for (const Value* in : n.inputs()) {
        earliest = std::max(earliest, defined_at(in) + 1);
        int64_t& b = group_bytes[groups.root(in)];
        const int64_t v = value_bytes(in);
        b = v < 0 || b < 0 ? -1 : std::max(b, v);
      }
      // The last other reader of in's group (-1: none).
      auto other_reader = [&](const Value* in) {
        int64_t other = -1;
        for (const Node* reader : groups.group(in).readers)
          if (reader != &n) other = std::max(other, position.at(reader));
        return other;
      };
      for (const auto& [root, bytes] : group_bytes) {
        const int64_t other = other_reader(root);
        if (other < int64_t(i) && groups.group(root).freeable && bytes > defines) {
          frees += bytes;
          earliest = std::max(earliest, other + 1);
        }
      }
      for (const Value* in : n.inputs()) {
        const int64_t other = other_reader(in);
        if (other < int64_t(i) && updates(n, in)) earliest = std::max(earliest, other + 1);
      }
      if (frees == 0 || earliest >= int64_t(i)) continue;
      // n lands before the first node from `earliest` on that adds at least as many bytes to
      // the arena as n does: at n's new step the values that die at the nodes it now precedes
      // are still live, so its arena results must take no more room than that node's did; at
      // the steps it passes, what it frees (more than all it defines) is gone. So no step's
      // live bytes grow. (An optimizer update's results are variables' new values, outside the
      // arena: it lands right at `earliest`.)
      const int64_t adds = new_arena_bytes(n);
      int64_t at = earliest;
      while (at < int64_t(i) && new_arena_bytes(*order[size_t(at)]) < adds) ++at;
      if (at >= int64_t(i)) continue;
      order.erase(order.begin() + int64_t(i));
      order.insert(order.begin() + at, &n);
      number();
      statistics().add("nodes moved earlier");
      changed = true;
    }
    if (changed) g.reorder_nodes(order);
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_schedule_last_uses() { return std::make_unique<ScheduleLastUses>(); }

}  // namespace kiln::passes
