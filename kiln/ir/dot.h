// Graphviz DOT export of an IR graph, for looking at graphs: `dot -Tsvg graph.dot -o graph.svg`.
//
// Output (deterministic; ids follow program order), for example:
//   digraph "train_step" {
//     p0 [shape=box, label="%0\nparam 0\nf32[?,784]"];
//     v0 [shape=box, label="$0 dense/kernel\nf32[784,128]"];
//     n0 [label="dense/matmul\nmatmul\nf32[?,128]"];
//     p0 -> n0;
//     v0 -> n0;
//     n3 [label="assign_sub $0\nf32[784,128]", style=bold, color=red];
//     n3 -> v0 [style=bold, color=red, constraint=false];
//     return [label="return"];
//     n0 -> return;
//   }
// Parameters (pN) and variable entry values (vN) are boxes; each node nK is labelled with its
// name (when set), its op (assignments also name the variable; splat constants show their
// value) and its output types. Edges go from producer to consumer; an assignment is bold red
// with a bold red edge to the variable it assigns; the graph's outputs lead to `return`.
// An edge from a multi-output producer is labelled with the output index. The sub-graphs of
// cond / while nodes are clusters (`subgraph cluster_N { label="then"; ... }`, N counting
// clusters in output order) whose ids are prefixed `cN_`; dashed edges lead from the
// control-flow node to the sub-graph's parameters. Labels escape `"` and `\`.
#pragma once

#include <string>

#include "kiln/ir/graph.h"

namespace kiln::ir {

// The DOT text of `g` (format above), ending with a newline.
std::string graph_to_dot(const Graph& g);

}  // namespace kiln::ir
