#include "kiln/passes/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/ir/graph_rewrite.h"
#include "kiln/ir/operand_prologue.h"
#include "kiln/ir/shape_rules.h"
#include "kiln/passes/fusion_roles.h"
#include "kiln/passes/fusion_units.h"

namespace kiln::passes {
namespace {

// Rule 5c's "large": values of at least this many elements are worth computing by rows on
// several threads (twice the runtime's elementwise grain, runtime/threading.h).
constexpr int64_t kParallelValueElements = int64_t{1} << 16;

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

using fusion_detail::duplicable;
using fusion_detail::full_operand;
using fusion_detail::GroupKind;
using fusion_detail::inline_constant;
using fusion_detail::is_cheap;
using fusion_detail::is_view;
using fusion_detail::known_elements;
using fusion_detail::largest_output;
using fusion_detail::ReductionSpan;
using fusion_detail::Role;
using fusion_detail::role_of;
using fusion_detail::span_of;

// Ordering constraints of assignments over `order` (a program order), by position: each
// store after the previous store, and after every reader of the value it supersedes.
std::vector<std::vector<int>> order_edges(const Graph& g, const std::vector<Node*>& order) {
  std::vector<std::vector<int>> succ(order.size());
  auto add = [&](int from, int to) {
    std::vector<int>& v = succ[size_t(from)];
    if (std::find(v.begin(), v.end(), to) == v.end()) v.push_back(to);
  };
  std::unordered_map<const Value*, std::vector<int>> readers;
  for (size_t i = 0; i < order.size(); ++i)
    for (const Value* v : order[i]->inputs()) readers[v].push_back(int(i));
  std::vector<const Value*> current(g.variables().size());
  for (size_t i = 0; i < current.size(); ++i) current[i] = g.variable(i).entry;
  int last_store = -1;
  for (size_t i = 0; i < order.size(); ++i) {
    const Node* n = order[i];
    if (!n->is_assignment()) continue;
    if (last_store >= 0) add(last_store, int(i));
    last_store = int(i);
    auto v = size_t(n->variable());
    if (auto it = readers.find(current[v]); it != readers.end())
      for (int r : it->second)
        if (r != int(i)) add(r, int(i));
    current[v] = n->output(0);
  }
  return succ;
}

std::vector<Node*> program_order(const Graph& g) {
  std::vector<Node*> out;
  out.reserve(g.nodes().size());
  for (const auto& n : g.nodes()) out.push_back(n.get());
  return out;
}

class Planner {
 public:
  Planner(Graph& g, int& counter, PassStatistics& stats)
      : g_(g),
        counter_(counter),
        stats_(stats),
        units_(program_order(g), order_edges(g, program_order(g))) {
    for (const Value* v : g_.outputs()) graph_outputs_.insert(v);
  }

  bool run() {
    plan();
    return materialize();
  }

 private:
  // ---- groups

  GroupKind& kind_of(int gid) { return kinds_[size_t(units_.find(gid))]; }

  int new_group(int p) {
    int id = units_.new_group(p);
    kinds_.resize(units_.group_count());
    kinds_[size_t(id)].add(*units_.node(p));
    return id;
  }

  // May node `p` join the groups `gids` (merged into one)? Kind rules only (rule 5): null if it
  // may, else the rule that refuses it.
  const char* kinds_refusal(int p, const std::vector<int>& gids) {
    Node& n = *units_.node(p);
    GroupKind merged;
    merged.add(n);
    int contractions = merged.contraction ? 1 : 0;
    for (int gid : gids) {
      const GroupKind& k = kind_of(gid);
      if (k.contraction) ++contractions;
      merged.add(k);
    }
    if (contractions > 1) return "rule 5: two contractions";
    if (contractions == 1 && merged.has_reduction) return "rule 5: a contraction and a reduction";
    // Part sums finish the product's rows only where they are its rows (else the epilogue
    // could not run by the product's row blocks).
    if (contractions == 1 && merged.has_part_sum &&
        (merged.contraction->output()->shape().rank() == 0 ||
         merged.part_rows != merged.contraction->output()->shape()[0]))
      return "rule 5: a contraction and a reduction";
    if (merged.along_rows && merged.across_rows) return "rule 5b: reductions along and across rows";
    if (const Node* contraction = merged.contraction; contraction != nullptr) {
      // Nothing that feeds the contraction may be in its group: neither `n` nor a member of
      // a group being merged (a path from such a producer to the contraction through nodes
      // outside the group is a cycle, which rule 6 rejects), except an operand's cast to
      // bf16 that the runtime applies as it packs the operand (ir/operand_prologue.h).
      for (const Value* v : contraction->inputs()) {
        const Node* producer = v->producer();
        // Rule 5e: an operand's prologue cast may be in the group; what feeds it may not.
        if (producer != nullptr && ir::is_operand_prologue(*producer, *contraction))
          producer = producer->input(0)->producer();
        if (producer == nullptr) continue;
        if (producer == &n) return kFeedsContraction;
        int q = units_.position(producer);
        if (q < 0) continue;
        for (int gid : gids)
          if (units_.in_group(q, units_.find(gid))) return kFeedsContraction;
      }
    }
    return nullptr;
  }
  static constexpr const char* kFeedsContraction = "rule 5: a producer of the contraction";

