#include "passes/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

enum class Role { kOther, kLoop, kReduction, kContraction };

// The op's `fusion` column in ir/ops.def.
Role role_of(const Node& n) {
  if (n.kind() != NodeKind::kOp) return Role::kOther;
  switch (op_info(n.op()).fusion) {
    case FusionRole::Loop:
      return Role::kLoop;
    case FusionRole::Reduction:
      return Role::kReduction;
    case FusionRole::Contraction:
      return Role::kContraction;
    case FusionRole::NoFusion:
      break;
  }
  return Role::kOther;
}

bool is_cheap(const Node& n) {
  return role_of(n) == Role::kLoop && !op_info(n.op()).has(kTranscendental);
}

// Constants copied into the bodies that use them (instead of becoming operands).
bool inline_constant(const Node* p) {
  if (p == nullptr || p->kind() != NodeKind::kConstant || p->literal() == nullptr) return false;
  return p->literal()->is_splat() || p->literal()->num_elements() <= 16;
}

// Which rows a reduction combines (rule 5b): along each row (axes exclude the leading one:
// softmax, layer-norm statistics) or across rows (the leading axis is reduced: a batch
// mean, a bias gradient).
enum class ReductionSpan { kNone, kAlongRows, kAcrossRows };

ReductionSpan span_of(const Node& n) {
  if (role_of(n) != Role::kReduction) return ReductionSpan::kNone;
  const Shape& in = n.input(0)->shape();
  if (in.rank() == 0) return ReductionSpan::kNone;
  const char* op = op_name(n.op());
  std::vector<int64_t> axes;
  if (n.is_op(OpKind::Softmax) || n.is_op(OpKind::LogSoftmax) || n.is_op(OpKind::ArgMax) ||
      n.is_op(OpKind::ArgMin))
    axes.push_back(n.attrs().get_int("axis", op));
  else
    axes = n.attrs().get_ints("axes", op);
  if (axes.empty()) return ReductionSpan::kAcrossRows;  // all axes
  for (int64_t a : axes)
    if ((a < 0 ? a + in.rank() : a) == 0) return ReductionSpan::kAcrossRows;
  return ReductionSpan::kAlongRows;
}

struct Group {
  std::vector<Node*> members;  // originals and copies, each node once
  Node* contraction = nullptr;
  bool has_reduction = false;
  bool along_rows = false, across_rows = false;  // reductions of each span (rule 5b)
};

class Planner {
 public:
  Planner(Graph& g, int& counter) : g_(g), counter_(counter) {}

  bool run() {
    index();
    plan();
    return materialize();
  }

 private:
  // ---- analysis

  void index() {
    for (const auto& n : g_.nodes()) {
      pos_[n.get()] = int(nodes_.size());
      nodes_.push_back(n.get());
    }
    for (Node* n : nodes_)
      for (const Value* v : n->inputs())
        if (Node* p = v->producer(); p != nullptr && pos_.contains(p)) add_unique(users_[p], n);
    for (const Value* v : g_.outputs()) graph_outputs_.insert(v);
    order_edges(nodes_, succ_);
  }

  static void add_unique(std::vector<Node*>& v, Node* n) {
    if (std::find(v.begin(), v.end(), n) == v.end()) v.push_back(n);
  }

  // Ordering constraints of assignments over `order` (a program order): each store after the
  // previous store, and after every reader of the value it supersedes.
  void order_edges(const std::vector<Node*>& order,
                   std::unordered_map<const Node*, std::vector<Node*>>& succ) const {
    std::unordered_map<const Value*, std::vector<Node*>> readers;
    for (Node* n : order)
      for (const Value* v : n->inputs()) readers[v].push_back(n);
    std::vector<const Value*> current(g_.variables().size());
    for (size_t i = 0; i < current.size(); ++i) current[i] = g_.variable(i).entry;
    Node* last_store = nullptr;
    for (Node* n : order) {
      if (!n->is_assignment()) continue;
      if (last_store) add_unique(succ[last_store], n);
      last_store = n;
      auto v = size_t(n->variable());
      for (Node* r : readers[current[v]])
        if (r != n) add_unique(succ[r], n);
      current[v] = n->output(0);
    }
  }

  // ---- groups (union-find over group ids)

  int find(int id) {
    while (parent_[size_t(id)] != id)
      id = parent_[size_t(id)] = parent_[size_t(parent_[size_t(id)])];
    return id;
  }

