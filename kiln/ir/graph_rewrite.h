// A pass's batch of local rewrites of one graph, applied in linear time.
//
// Passes that visit every node and replace or insert many of them (constant folding,
// algebraic simplification, lowering assignments, fusion) would be quadratic with
// Graph::replace_all_uses / move_before, each of which walks the whole graph. GraphRewrite
// records the edits instead:
//   - replace(from, to): uses of `from` read `to`. Users of a value come after it in program
//     order, so a pass visiting nodes in program order that calls visit(n) first sees every
//     replacement made so far in n's inputs (exactly what an immediate replace_all_uses would
//     give it); finish() rewrites the rest (graph outputs, nodes added during the pass),
//     following chains (a -> b, b -> c reads c).
//   - insert_before(added, anchor): a node just built with Graph::add_* (which appends) goes
//     right before `anchor`; several nodes anchored to one node keep the order of the calls.
//   - erase(n): the node is removed by finish() (the caller guarantees no use remains once
//     the replacements are applied).
// finish() applies everything in one pass over the nodes and returns whether anything changed.
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::ir {

class GraphRewrite {
 public:
  explicit GraphRewrite(Graph& g);

  // The graph's nodes when the rewrite began, in program order (nodes added later are not in
  // it: passes visit only the original nodes).
  const std::vector<Node*>& original_nodes() const { return original_; }

  // Points n's inputs at the replacements recorded so far.
  void visit(Node& n) const;
  // The value `v` reads as after the replacements recorded so far.
  Value* resolve(Value* v) const;

  void replace(Value* from, Value* to);
  void insert_before(const Node* added, const Node* anchor);
  void erase(const Node* n);
  bool erased(const Node* n) const { return erased_.contains(n); }

  // Applies the edits; true when the graph changed (a replacement, an insertion or an erasure).
  bool finish();

 private:
  Graph& g_;
  std::vector<Node*> original_;
  std::unordered_map<const Value*, Value*> replacement_;
  std::unordered_map<const Node*, std::vector<const Node*>> before_;  // anchor -> added nodes
  std::unordered_set<const Node*> inserted_;
  std::unordered_set<const Node*> erased_;
};

}  // namespace kiln::ir