  // May node `p` join the groups `gids` (merged into one; with `copy`, the one group `gids[0]`
  // as a copy)? Null if it may, else the rule that refuses it, counted in the statistics.
  // The checks run in the order of the rules' cost: kinds, cycles, serial groups.
  const char* refusal(int p, const std::vector<int>& gids, bool keep_out, bool copy = false) {
    const char* why = kinds_refusal(p, gids);
    if (why == nullptr &&
        (copy ? units_.copy_would_cycle(gids[0], p) : units_.would_cycle(gids, p)))
      why = "rule 6: a cycle";
    if (why == nullptr &&
        std::any_of(gids.begin(), gids.end(), [&](int gid) { return serializes(gid, keep_out); }))
      why = "rule 5c: a large stored value kept out of a serial group";
    if (why == nullptr && would_serialize(*units_.node(p), gids))
      why = "rule 5d: a reduction across rows kept out of a larger group";
    if (why == nullptr && std::any_of(gids.begin(), gids.end(), [&](int gid) {
          return lone_views_.contains(units_.find(gid));
        }))
      why = "rule 5f: a view its consumers refused stays a plain op";
    if (why != nullptr) stats_.add(fmt::format("refused by {}", why));
    return why;
  }

  // Rule 5d: a reduction across rows does not join groups that run by rows and compute a large
  // value (>= kParallelValueElements) larger than the reduction's operand: with it they would
  // run serially, every row of that value included (an Adam update of a 256 x 1024 kernel
  // reading the column sums of a 32 x 1024 array); apart, the reduction runs alone and the
  // large group by rows, reading its small result. Where the operand is as large (a batch
  // mean centring its own input), the group keeps it and reads the operand once.
  bool would_serialize(const Node& n, const std::vector<int>& gids) {
    if (span_of(n) != ReductionSpan::kAcrossRows) return false;
    const int64_t operand = known_elements(n.input(0));
    if (operand < 0) return false;
    return std::any_of(gids.begin(), gids.end(), [&](int gid) {
      const GroupKind& k = kind_of(gid);
      return !k.across_rows && k.largest >= kParallelValueElements && k.largest > operand;
    });
  }

  // ---- planning (rules 1-6)

  // Rule 5c: a large value that is stored anyway (another group or the graph reads it) does not
  // join a group reducing across rows: that group runs serially, and with it every row of the
  // value's computation (an epilogue's ReLU / max-pool gradient beside its bias gradient); apart,
  // the value is computed by rows in parallel and the reduction reads it.
  static bool keeps_out_of_serial_groups(const Node& n, bool stored_anyway) {
    if (!stored_anyway) return false;
    return largest_output(n) >= kParallelValueElements;  // an unknown size is not large
  }
  bool serializes(int gid, bool keep_out) { return keep_out && kind_of(gid).across_rows; }

