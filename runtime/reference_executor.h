// The reference executor: runs an IR graph node by node with the eager kernels. It is the
// test oracle for the compilers: whatever they do, their results must match this one.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "runtime/array.h"

namespace kiln::runtime {

// Runs `graph` node by node with the eager kernels (run_kernel), the test oracle for later
// compilers. The graph must be valid (ir::verify_graph; traced and parsed graphs are verified
// once when made), so the per-call cost is only the kernels.
//
// `args`: one Array per graph parameter, with the parameter's dtype and rank and its known
// dimensions (an unknown dimension matches any size). `variables`: one Array per graph variable
// (graph.variables()), checked the same way; they are the variables' entry values, and each
// assignment node replaces its variable's Array with the new value, in program order.
// Op node types are re-inferred from the concrete input shapes, so a graph with unknown
// dimensions runs at any size. Sub-graphs (cond / while / fusion
// bodies) run recursively.
// Returns the graph outputs (the same Array may appear more than once). Results are bitwise
// equal to calling runtime::run_op for each node in program order.
std::vector<Array> execute_reference(const ir::Graph& graph, std::span<const Array> args,
                                     std::vector<Array>& variables);

}  // namespace kiln::runtime
