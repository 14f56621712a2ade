// bfloat16 in generated kernels. A bf16 value lives in memory as its 16 bits (storage type
// i16) and in registers as the float32 that holds it exactly (register type float): a load
// widens (the bits shifted into the upper half, exact), every op computes in float32, and a
// result of dtype bf16 is rounded to nearest even right where it is computed, so each bf16
// value of the kernel, stored or not, is the one the eager kernels produce (ops.def's ViaF32:
// the float32 result rounded once). A store then narrows an exact value (it rounds too, for
// the float32 results of reductions, which are rounded as they are stored).
//
// Conversions into bf16 round once from any dtype, as kiln::bfloat16 (ir/bfloat16.h) does:
// float64 and integers are first brought to float32 by rounding to odd, which keeps what the
// final rounding needs.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "kiln/ir/dtype.h"

namespace kiln::codegen {

// i16 bits -> the float32 holding the same value (exact).
llvm::Value* widen_bf16(llvm::IRBuilder<>& b, llvm::Value* bits);
// A float32 -> its bf16 bits (round to nearest even; NaN stays a quiet NaN with its sign;
// overflow to infinity).
llvm::Value* narrow_bf16(llvm::IRBuilder<>& b, llvm::Value* x);
// A float32 -> the float32 holding its bf16 rounding (widen_bf16(narrow_bf16(x))).
llvm::Value* round_to_bf16(llvm::IRBuilder<>& b, llvm::Value* x);
// round_to_bf16(x) for an x that is a bf16 value or a NaN whose lower 16 bits are zero (the
// float32 result of an op that picks or negates bf16 operands: exact_on_bf16 in
// kernel_elements.cc): x, a NaN quieted as the rounding quiets it. Three instructions where
// the rounding takes eight.
llvm::Value* quiet_bf16_nan(llvm::IRBuilder<>& b, llvm::Value* x);
// narrow_bf16(x) for an x whose lower 16 bits are zero (every bf16 value a kernel computes but
// a reduction's float32 result: a widened load, a rounded result, a pick of them): its upper
// half, a NaN quieted as narrow_bf16 quiets it. Two instructions fewer than the rounding per
// stored vector.
llvm::Value* narrow_exact_bf16(llvm::IRBuilder<>& b, llvm::Value* x);
// A value of dtype `from` (in its register type) -> the float32 holding its bf16 rounding, one
// rounding from every dtype.
llvm::Value* convert_to_bf16(llvm::IRBuilder<>& b, llvm::Value* x, DType from);

}  // namespace kiln::codegen