  void plan() {
    for (int p = int(units_.size()) - 1; p >= 0; --p) {
      Node& n = *units_.node(p);
      if (role_of(n) == Role::kOther) continue;
      std::vector<int> consumers;
      bool outside_user = false;
      bool all_originals = true;
      for (Value* v : outputs_of(n)) outside_user = outside_user || graph_outputs_.contains(v);
      for (int u : units_.users(p)) {
        std::vector<int> gs = units_.groups_of(u);
        if (gs.empty()) outside_user = true;
        if (units_.home(u) < 0 || gs.size() > 1) all_originals = false;
        consumers.insert(consumers.end(), gs.begin(), gs.end());
      }
      std::sort(consumers.begin(), consumers.end());
      consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
      const bool keep_out = keeps_out_of_serial_groups(n, outside_user || consumers.size() > 1);
      if (role_of(n) == Role::kOutput) {
        new_group(p);  // rule 8: never read inside a group, so it only starts one
      } else if (consumers.empty()) {
        if (!is_view(n)) new_group(p);
      } else if (consumers.size() == 1) {
        if (refusal(p, consumers, keep_out) == nullptr)
          join(p, consumers[0]);
        else if (!is_view(n))
          new_group(p);
      } else if (duplicable(n)) {
        bool covered = !outside_user;
        std::vector<int> takers;  // the consumer groups that accept a copy
        for (int gid : consumers) {
          if (refusal(p, {gid}, keep_out, /*copy=*/true) == nullptr)
            takers.push_back(gid);
          else
            covered = false;
        }
        if (!covered) {
          const size_t before = takers.size();
          std::erase_if(takers, [&](int gid) { return !copy_reads_less(p, gid); });
          if (takers.size() < before)
            stats_.add("copies kept out of a group (rule 3a: the original is stored)",
                       int(before - takers.size()));
        }
        for (int gid : takers) {
          stats_.add("ops copied into a group (rule 3)");
          units_.copy(p, gid);
          kind_of(gid).add(n);
        }
        // A view that some consumers refuse gets a group of its own, which stays a plain op
        // (rule 7) that no producer joins (rule 5f), as a view with one refusing consumer stays
        // plain: its producer is computed with its own shape, the view reading it in place.
        if (!covered) {
          const int gid = new_group(p);
          if (is_view(n)) lone_views_.insert(gid);
        }
      } else if (all_originals && refusal(p, consumers, keep_out) == nullptr) {
        GroupKind merged;
        for (int gid : consumers) merged.add(kind_of(gid));
        int root = units_.merge_with(consumers, p);
        kinds_.resize(units_.group_count());
        kinds_[size_t(root)] = merged;
        kinds_[size_t(root)].add(n);
      } else if (int gid = first_joinable(p, consumers, keep_out); gid >= 0) {
        join(p, gid);
      } else {
        new_group(p);
      }
    }
  }

  // Rule 3a: when the original of duplicable node `p` stays (some user reads its stored
  // value), may group `gid` still take a copy? A copy reads the node's full-size operand
  // instead of that stored value: no less memory, and the operand must then be stored too (a
  // product's raw result beside its activation, read back only to recompute the activation).
  // So only a view (which stores nothing), a node reading no full-size operand, or a group
  // that reads the operand anyway takes one.
  bool copy_reads_less(int p, int gid) {
    const Node& n = *units_.node(p);
    if (is_view(n)) return true;
    const Value* operand = full_operand(n);
    if (operand == nullptr) return true;
    const int q = operand->producer() == nullptr ? -1 : units_.position(operand->producer());
    if (q < 0) return false;
    const std::vector<int>& readers = units_.users(q);
    return std::any_of(readers.begin(), readers.end(),
                       [&](int u) { return u != p && units_.in_group(u, gid); });
  }

  void join(int p, int gid) {
    GroupKind k = kind_of(gid);
    k.add(*units_.node(p));
    int root = units_.merge_with({gid}, p);
    kinds_[size_t(root)] = k;
  }

  // The consumer group of `p` (by its first user in program order) that `p` may join alone,
  // the others reading it as an output of that group; -1 if none.
  int first_joinable(int p, const std::vector<int>& consumers, bool keep_out) {
    std::vector<std::pair<int, int>> by_position;  // (first user position, group)
    for (int gid : consumers) {
      int first = std::numeric_limits<int>::max();
      for (int u : units_.users(p))
        if (units_.in_group(u, gid)) first = std::min(first, u);
      by_position.emplace_back(first, gid);
    }
    std::sort(by_position.begin(), by_position.end());
    for (const auto& [first, gid] : by_position)
      if (refusal(p, {gid}, keep_out) == nullptr) return gid;
    return -1;
  }

  static std::vector<Value*> outputs_of(const Node& n) {
    std::vector<Value*> out;
    for (size_t i = 0; i < n.num_outputs(); ++i) out.push_back(n.output(i));
    return out;
  }

  // ---- materialization

