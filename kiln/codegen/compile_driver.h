// The compile driver: the whole path from a traced graph to its executable, in one place.
//
//   traced graph
//     -> specialise   a copy with the argument types' dimensions fixed (passes/refine_shapes.h)
//     -> optimize     a copy of that through passes::optimize_pipeline (simplify, hoist loop
//                     transposes, lower assignments, fusion, schedule collectives)
//     -> plan memory  codegen/arena_layout.h over codegen/memory_plan.h
//     -> codegen      steps and kernels (codegen/compile_graph.h)
//     -> executable   runtime::Executable
//
// Every stage is kept (for dumps: one compilation result, frontend/function/compiled_form.h):
// what the dumps show is what runs.
#pragma once

#include <memory>
#include <vector>

#include "kiln/codegen/compile_graph.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/pipeline.h"

namespace kiln::codegen {

struct CompiledFunction {
  std::unique_ptr<ir::Graph> specialized;  // the pipeline's input
  std::unique_ptr<ir::Graph> optimized;
  std::vector<passes::PassTiming> pass_timings;
  double optimize_seconds = 0;  // specialise + pipeline
  double codegen_seconds = 0;   // compile_graph_in_full (memory plan, kernels, executable)
  CompiledGraph code;           // of *optimized
};

// `traced` is left alone; `options` configure the pipeline (verification, disabled passes,
// IR dumps).
CompiledFunction compile_function(const ir::Graph& traced,
                                  const std::vector<TensorType>& argument_types,
                                  const passes::PipelineOptions& options);

}  // namespace kiln::codegen