  std::vector<int> groups_of(const Node* n) {
    std::vector<int> out;
    if (auto it = home_.find(n); it != home_.end()) out.push_back(find(it->second));
    if (auto it = copies_.find(n); it != copies_.end())
      for (int c : it->second) out.push_back(find(c));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  bool in_group(const Node* n, int gid) {
    std::vector<int> gs = groups_of(n);
    return std::find(gs.begin(), gs.end(), gid) != gs.end();
  }

  int new_group(Node* n) {
    int id = int(groups_.size());
    groups_.push_back(Group{});
    parent_.push_back(id);
    add_member(n, id, /*copy=*/false);
    return id;
  }

  void add_member(Node* n, int gid, bool copy) {
    Group& g = groups_[size_t(gid)];
    if (std::find(g.members.begin(), g.members.end(), n) == g.members.end()) g.members.push_back(n);
    Role r = role_of(*n);
    if (r == Role::kContraction) g.contraction = n;
    if (r == Role::kReduction) g.has_reduction = true;
    g.along_rows = g.along_rows || span_of(*n) == ReductionSpan::kAlongRows;
    g.across_rows = g.across_rows || span_of(*n) == ReductionSpan::kAcrossRows;
    if (copy)
      copies_[n].push_back(gid);
    else
      home_[n] = gid;
  }

  void merge(int into, int from) {
    into = find(into);
    from = find(from);
    if (into == from) return;
    Group& a = groups_[size_t(into)];
    Group& b = groups_[size_t(from)];
    for (Node* m : b.members)
      if (std::find(a.members.begin(), a.members.end(), m) == a.members.end())
        a.members.push_back(m);
    if (a.contraction == nullptr) a.contraction = b.contraction;
    a.has_reduction = a.has_reduction || b.has_reduction;
    a.along_rows = a.along_rows || b.along_rows;
    a.across_rows = a.across_rows || b.across_rows;
    b.members.clear();
    parent_[size_t(from)] = into;
  }

  // May `n` join the groups `gids` (merged into one)? Kind rules only (rule 5).
  bool kinds_allow(const Node& n, const std::vector<int>& gids) {
    int contractions = role_of(n) == Role::kContraction ? 1 : 0;
    bool reduction = role_of(n) == Role::kReduction;
    bool along = span_of(n) == ReductionSpan::kAlongRows;
    bool across = span_of(n) == ReductionSpan::kAcrossRows;
    const Node* contraction = nullptr;
    for (int gid : gids) {
      const Group& g = groups_[size_t(gid)];
      if (g.contraction) {
        ++contractions;
        contraction = g.contraction;
      }
      reduction = reduction || g.has_reduction;
      along = along || g.along_rows;
      across = across || g.across_rows;
    }
    if (contractions > 1 || (contractions == 1 && reduction)) return false;
    if (along && across) return false;
    if (role_of(n) == Role::kContraction) contraction = &n;
    if (contraction != nullptr) {
      // Nothing that feeds the contraction may be in its group: neither `n` nor a member of
      // a group being merged (a path from such a producer to the contraction through nodes
      // outside the group is a cycle, which rule 6 rejects).
      for (const Value* v : contraction->inputs()) {
        const Node* producer = v->producer();
        if (producer == nullptr) continue;
        if (producer == &n) return false;
        for (int gid : gids)
          if (in_group(producer, gid)) return false;
      }
    }
    return true;
  }

  // ---- the unit graph: groups and the nodes in no group, with the edges values and
  // assignment order give them. A value leaves a group only from its original (home) node;
  // a copy's value is used inside its group only.

  using Unit = int;  // >= 0: a group (root id); < 0: the node at position -unit-1

  std::vector<Unit> units_of(const Node* n) {
    std::vector<int> gs = groups_of(n);
    if (gs.empty()) return {-(pos_.at(n) + 1)};
    return gs;
  }

  bool in_unit(const Node* m, Unit u) { return u < 0 ? pos_.at(m) == -u - 1 : in_group(m, u); }

  bool is_home(const Node* m, Unit u) {
    if (u < 0) return true;
    auto h = home_.find(m);
    return h != home_.end() && find(h->second) == u;
  }

  void unit_successors(Unit x, std::vector<Unit>& out) {
    std::vector<Node*> members =
        x < 0 ? std::vector<Node*>{nodes_[size_t(-x - 1)]} : groups_[size_t(x)].members;
    for (const Node* m : members) {
      if (is_home(m, x))
        for (const Node* u : users_[m])
          for (Unit y : units_of(u))
            if (y != x && !in_unit(m, y)) out.push_back(y);
      if (auto it = succ_.find(m); it != succ_.end())
        for (const Node* s : it->second)
          for (Unit y : units_of(s))
            if (y != x) out.push_back(y);
    }
  }

  // Would merging the groups `gids` and the (not yet grouped) node `p` into one group put it
  // on a cycle (rule 6)? True when a path leaves the merged units and comes back.
  bool would_cycle(const std::vector<int>& gids, const Node* p) {
    std::unordered_set<Unit> set(gids.begin(), gids.end());
    set.insert(-(pos_.at(p) + 1));
    std::vector<Unit> stack;
    for (Unit u : set) unit_successors(u, stack);
    std::erase_if(stack, [&](Unit u) { return set.contains(u); });
    std::unordered_set<Unit> seen;
    while (!stack.empty()) {
      Unit x = stack.back();
      stack.pop_back();
      if (set.contains(x)) return true;
      if (!seen.insert(x).second) continue;
      unit_successors(x, stack);
    }
    return false;
  }

  // Would copying `p` into group `gid` put it on a cycle? The copy adds no edge out of the
  // group except the assignment-order ones of `p` (a store after a read of the value it
  // supersedes); edges into the group from p's operands cannot close a cycle, since p already
  // feeds the group.
  bool copy_would_cycle(int gid, const Node& p) {
    std::vector<Unit> stack;
    if (auto it = succ_.find(&p); it != succ_.end())
      for (const Node* s : it->second)
        for (Unit y : units_of(s)) stack.push_back(y);
    std::unordered_set<Unit> seen;
    while (!stack.empty()) {
      Unit x = stack.back();
      stack.pop_back();
      if (x == gid) return true;
      if (!seen.insert(x).second) continue;
      unit_successors(x, stack);
    }
    return false;
  }

  // ---- planning (rules 1-5)

  void plan() {
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
      Node* p = *it;
      if (role_of(*p) == Role::kOther) continue;
      std::vector<int> consumers;
      bool outside_user = false;
      bool all_originals = true;
      for (Value* v : outputs_of(*p)) outside_user = outside_user || graph_outputs_.contains(v);
      for (Node* u : users_[p]) {
        std::vector<int> gs = groups_of(u);
        if (gs.empty()) outside_user = true;
        if (!home_.contains(u) || gs.size() > 1) all_originals = false;
        consumers.insert(consumers.end(), gs.begin(), gs.end());
      }
      std::sort(consumers.begin(), consumers.end());
      consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
      if (consumers.empty()) {
        new_group(p);
      } else if (consumers.size() == 1) {
        if (kinds_allow(*p, consumers) && !would_cycle(consumers, p))
          add_member(p, consumers[0], /*copy=*/false);
        else
          new_group(p);
      } else if (is_cheap(*p)) {
        bool covered = !outside_user;
        for (int gid : consumers) {
          if (kinds_allow(*p, {gid}) && !copy_would_cycle(gid, *p))
            add_member(p, gid, /*copy=*/true);
          else
            covered = false;
        }
        if (!covered) new_group(p);
      } else if (all_originals && kinds_allow(*p, consumers) && !would_cycle(consumers, p)) {
        for (size_t i = 1; i < consumers.size(); ++i) merge(consumers[0], consumers[i]);
        add_member(p, find(consumers[0]), /*copy=*/false);
      } else if (int gid = first_joinable(*p, consumers); gid >= 0) {
        add_member(p, gid, /*copy=*/false);
      } else {
        new_group(p);
      }
    }
  }