  bool materialize() {
    // Groups worth a kernel (rule 7), in program order of their last node.
    std::vector<std::pair<int, int>> order;  // (last position, group)
    for (size_t gid = 0; gid < units_.group_count(); ++gid) {
      const std::vector<int>& members = units_.group(int(gid)).members;
      if (units_.find(int(gid)) != int(gid) || members.size() < 2) continue;
      order.emplace_back(*std::max_element(members.begin(), members.end()), int(gid));
    }
    std::sort(order.begin(), order.end());
    std::vector<bool> fused(units_.group_count(), false);
    for (const auto& [last, gid] : order) fused[size_t(gid)] = true;
    int64_t lone = 0;
    for (size_t gid = 0; gid < units_.group_count(); ++gid)
      if (units_.find(int(gid)) == int(gid) && units_.group(int(gid)).members.size() == 1) ++lone;

    std::unordered_map<const Value*, Value*> replacement;
    std::unordered_map<const Node*, int> key;
    std::unordered_set<const Node*> inlined_constants;
    PassStatistics formed;  // counted once the fusions replace their nodes
    for (const auto& [last, gid] : order) {
      Node* f = build(gid, fused, replacement, inlined_constants);
      if (f == nullptr) continue;
      key[f] = last;
      formed.add(fmt::format("{} groups formed", f->fusion_kind()));
      formed.add("ops fused", int64_t(units_.group(gid).members.size()));
    }
    // Erase the originals of fused nodes and the nodes that live on only as copies.
    std::unordered_set<const Node*> erase;
    for (int p = 0; p < int(units_.size()); ++p)
      if (erased(p, fused)) erase.insert(units_.node(p));
    if (lone > 0) stats_.add("groups of one op left plain (rule 7)", lone);
    if (erase.empty()) return false;
    stats_.merge(formed);
    ir::GraphRewrite uses(g_);
    for (const auto& [from, to] : replacement) uses.replace(const_cast<Value*>(from), to);
    uses.finish();
    // Constants that only fed fused nodes go too.
    std::unordered_set<const Value*> used(g_.outputs().begin(), g_.outputs().end());
    for (const auto& n : g_.nodes())
      if (!erase.contains(n.get())) used.insert(n->inputs().begin(), n->inputs().end());
    for (const Node* c : inlined_constants)
      if (!used.contains(c->output(0))) erase.insert(c);
    g_.erase_nodes_if([&](const Node& n) { return erase.contains(&n); });
    schedule(key);
    for (const auto& n : g_.nodes())
      if (key.contains(n.get())) {
        Graph& body = n->subgraph(0);
        body.set_name(fmt::format("{}_{}", body.name(), counter_++));
      }
    return true;
  }

  // Is `n` replaced by fusions (its home group is fused, or it has no home and every copy is
  // in a fused group)?
  bool erased(int p, const std::vector<bool>& fused) {
    if (int h = units_.home(p); h >= 0) return fused[size_t(h)];
    std::vector<int> copies = units_.groups_of(p);
    if (copies.empty()) return false;
    for (int gid : copies)
      if (!fused[size_t(gid)]) return false;
    return true;
  }

  // Builds the fusion node of group `gid` (appended to the graph); null if it has no outputs.
  Node* build(int gid, const std::vector<bool>& fused,
              std::unordered_map<const Value*, Value*>& replacement,
              std::unordered_set<const Node*>& inlined_constants) {
    std::vector<int> positions = units_.group(gid).members;
    std::sort(positions.begin(), positions.end());
    std::vector<Node*> members;
    for (int m : positions) members.push_back(units_.node(m));
    std::unordered_set<const Node*> member_set(members.begin(), members.end());

    // Which values of this group are read outside it.
    std::vector<Value*> outputs;
    for (int m : positions) {
      if (units_.home(m) != gid) continue;  // a copy: its home serves
      Value* v = units_.node(m)->output(0);
      bool needed = graph_outputs_.contains(v);
      for (int u : units_.users(m)) {
        if (!erased(u, fused)) needed = true;  // a plain node reads it
        for (int ug : units_.groups_of(u))
          if (fused[size_t(ug)] && ug != gid && !units_.in_group(m, ug)) needed = true;
      }
      if (needed) outputs.push_back(v);
    }
    if (outputs.empty()) return nullptr;  // dead code: its members are erased

    auto body = std::make_unique<Graph>("");
    std::unordered_map<const Value*, Value*> inner;
    std::vector<Value*> operands;
    std::vector<std::string> names;
    for (Node* m : members) {
      std::vector<Value*> ins;
      for (Value* x : m->inputs()) {
        if (auto it = inner.find(x); it != inner.end()) {
          ins.push_back(it->second);
          continue;
        }
        Node* p = x->producer();
        Value* in = nullptr;
        KILN_ASSERT(p == nullptr || !member_set.contains(p),
                    "fusion: a group member is used before it is built");
        if (inline_constant(p)) {
          Node* c = body->add_constant(p->literal());
          c->set_name(p->name());
          c->set_location(p->location());
          in = c->output(0);
          inlined_constants.insert(p);
        } else {
          in = body->add_parameter(x->type());
          operands.push_back(x);
        }
        inner[x] = in;
        ins.push_back(in);
      }
      Node* b = body->add_op(m->op(), std::move(ins), m->attrs());
      b->set_name(m->name());
      b->set_location(m->location());
      inner[m->output(0)] = b->output(0);
      std::string op(m->op_name());
      if (names.size() < 3 && std::find(names.begin(), names.end(), op) == names.end())
        names.push_back(op);
    }
    std::vector<Value*> body_outputs;
    std::vector<TensorType> types;
    for (Value* v : outputs) {
      body_outputs.push_back(inner.at(v));
      types.push_back(v->type());
    }
    body->set_outputs(std::move(body_outputs));
    const GroupKind& g = kind_of(gid);
    std::string kind = g.contraction                       ? "contraction"
                       : g.has_reduction || g.has_part_sum ? "reduction"
                                                           : "loop";
    // The counter is filled in once the fusions have their final order (see materialize).
    std::string name = fmt::format("fused_{}", fmt::join(names, "_"));
    Node* f = g_.add_fusion(std::move(name), std::move(kind), std::move(operands), std::move(body),
                            std::move(types));
    for (size_t i = 0; i < outputs.size(); ++i) replacement[outputs[i]] = f->output(i);
    return f;
  }

