// KILN_DUMP_IR=DIR for traced functions: each trace writes DIR/<function>.<n>/ with
// 000.input.kir (the traced graph), the optimize pipeline's NNN.after.<pass>.kir files
// (filtered by KILN_DUMP_PASSES) and memory_plan.txt. The function still runs the traced
// graph; the dumps show what the optimizer makes of it.
#pragma once

#include "ir/graph.h"

namespace kiln::detail {

// Does nothing unless KILN_DUMP_IR is set.
void dump_trace_stages(const ir::Graph& traced);

}  // namespace kiln::detail
