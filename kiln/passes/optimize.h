// Node and kernel counts of a graph, for the summaries of optimized graphs (`kiln dump-ir
// --stage optimized`, KILN_DUMP_IR, kiln::CompiledForm::summary). The optimization itself is
// done once per compilation (codegen::compile_function, codegen/compile_driver.h); its stages
// are kept there.
#pragma once

#include <cstddef>

#include "kiln/ir/graph.h"

namespace kiln::passes {

// Kernels a graph launches: fusion nodes and op nodes outside fusions (constants, parameters
// and assignments, which are stores, are not kernels).
struct GraphCounts {
  size_t nodes = 0;  // top-level nodes
  size_t kernels = 0;
  size_t fusions = 0;
};
GraphCounts count_graph(const ir::Graph& g);

}  // namespace kiln::passes
