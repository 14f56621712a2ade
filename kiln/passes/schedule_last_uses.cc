#include "kiln/passes/schedule_last_uses.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/dtype.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

// Bytes of a value, -1 when its shape has an unknown dimension.
int64_t value_bytes(const Value* v) {
  if (!v->shape().is_fully_known()) return -1;
  return v->shape().num_elements() * int64_t(dtype_size(v->dtype()));
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
    for (const Value* out : g.outputs()) group(out).freeable = false;
    // Sizes and freeability over every member.
    for (const auto& [v, root] : parent_) add_member(v);
    for (const auto& p : g.nodes())
      for (const Value* in : p->inputs()) add_member(in);
  }

  struct Group {
    std::vector<const Node*> readers;  // top-level readers, in program order (each once)
    int64_t bytes = 0;                 // the largest member's size; -1: some size unknown
    bool freeable = true;  // no member is a parameter, variable entry, constant or output
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
    const int64_t b = value_bytes(v);
    grp.bytes = b < 0 || grp.bytes < 0 ? -1 : std::max(grp.bytes, b);
    // Parameters, variable entries and literal constants are not in the arena.
    if (v->def() != Value::Def::kNodeOutput || v->producer()->kind() == ir::NodeKind::kConstant)
      grp.freeable = false;
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
      int64_t earliest = 0, frees = 0;
      std::unordered_set<const Value*> seen;
      for (const Value* in : n.inputs()) {
        earliest = std::max(earliest, defined_at(in) + 1);
        const Value* r = groups.root(in);
        if (!seen.insert(r).second) continue;
        StorageGroups::Group& grp = groups.group(in);
        int64_t other = -1;
        for (const Node* reader : grp.readers)
          if (reader != &n) other = std::max(other, position.at(reader));
        const bool last = other < int64_t(i);
        if (last && grp.freeable && grp.bytes > defines) {
          frees += grp.bytes;
          earliest = std::max(earliest, other + 1);
        }
        if (last && updates(n, in)) earliest = std::max(earliest, other + 1);
      }
      if (frees == 0 || earliest >= int64_t(i)) continue;
      order.erase(order.begin() + int64_t(i));
      order.insert(order.begin() + earliest, &n);
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
