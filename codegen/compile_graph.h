// From an optimized graph with concrete shapes to a runtime::Executable: fusion groups and
// every lone op the emitter can lower become JIT kernels (compiled together, through the
// caches: codegen/compiler.h), contraction groups become library GEMM / conv calls followed
// by their epilogue kernel, other ops keep their eager kernels, assignments become stores,
// cond / while bodies are compiled recursively.
#pragma once

#include <memory>
#include <vector>

#include "codegen/compiler.h"
#include "ir/graph.h"
#include "passes/pipeline.h"
#include "runtime/executable.h"

namespace kiln::codegen {

// `graph` must be verified and have fully known shapes (kiln::Error naming the value otherwise).
std::shared_ptr<const runtime::Executable> compile_graph(const ir::Graph& graph);

// The whole path for a traced graph: a copy specialised to `argument_types` (unknown
// dimensions fixed, passes/refine_shapes.h), optimized with passes::optimize_pipeline
// (options), then compile_graph. Returns the optimized graph too (for dumps).
struct CompiledFunction {
  std::unique_ptr<ir::Graph> optimized;
  std::shared_ptr<const runtime::Executable> executable;
};
CompiledFunction compile_function(const ir::Graph& traced,
                                  const std::vector<TensorType>& argument_types,
                                  const passes::PipelineOptions& options);

// The kernel requests compile_graph makes for `graph` (top level, then sub-graphs), with
// the one-op bodies it builds kept in `owned`. For dumps (`kiln dump-ir --stage llvm|asm`).
std::vector<KernelRequest> kernel_requests(const ir::Graph& graph,
                                           std::vector<std::unique_ptr<ir::Graph>>& owned);

}  // namespace kiln::codegen
