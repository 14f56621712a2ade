#include "kiln/codegen/bf16_values.h"

#include <llvm/IR/Intrinsics.h>

namespace kiln::codegen {
namespace {

// A constant of x's integer type (vector or scalar).
llvm::Value* int_like(llvm::Value* x, uint64_t v) {
  return llvm::ConstantInt::get(x->getType(), v);
}

llvm::Type* with_element(llvm::Type* like, llvm::Type* element) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like))
    return llvm::VectorType::get(element, vt->getElementCount());
  return element;
}

// The float32 bits of x (an i32) rounded to bf16 in place: the upper 16 bits hold the result.
llvm::Value* rounded_bits(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* i32 = with_element(x->getType(), b.getInt32Ty());
  llvm::Value* u = b.CreateBitCast(x, i32);
  // Nearest even: add 0x7FFF and the lowest kept bit; the carry rounds up (into the exponent
  // where the fraction overflows, up to infinity).
  llvm::Value* lsb = b.CreateAnd(b.CreateLShr(u, int_like(u, 16)), int_like(u, 1));
  llvm::Value* rounded = b.CreateAdd(b.CreateAdd(u, int_like(u, 0x7FFF)), lsb);
  // NaN: the upper half with the quiet bit set (adding could carry a NaN into infinity).
  llvm::Value* nan = b.CreateFCmpUNO(x, x);
  llvm::Value* quiet = b.CreateOr(u, int_like(u, 0x00400000));
  return b.CreateSelect(nan, quiet, rounded);
}

}  // namespace

llvm::Value* widen_bf16(llvm::IRBuilder<>& b, llvm::Value* bits) {
  llvm::Type* i32 = with_element(bits->getType(), b.getInt32Ty());
  llvm::Value* wide = b.CreateShl(b.CreateZExt(bits, i32), llvm::ConstantInt::get(i32, 16));
  return b.CreateBitCast(wide, with_element(bits->getType(), b.getFloatTy()));
}

llvm::Value* narrow_bf16(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* r = rounded_bits(b, x);
  return b.CreateTrunc(b.CreateLShr(r, int_like(r, 16)),
                       with_element(x->getType(), b.getInt16Ty()));
}

llvm::Value* round_to_bf16(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* r = rounded_bits(b, x);
  return b.CreateBitCast(b.CreateAnd(r, int_like(r, 0xFFFF0000u)), x->getType());
}

llvm::Value* quiet_bf16_nan(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Type* i32 = with_element(x->getType(), b.getInt32Ty());
  llvm::Value* u = b.CreateBitCast(x, i32);
  llvm::Value* quiet = b.CreateOr(u, int_like(u, 0x00400000));
  return b.CreateBitCast(b.CreateSelect(b.CreateFCmpUNO(x, x), quiet, u), x->getType());
}

llvm::Value* narrow_exact_bf16(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* u =
      b.CreateBitCast(quiet_bf16_nan(b, x), with_element(x->getType(), b.getInt32Ty()));
  return b.CreateTrunc(b.CreateLShr(u, int_like(u, 16)),
                       with_element(x->getType(), b.getInt16Ty()));
}

llvm::Value* convert_to_bf16(llvm::IRBuilder<>& b, llvm::Value* x, DType from) {
  llvm::Type* f32 = with_element(x->getType(), b.getFloatTy());
  llvm::Type* i32 = with_element(x->getType(), b.getInt32Ty());
  switch (from) {
    case DType::f32:
    case DType::bf16:
      return round_to_bf16(b, x);
    case DType::f64: {
      // Round to odd: the float32 truncation toward zero, its last bit set where inexact
      // (inf from fptrunc is beyond float32: its truncation is FLT_MAX, odd, which rounds to
      // inf; NaN compares unordered and keeps its bits).
      llvm::Value* f = b.CreateFPTrunc(x, f32);
      llvm::Value* back = b.CreateFPExt(f, x->getType());
      llvm::Value* inexact = b.CreateFCmpONE(back, x);
      llvm::Value* fabs_back = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back);
      llvm::Value* fabs_x = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      llvm::Value* away = b.CreateFCmpOGT(fabs_back, fabs_x);
      llvm::Value* bits = b.CreateBitCast(f, i32);
      bits = b.CreateSelect(away, b.CreateSub(bits, int_like(bits, 1)), bits);
      bits = b.CreateSelect(inexact, b.CreateOr(bits, int_like(bits, 1)), bits);
      return round_to_bf16(b, b.CreateBitCast(bits, f32));
    }
    case DType::i32:
    case DType::i64: {
      // The magnitude rounded to odd at 24 bits (float32 holds it, times a power of two,
      // exactly), then rounded once to bf16.
      llvm::Type* i64 = with_element(x->getType(), b.getInt64Ty());
      llvm::Value* v = b.CreateSExtOrTrunc(x, i64);
      llvm::Value* neg = b.CreateICmpSLT(v, int_like(v, 0));
      llvm::Value* m = b.CreateSelect(neg, b.CreateSub(int_like(v, 0), v), v);  // |v| unsigned
      llvm::Value* lz = b.CreateIntrinsic(llvm::Intrinsic::ctlz, {i64}, {m, b.getFalse()});
      llvm::Value* width = b.CreateSub(int_like(m, 64), lz);
      llvm::Value* wide = b.CreateICmpUGT(width, int_like(m, 24));
      llvm::Value* drop = b.CreateSelect(wide, b.CreateSub(width, int_like(m, 24)), int_like(m, 0));
      llvm::Value* kept = b.CreateLShr(m, drop);
      llvm::Value* lost =
          b.CreateAnd(m, b.CreateSub(b.CreateShl(int_like(m, 1), drop), int_like(m, 1)));
      kept = b.CreateOr(kept, b.CreateZExt(b.CreateICmpNE(lost, int_like(m, 0)), i64));
      // 2^drop as a float32 (drop <= 40): its biased exponent in the exponent field.
      llvm::Value* e = b.CreateAdd(b.CreateTrunc(drop, i32), llvm::ConstantInt::get(i32, 127));
      llvm::Value* scale = b.CreateBitCast(b.CreateShl(e, int_like(e, 23)), f32);
      llvm::Value* f = b.CreateFMul(b.CreateUIToFP(kept, f32), scale);
      return round_to_bf16(b, b.CreateSelect(neg, b.CreateFNeg(f), f));
    }
    case DType::u8:
      return b.CreateUIToFP(x, f32);  // exact
    case DType::b8:
      return b.CreateUIToFP(x, f32);  // 0 or 1
  }
  return nullptr;
}

}  // namespace kiln::codegen