  // Topological order of the remaining nodes and the new fusions, each placed as close to its
  // program position as the data and assignment-order constraints allow.
  void schedule(const std::unordered_map<const Node*, int>& fusion_key) {
    const std::vector<Node*> all = program_order(g_);
    std::unordered_map<const Node*, int> index;
    for (size_t i = 0; i < all.size(); ++i) index.emplace(all[i], int(i));
    std::vector<std::vector<int>> succ = order_edges(g_, all);
    for (size_t i = 0; i < all.size(); ++i)
      for (const Value* v : all[i]->inputs())
        if (auto it = index.find(v->producer()); it != index.end()) {
          std::vector<int>& s = succ[size_t(it->second)];
          if (std::find(s.begin(), s.end(), int(i)) == s.end()) s.push_back(int(i));
        }
    std::vector<int> indegree(all.size(), 0);
    for (const std::vector<int>& tos : succ)
      for (int to : tos) ++indegree[size_t(to)];
    std::vector<int> key(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      auto it = fusion_key.find(all[i]);
      key[i] = it != fusion_key.end() ? it->second : units_.position(all[i]);
    }
    using Item = std::pair<int, int>;  // (key, index: the tie-break)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
    for (size_t i = 0; i < all.size(); ++i)
      if (indegree[i] == 0) ready.push({key[i], int(i)});
    std::vector<const Node*> order;
    order.reserve(all.size());
    while (!ready.empty()) {
      int i = ready.top().second;
      ready.pop();
      order.push_back(all[size_t(i)]);
      for (int s : succ[size_t(i)])
        if (--indegree[size_t(s)] == 0) ready.push({key[size_t(s)], s});
    }
    KILN_ASSERT(order.size() == all.size(), "fusion: the planned groups form a cycle");
    g_.reorder_nodes(order);
  }

  Graph& g_;
  int& counter_;
  PassStatistics& stats_;
  FusionUnits units_;
  std::vector<GroupKind> kinds_;  // by group id (valid at roots)
  std::unordered_set<const Value*> graph_outputs_;
  // Groups of one view (a reshape) that some of its consumer groups refused (rule 5f).
  std::unordered_set<int> lone_views_;
};

bool fuse_graph(Graph& g, int& counter, PassStatistics& stats) {
  bool changed = false;
  for (const auto& n : g.nodes())
    if (n->kind() == NodeKind::kCond || n->kind() == NodeKind::kWhile)
      for (const auto& sub : n->subgraphs()) changed |= fuse_graph(*sub, counter, stats);
  changed |= Planner(g, counter, stats).run();
  return changed;
}

class Fusion final : public Pass {
 public:
  std::string_view name() const override { return "fusion"; }
  bool run(Graph& g) override {
    int counter = 0;
    return fuse_graph(g, counter, statistics());
  }
};

}  // namespace

std::unique_ptr<Pass> make_fusion() { return std::make_unique<Fusion>(); }

}  // namespace kiln::passes
