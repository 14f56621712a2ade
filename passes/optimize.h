// One call for "the optimized version of a graph": a copy of the graph (through the IR text,
// so the input stays untouched) run through optimize_pipeline, with counts and, when every
// shape is known, the memory plan. Used by `kiln dump-ir --stage optimized` and by the
// KILN_DUMP_IR stage dumps of traced functions.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "passes/memory_plan.h"
#include "passes/pipeline.h"

namespace kiln::passes {

// Kernels a graph launches: fusion nodes and op nodes outside fusions (constants, parameters
// and assignments, which are stores, are not kernels).
struct GraphCounts {
  size_t nodes = 0;  // top-level nodes
  size_t kernels = 0;
  size_t fusions = 0;
};
GraphCounts count_graph(const ir::Graph& g);

struct OptimizedGraph {
  std::unique_ptr<ir::Graph> graph;
  GraphCounts before, after;
  std::optional<MemoryPlan> plan;  // none when a shape is unknown
  // "# nodes 142 -> 24, kernels 95 -> 10 (7 fusions); memory: arena ... " comment lines.
  std::string summary() const;
};

OptimizedGraph optimize_copy(const ir::Graph& g, const PipelineOptions& options);

}  // namespace kiln::passes
