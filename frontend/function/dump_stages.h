// KILN_DUMP_IR=DIR for traced functions: each trace writes DIR/<function>.<n>/ with
// 000.input.kir (the traced graph), the optimize pipeline's NNN.after.<pass>.kir files
// (filtered by KILN_DUMP_PASSES) and memory_plan.txt; each compiled specialisation (one per
// argument shapes) writes DIR/<function>.compiled.<n>/ with the kernels' LLVM IR and assembly.
#pragma once

#include "ir/graph.h"

namespace kiln::detail {

// Does nothing unless KILN_DUMP_IR is set.
void dump_trace_stages(const ir::Graph& traced);

// With KILN_DUMP_IR=DIR, writes a compiled specialisation to DIR/<function>.compiled.<n>/:
// optimized.kir (specialised and optimized graph) and kernels/<group>.ll (O3 LLVM IR) and
// kernels/<group>.s (assembly) for every kernel. Failures become a warning.
void dump_compiled_kernels(const ir::Graph& optimized);

}  // namespace kiln::detail