  // The consumer group of `p` (by its first user in program order) that `p` may join alone,
  // the others reading it as an output of that group; -1 if none.
  int first_joinable(Node& p, const std::vector<int>& consumers) {
    std::vector<std::pair<int, int>> by_position;  // (first user position, group)
    for (int gid : consumers) {
      int first = std::numeric_limits<int>::max();
      for (const Node* u : users_[&p])
        if (in_group(u, gid)) first = std::min(first, pos_.at(u));
      by_position.emplace_back(first, gid);
    }
    std::sort(by_position.begin(), by_position.end());
    for (const auto& [first, gid] : by_position)
      if (kinds_allow(p, {gid}) && !would_cycle({gid}, &p)) return gid;
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
    for (size_t gid = 0; gid < groups_.size(); ++gid) {
      if (find(int(gid)) != int(gid) || groups_[gid].members.size() < 2) continue;
      int last = 0;
      for (const Node* m : groups_[gid].members) last = std::max(last, pos_[m]);
      order.emplace_back(last, int(gid));
    }
    std::sort(order.begin(), order.end());
    std::unordered_set<int> fused;
    for (const auto& [last, gid] : order) fused.insert(gid);

    std::unordered_map<const Value*, Value*> replacement;
    std::unordered_map<const Node*, int> key;
    std::unordered_set<const Node*> inlined_constants;
    for (const auto& [last, gid] : order) {
      Node* f = build(gid, fused, replacement, inlined_constants);
      if (f != nullptr) key[f] = last;
    }
    // Erase the originals of fused nodes and the nodes that live on only as copies.
    std::unordered_set<const Node*> erase;
    for (Node* n : nodes_)
      if (erased(n, fused)) erase.insert(n);
    if (erase.empty()) return false;
    for (const auto& [from, to] : replacement) g_.replace_all_uses(const_cast<Value*>(from), to);
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
  bool erased(const Node* n, const std::unordered_set<int>& fused) {
    if (auto h = home_.find(n); h != home_.end()) return fused.contains(find(h->second));
    auto c = copies_.find(n);
    if (c == copies_.end() || c->second.empty()) return false;
    for (int gid : c->second)
      if (!fused.contains(find(gid))) return false;
    return true;
  }

  // Builds the fusion node of group `gid` (appended to the graph); null if it has no outputs.
  Node* build(int gid, const std::unordered_set<int>& fused,
              std::unordered_map<const Value*, Value*>& replacement,
              std::unordered_set<const Node*>& inlined_constants) {
    std::vector<Node*> members = groups_[size_t(gid)].members;
    std::sort(members.begin(), members.end(),
              [&](const Node* a, const Node* b) { return pos_[a] < pos_[b]; });
    std::unordered_set<const Node*> member_set(members.begin(), members.end());

    // Which values of this group are read outside it.
    std::vector<Value*> outputs;
    for (Node* m : members) {
      auto h = home_.find(m);
      if (h == home_.end() || find(h->second) != gid) continue;  // a copy: its home serves
      Value* v = m->output(0);
      bool needed = graph_outputs_.contains(v);
      for (Node* u : users_[m]) {
        if (!erased(u, fused)) needed = true;  // a plain node reads it
        for (int ug : groups_of(u))
          if (fused.contains(ug) && ug != gid && !in_group(m, ug)) needed = true;
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
    const Group& g = groups_[size_t(gid)];
    std::string kind = g.contraction ? "contraction" : g.has_reduction ? "reduction" : "loop";
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
    std::vector<Node*> all;
    for (const auto& n : g_.nodes()) all.push_back(n.get());
    std::unordered_map<const Node*, std::vector<Node*>> succ;
    for (Node* n : all)
      for (const Value* v : n->inputs())
        if (Node* p = v->producer(); p != nullptr) add_unique(succ[p], n);
    order_edges(all, succ);
    std::unordered_map<const Node*, int> indegree;
    for (Node* n : all) indegree[n];
    for (const auto& [from, tos] : succ)
      for (Node* to : tos)
        if (indegree.contains(from)) ++indegree[to];
    auto key_of = [&](const Node* n) {
      auto it = fusion_key.find(n);
      return it != fusion_key.end() ? it->second : pos_.at(n);
    };
    using Item = std::pair<std::pair<int, int>, Node*>;  // ((key, tie), node)
    std::unordered_map<const Node*, int> tie;
    for (size_t i = 0; i < all.size(); ++i) tie[all[i]] = int(i);
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
    for (Node* n : all)
      if (indegree[n] == 0) ready.push({{key_of(n), tie[n]}, n});
    std::vector<const Node*> order;
    while (!ready.empty()) {
      Node* n = ready.top().second;
      ready.pop();
      order.push_back(n);
      if (auto it = succ.find(n); it != succ.end())
        for (Node* s : it->second)
          if (--indegree[s] == 0) ready.push({{key_of(s), tie[s]}, s});
    }
    KILN_ASSERT(order.size() == all.size(), "fusion: the planned groups form a cycle");
    g_.reorder_nodes(order);
  }

  Graph& g_;
  int& counter_;
  std::vector<Node*> nodes_;
  std::unordered_map<const Node*, int> pos_;
  std::unordered_map<const Node*, std::vector<Node*>> users_;
  std::unordered_map<const Node*, std::vector<Node*>> succ_;  // assignment-order edges
  std::unordered_set<const Value*> graph_outputs_;
  std::vector<Group> groups_;
  std::vector<int> parent_;
  std::unordered_map<const Node*, int> home_;
  std::unordered_map<const Node*, std::vector<int>> copies_;
};

bool fuse_graph(Graph& g, int& counter) {
  bool changed = false;
  for (const auto& n : g.nodes())
    if (n->kind() == NodeKind::kCond || n->kind() == NodeKind::kWhile)
      for (const auto& sub : n->subgraphs()) changed |= fuse_graph(*sub, counter);
  changed |= Planner(g, counter).run();
  return changed;
}

class Fusion final : public Pass {
 public:
  std::string_view name() const override { return "fusion"; }
  bool run(Graph& g) override {
    int counter = 0;
    return fuse_graph(g, counter);
  }
};

}  // namespace

std::unique_ptr<Pass> make_fusion() { return std::make_unique<Fusion>(); }

}  // namespace kiln::passes
