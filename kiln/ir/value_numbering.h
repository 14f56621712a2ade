// ValueNumbering: the canonical `%N` names of one graph's values, shared by the printer, the
// verifier's messages and DOT export. Parameters come first (0..P-1), then variable entry
// values, then node outputs in program order. Each sub-graph numbers its own values from 0.
#pragma once

#include <string>
#include <unordered_map>

#include "kiln/ir/graph.h"

namespace kiln::ir {

class ValueNumbering {
 public:
  explicit ValueNumbering(const Graph& graph);
  // The number of `v`, or -1 when `v` does not belong to this graph (not counting sub-graphs).
  int number(const Value* v) const;
  // "%12", or "%<foreign>" for a value of another graph.
  std::string ref(const Value* v) const;

 private:
  std::unordered_map<const Value*, int> numbers_;
};

// How messages name a node: `%12 = matmul "dense_1/matmul" (model.cc:40:7)`.
std::string describe_node(const Node& node, const ValueNumbering& numbering);

}  // namespace kiln::ir
