// The fusion planner's groups and the graph of "units" they form (passes/fusion.cc; internal).
//
// Nodes are named by their position in program order. A group holds nodes as originals (the
// node's home: its value leaves the group from there) or as copies (a rematerialized cheap
// node, used inside that group only). A unit is a group or a node in no group; unit X has an
// edge to unit Y when a value made in X (by a home member, or by the lone node) is read in Y
// by a node that does not hold its own copy of it, or when an assignment-order edge (a store
// after the previous store, after every read of the value it supersedes) links a member of X
// to a member of Y. Fusing is only sound while this graph stays acyclic.
//
// FusionUnits keeps a topological order of the units (a rank per unit) as groups grow, with
// Pearce and Kelly's bounded search: whether contracting a set S of units closes a cycle is
// answered by walking forward from S through units ranked below S's highest rank only (a
// path back into S cannot leave that window), and after the contraction only the units found
// between S's lowest and highest ranks are renumbered. Each merge therefore costs the size of
// its window, not of everything downstream (the planner was quadratic in the graph without it).
#pragma once

#include <unordered_map>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {

class FusionUnits {
 public:
  using Unit = int;  // >= 0: a group (its root id); < 0: the lone node at position -unit-1

  struct Group {
    std::vector<int> members;  // positions, originals and copies, each once
  };

  // `nodes` in program order; `succ` the assignment-order edges by position (each target
  // after its source in program order, or the order is recomputed).
  FusionUnits(std::vector<ir::Node*> nodes, std::vector<std::vector<int>> succ);

  size_t size() const { return nodes_.size(); }
  ir::Node* node(int pos) const { return nodes_[size_t(pos)]; }
  int position(const ir::Node* n) const;  // -1 when `n` is not one of the nodes
  const std::vector<int>& users(int pos) const { return users_[size_t(pos)]; }

  // ---- groups (union-find over group ids)
  int find(int gid);
  const Group& group(int gid) const { return groups_[size_t(gid)]; }
  size_t group_count() const { return groups_.size(); }
  int home(int pos);  // the root of the node's home group, -1 if none
  bool has_copies(int pos) const { return !copies_[size_t(pos)].empty(); }
  std::vector<int> groups_of(int pos);  // home and copy groups, roots, sorted, unique
  bool in_group(int pos, int gid);

  // A new group holding the node (which is in no group as an original).
  int new_group(int pos);
  // The node joins group `gid` as its original: its lone unit is contracted into the group.
  // The caller has checked would_cycle({gid}, pos).
  void join(int pos, int gid);
  // The node is copied into `gid`. The caller has checked copy_would_cycle(gid, pos).
  void copy(int pos, int gid);
  // Merges groups `gids` and the node (as its original) into gids[0]'s group; returns its
  // root. The caller has checked would_cycle(gids, pos).
  int merge_with(const std::vector<int>& gids, int pos);

  // Would contracting the groups `gids` and the lone node `pos` into one unit close a cycle?
  bool would_cycle(const std::vector<int>& gids, int pos);
  // Would copying node `pos` into `gid` close a cycle (through the copy's assignment-order
  // edges, the only edges out of the group it adds)?
  bool copy_would_cycle(int gid, int pos);

  // Debugging aid (tests): true when every edge goes from a lower to a higher rank.
  bool order_is_topological();

 private:
  int rank(Unit u) const { return u < 0 ? node_rank_[size_t(-u - 1)] : group_rank_[size_t(u)]; }
  std::vector<Unit> units_of(int pos);
  bool in_unit(int pos, Unit u);
  void members_of(Unit u, std::vector<int>& out) const;
  void successors(Unit x, std::vector<Unit>& out);
  void predecessors(Unit y, std::vector<Unit>& out);
  bool marked(Unit u) const;
  void mark(Unit u);
  void new_epoch();
  // Forward search from `set` through units ranked below `hi`: fills `found`; true if it
  // reaches `set` (a cycle).
  bool search_forward(const std::vector<Unit>& set, int hi, std::vector<Unit>& found);
  void search_backward(const std::vector<Unit>& set, int lo, std::vector<Unit>& found);
  // Restores a topological order after `set` became the one unit `into` (a group root), with
  // its edges as they now are. `lo` and `hi` bound the ranks the change involves.
  void reorder(const std::vector<Unit>& set, Unit into, int lo, int hi);
  void initial_ranks();

  std::vector<ir::Node*> nodes_;
  std::unordered_map<const ir::Node*, int> position_;
  std::vector<std::vector<int>> users_, producers_, succ_, pred_;
  std::vector<Group> groups_;
  std::vector<int> parent_;
  std::vector<int> home_;  // by position: group id (not necessarily a root) or -1
  std::vector<std::vector<int>> copies_;
  std::vector<int> node_rank_, group_rank_;
  std::vector<int> node_mark_, group_mark_;
  int epoch_ = 0;
};

}  // namespace kiln::passes
