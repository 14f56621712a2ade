// The IR verifier: checks a Graph's structural invariants (SSA def-before-use, closed
// sub-graphs, op types against the op table, constants, assignments and the variable registry,
// the stale-variable-value rule, cond / while signatures) and throws kiln::Error on the first
// problem. Passes and the tracer run it after building or rewriting a graph.
//
// Messages name the graph path and the node with the printer's value numbers:
//   verifier: graph @train_step: node %12 = matmul "dense/matmul": <problem>
//   verifier: graph @train_step / cond %12 then: node %3 = add: <problem>
//   verifier: graph @train_step: output 1: <problem>
#pragma once

#include "kiln/ir/graph.h"

namespace kiln::ir {

// Throws kiln::Error describing the first invariant `g` (or one of its sub-graphs) breaks.
void verify_graph(const Graph& g);

}  // namespace kiln::ir
