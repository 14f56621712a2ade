// The running value of one reduction (sum, mean, prod, max, min) in a kernel loop.
//
// The value lives in an alloca (promoted to a register at O3; the loop vectorizer turns it into
// several vector accumulators, codegen/scalar_ops.h emit_reduction_combine). Floating max and
// min take a fast form: the loop combines with a plain compare and select (one vmaxps/vminps
// per vector; llvm.maximum, which propagates NaN and orders -0 < +0, takes six instructions)
// and sums v * 0 into a flag (one fma per vector: NaN once any v is NaN or infinite). After
// the loop, when the flag is NaN or the result is a zero (whose sign the fast form does not
// decide), the loop runs again with the exact combine (llvm.maximum / llvm.minimum), so the
// result is always the exact one: NaN when a NaN was met, +0 over -0 for max (-0 for min).
// Rows that hold NaN, an infinity or a zero maximum therefore cost a second pass.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <functional>

#include "kiln/ir/op_table.h"

namespace kiln::codegen {

class Accumulator {
 public:
  // `allocas` inserts at the top of the entry block; the identity is stored at `b`'s point.
  Accumulator(llvm::IRBuilder<>& b, llvm::IRBuilder<>& allocas, OpKind op, DType t);

  // Combines one element (at `b`'s insertion point).
  void add(llvm::Value* v);

  // After the loop: the reduced value (at `b`'s insertion point). `rescan` emits the loop again,
  // calling add for every element in any order; it is called at most once, for the exact pass
  // of a fast max/min (emitted under a branch taken only when needed).
  llvm::Value* result(const std::function<void()>& rescan);

  // Whether `op` over `t` takes the fast form (max/min over f32 and f64).
  static bool fast(OpKind op, DType t);

 private:
  llvm::IRBuilder<>& b_;
  OpKind op_;
  DType t_;
  llvm::Type* type_;
  llvm::Value* value_;           // alloca
  llvm::Value* flag_ = nullptr;  // alloca, fast form only
  bool exact_ = true;            // add() combines exactly
};

}  // namespace kiln::codegen
