// Scalar semantics of kiln's elementwise ops in LLVM IR: one op applied to one element of
// each operand (the kernel emitter calls this inside its loops; the loop vectorizer widens
// it). Values are in register types: float, double, i32, i64, i8 (uint8), i1 (bool), and
// float for bfloat16 (a bf16 result is rounded by the caller: codegen/bf16_values.h; casts to
// bf16 round here).
//
// The semantics follow the eager kernels (runtime/kernels/elementwise_*.cc): maximum/minimum
// and relu propagate NaN, integer division truncates (x / -1 wraps), casts from floats to
// integers saturate (eager: undefined out of range), transcendental functions come from
// codegen/vector_math.h for float32 (documented errors) and the C library for float64.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <span>

#include "kiln/ir/attrs.h"
#include "kiln/ir/op_table.h"

namespace kiln::codegen {

// The register type of a dtype (bool: i1, bf16: float) and its storage type in memory (bool:
// i8, bf16: i16).
llvm::Type* register_type(llvm::LLVMContext& c, DType t);
llvm::Type* storage_type(llvm::LLVMContext& c, DType t);

struct ScalarOpContext {
  llvm::IRBuilder<>& b;
  llvm::Module& module;
  // Set to true (or'ed) when an integer division meets a zero divisor; may be null.
  llvm::Value* division_by_zero_flag = nullptr;  // an i1 alloca
};

// `op` applied to `args` (the op's operand dtypes `in`, result dtype `out`, attributes).
// Internal error for ops that are not elementwise.
llvm::Value* emit_scalar_op(ScalarOpContext& ctx, OpKind op, std::span<llvm::Value* const> args,
                            DType in, DType out, const Attrs& attrs);

// Reductions (sum, mean, prod, max, min, argmax, argmin; `t` the input dtype, `rt` its
// register type): the accumulator's start value (max: -inf or the smallest integer, ...);
// one combining step, with reassociation allowed for floats so the loop vectorizer keeps
// several vector accumulators (max/min propagate NaN); and argmax/argmin's "v replaces best":
// strictly more extreme, or the first NaN (which nothing replaces afterwards).
llvm::Value* reduction_identity(OpKind op, DType t, llvm::Type* rt);
llvm::Value* emit_reduction_combine(llvm::IRBuilder<>& b, OpKind op, DType t, llvm::Value* acc,
                                    llvm::Value* v);
llvm::Value* emit_arg_replaces(llvm::IRBuilder<>& b, OpKind op, DType t, llvm::Value* v,
                               llvm::Value* best);

}  // namespace kiln::codegen
