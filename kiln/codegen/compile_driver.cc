#include "kiln/codegen/compile_driver.h"

#include <chrono>

#include "kiln/passes/refine_shapes.h"

namespace kiln::codegen {

CompiledFunction compile_function(const ir::Graph& traced,
                                  const std::vector<TensorType>& argument_types,
                                  const passes::PipelineOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  CompiledFunction out;

  // Specialise: the traced graph's unknown dimensions fixed by the arguments.
  out.specialized = traced.clone();
  passes::specialize_parameters(*out.specialized, argument_types);

  // Optimize: the compilation pipeline, on a copy (both stages are kept).
  out.optimized = out.specialized->clone();
  passes::PassPipeline pipeline = passes::optimize_pipeline(options);
  pipeline.run(*out.optimized);
  out.pass_timings = pipeline.timings();
  const auto optimized = Clock::now();
  out.optimize_seconds = std::chrono::duration<double>(optimized - start).count();

  // Plan memory, build the steps and kernels, make the executable.
  out.code = compile_graph_in_full(*out.optimized);
  out.codegen_seconds = std::chrono::duration<double>(Clock::now() - optimized).count();
  return out;
}

}  // namespace kiln::codegen
