// KILN_DUMP_IR=DIR for traced functions: each trace writes DIR/<function>.<n>/ with
// 000.input.kir (the traced graph), the optimize pipeline's NNN.after.<pass>.kir files
// (filtered by KILN_DUMP_PASSES) and memory_plan.txt; each compiled specialisation (one per
// argument shapes) writes DIR/<function>.compiled.<n>/ with the kernels' LLVM IR and assembly.
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"

namespace kiln::detail {

// Does nothing unless KILN_DUMP_IR is set.
void dump_trace_stages(const ir::Graph& traced);

// With KILN_DUMP_IR=DIR: a new directory DIR/<function>.compiled.<n> for one compiled
// specialisation (the pass pipeline writes its stages there); nullopt when unset.
std::optional<std::string> compiled_dump_dir(const std::string& function);
// Writes optimized.kir (the specialised, optimized graph) and kernels/<group>.ll (O3 LLVM IR)
// and kernels/<group>.s (assembly) of every kernel to `dir`. Failures become a warning.
void dump_compiled_kernels(const ir::Graph& optimized, const std::string& dir);

}  // namespace kiln::detail
