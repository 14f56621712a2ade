// Which overwriting outputs a kernel can honour (codegen/lower_kernel.h): an output written into
// the buffer of one of the kernel's inputs, as a variable's new value into its old one
// (runtime::KernelLayout::overwrites). Overwriting the input is safe when no element of it is
// read after it was overwritten:
//   flat    an input of the output's element count is read only at the element being
//           computed (the emitter loads it before storing anything for that element);
//   rows /  the output reads the input only at the index it computes (through elementwise
//   serial  ops of one shape), no value materialized after it reads the input, and by rows
//           the input is read only at the row being computed.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "kiln/codegen/kernel_plan.h"
#include "kiln/ir/graph.h"

namespace kiln::codegen {

// The pairs of `requested` (output index, input index) that `body` (decomposed, planned as
// `plan`) can honour; each input and each output takes part in one pair at most.
std::vector<std::pair<size_t, size_t>> honoured_overwrites(
    const ir::Graph& body, const KernelPlan& plan,
    const std::vector<std::pair<size_t, size_t>>& requested);

}  // namespace kiln::codegen
