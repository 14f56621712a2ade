// From an optimized graph with concrete shapes to a runtime::Executable: fusion groups and
// every lone op the emitter can lower become JIT kernels (compiled together, through the
// caches: codegen/compiler.h), contraction groups become library GEMM / conv calls followed
// by their epilogue kernel, other ops keep their eager kernels, assignments become stores,
// cond / while bodies are compiled recursively.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/codegen/compiler.h"
#include "kiln/ir/graph.h"
#include "kiln/passes/memory_plan.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/executable.h"

namespace kiln::codegen {

// A buffer of an executable's scratch area: live only while its step runs.
struct ScratchBuffer {
  std::string step;  // the step's name (its fusion group)
  std::string role;  // "contraction product" or "kernel temporary"
  TensorType type;
  size_t offset = 0;  // arena offset
};

// The arena of one executable exactly as compile_graph lays it out: the graph's values at the
// offsets of passes::plan_memory without in-place reuse (kernel buffers never alias), then a
// scratch area from `scratch_offset` that every step reuses for its contraction product and
// kernel temporaries. arena_bytes == Executable::arena_bytes(), the bytes each call's arena
// has. Some values the plan places in the arena are kept elsewhere by the executable (a
// variable's new value: pooled, outlives the call; cond / while results: returned by the
// nested executable): `elsewhere` names them, their planned bytes stay unused. Cond / while
// bodies are nested executables with arenas of their own (not counted here). Points at the
// optimized graph's values: valid while that graph lives unchanged.
struct ArenaLayout {
  // plan_memory(graph, {.in_place = false, .views = the reshapes that stay in the arena})
  passes::MemoryPlan plan;
  std::vector<std::pair<const ir::Value*, std::string>> elsewhere;  // value, "pooled" | "external"
  size_t scratch_offset = 0;
  std::vector<ScratchBuffer> scratch;
  size_t arena_bytes = 0;

  // "# arena 60.2 KiB = planned values 40.0 KiB (lower bound ..., ...) + scratch 20.2 KiB ..."
  std::string summary() const;
  // summary(), then one line per value and per gradient bucket (MemoryPlan::to_table) and one
  // per scratch buffer.
  std::string to_text(const ir::Graph& g) const;
};

// One kernel an executable calls (sub-graph executables included): its request (the body
// lives as long as the CompiledGraph) and how it was compiled.
struct KernelRecord {
  KernelRequest request;
  CompiledKernel compiled;
};

// Everything compile_graph produced for one graph.
struct CompiledGraph {
  std::shared_ptr<const runtime::Executable> executable;
  ArenaLayout arena;  // of the top-level executable
  std::vector<KernelRecord> kernels;
  std::vector<std::unique_ptr<ir::Graph>> kernel_bodies;  // one-op bodies the requests use
};

// Gradient buckets in compiled steps (passes/memory_plan.h, docs/distributed.md): the most
// bytes of all_reduce results one sum covers. set_bucket_bytes()'s value, else
// KILN_BUCKET_BYTES, else 1 MiB; 0: every all_reduce sums alone. Every rank must use the same
// value (the ranks' sums must match).
size_t bucket_bytes();
// nullopt: back to KILN_BUCKET_BYTES / the default. Applies to graphs compiled afterwards.
void set_bucket_bytes(std::optional<size_t> bytes);
inline constexpr size_t kDefaultBucketBytes = size_t(1) << 20;

// `graph` must be verified and have fully known shapes (kiln::Error naming the value otherwise).
// It must outlive the result's arena layout and kernel requests (they point into it).
CompiledGraph compile_graph_in_full(const ir::Graph& graph);
// compile_graph_in_full(graph).executable.
std::shared_ptr<const runtime::Executable> compile_graph(const ir::Graph& graph);

// The whole path for a traced graph: a copy specialised to `argument_types` (unknown
// dimensions fixed, passes/refine_shapes.h), a copy of that optimized with
// passes::optimize_pipeline (options), then compile_graph_in_full. Every stage is kept (for
// dumps: one compilation result, frontend/function/compiled_form.h).
struct CompiledFunction {
  std::unique_ptr<ir::Graph> specialized;  // the pipeline's input
  std::unique_ptr<ir::Graph> optimized;
  std::vector<passes::PassTiming> pass_timings;
  double optimize_seconds = 0;  // specialise + pipeline
  double codegen_seconds = 0;   // compile_graph_in_full (kernels, executable)
  CompiledGraph code;           // of *optimized
};
CompiledFunction compile_function(const ir::Graph& traced,
                                  const std::vector<TensorType>& argument_types,
                                  const passes::PipelineOptions& options);

// The kernel requests compile_graph makes for `graph` (top level, then sub-graphs), with
// the one-op bodies it builds kept in `owned`. For dumps (`kiln dump-ir --stage llvm|asm`).
std::vector<KernelRequest> kernel_requests(const ir::Graph& graph,
                                           std::vector<std::unique_ptr<ir::Graph>>& owned);

}  // namespace kiln::codegen
