// Index arithmetic of the kernel emitter (codegen/lower_kernel.cc): which element of an
// operand a fused op reads when it computes the element at a given index of its result
// (transpose permutes, slice scales and offsets, reshape re-linearises, broadcasts align from
// the right and pin size-1 dimensions at 0, flat loops share one linear index), and the
// row-major offset of an index in a buffer.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <vector>

#include "kiln/codegen/kernel_plan.h"
#include "kiln/ir/graph.h"

namespace kiln::codegen {

using Index = std::vector<llvm::Value*>;

// The index of operand i of `n` read when computing `n` at `idx` (in a kernel iterating in
// `mode`).
Index operand_index(llvm::IRBuilder<>& b, IterationMode mode, const ir::Node& n, size_t i,
                    const Index& idx);

// The index into a tensor of shape `in` holding the element a reshape to `out` puts at `idx`.
Index reshape_index(llvm::IRBuilder<>& b, const Shape& in, const Shape& out, const Index& idx);

// The row-major offset of `idx` in a buffer of shape `s`; `row_only`: the buffer holds one row
// (the leading dimension is not part of the offset).
llvm::Value* row_major_offset(llvm::IRBuilder<>& b, const Shape& s, bool row_only,
                              const Index& idx);

}  // namespace kiln::codegen
