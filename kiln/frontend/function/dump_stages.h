// KILN_DUMP_IR=DIR for traced functions. Each trace writes DIR/<function>.<n>/traced.kir (the
// graph as recorded; nothing is optimized for the dump). Each compiled specialisation (one per
// argument shapes) writes DIR/<function>.compiled.<n>/ from its one compilation result
// (kiln::CompiledForm): the optimize pipeline's 000.input.kir (the specialised graph) and
// NNN.after.<pass>.kir (filtered by KILN_DUMP_PASSES), optimized.kir, memory_plan.txt (the
// executable's arena layout), kernels.txt (per-kernel compile statistics), passes.txt (pass
// timings, then each pass's statistics) and kernels/<group>.ll (O3 LLVM IR) and kernels/<group>.s
// (assembly).
#pragma once

#include <optional>
#include <string>

#include "kiln/frontend/function/compiled_form.h"
#include "kiln/ir/graph.h"

namespace kiln::detail {

// Does nothing unless KILN_DUMP_IR is set. Failures become a warning.
void dump_trace_stages(const ir::Graph& traced);

// With KILN_DUMP_IR=DIR: a new directory DIR/<function>.compiled.<n> for one compiled
// specialisation (the pass pipeline writes its stages there); nullopt when unset.
std::optional<std::string> compiled_dump_dir(const std::string& function);
// Writes the files of `form` listed above (but the pipeline's) to `dir`. Failures become a
// warning.
void dump_compiled_form(const CompiledForm& form, const std::string& dir);

// With KILN_REPORT=DIR: writes the step report of `form` (frontend/function/report.h, without
// times: nothing runs for it) to DIR/<function>.<n>.html. Failures become a warning.
void report_compiled_form(const CompiledForm& form, const std::string& function);

}  // namespace kiln::detail
