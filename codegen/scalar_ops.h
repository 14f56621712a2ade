// Scalar semantics of kiln's elementwise ops in LLVM IR: one op applied to one element of
// each operand (the kernel emitter calls this inside its loops; the loop vectorizer widens
// it). Values are in register types: float, double, i32, i64, i8 (uint8) and i1 (bool).
//
// The semantics follow the eager kernels (runtime/kernels/elementwise.cc): maximum/minimum
// and relu propagate NaN, integer division truncates (x / -1 wraps), casts from floats to
// integers saturate (eager: undefined out of range), transcendental functions come from
// codegen/vector_math.h for float32 (documented errors) and the C library for float64.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <span>

#include "ir/attrs.h"
#include "ir/op_table.h"

namespace kiln::codegen {

// The register type of a dtype (bool: i1) and its storage type in memory (bool: i8).
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

}  // namespace kiln::codegen
