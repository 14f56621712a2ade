// From an optimized graph with concrete shapes to a runtime::Executable: fusion groups and
// every lone op the emitter can lower become JIT kernels (compiled together, through the
// caches: codegen/compiler.h), contraction groups become library GEMM / conv calls followed
// by their epilogue kernel, other ops keep their eager kernels, assignments become stores,
// cond / while bodies are compiled recursively. Where each node's values live is
// codegen/arena_layout.h; which kernels update a variable in its own buffer is
// codegen/variable_updates.h. The whole path from a traced graph is codegen/compile_driver.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/codegen/arena_layout.h"
#include "kiln/codegen/compiler.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/executable.h"

namespace kiln::codegen {

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

// `graph` must be verified and have fully known shapes (kiln::Error naming the value otherwise).
// It must outlive the result's arena layout and kernel requests (they point into it).
CompiledGraph compile_graph_in_full(const ir::Graph& graph);
// compile_graph_in_full(graph).executable.
std::shared_ptr<const runtime::Executable> compile_graph(const ir::Graph& graph);

// The kernel requests compile_graph makes for `graph` (top level, then sub-graphs), with
// the one-op bodies it builds kept in `owned`. For dumps (`kiln dump-ir --stage llvm|asm`).
std::vector<KernelRequest> kernel_requests(const ir::Graph& graph,
                                           std::vector<std::unique_ptr<ir::Graph>>& owned);

}  // namespace kiln::codegen
