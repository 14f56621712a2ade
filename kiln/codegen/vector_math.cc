// Vector math for generated kernels (contract: codegen/vector_math.h; errors: docs/codegen.md).
//
// float: every function is straight-line IR (no branches, no calls): polynomial / rational
// approximations in the Cephes / Eigen tradition, exponent manipulation through i32 bitcasts,
// selects for special values, and intrinsics that the loop vectorizer widens (fmuladd, fabs,
// copysign, rint). After inlining, a loop calling these functions vectorizes.
// double: calls the C library (exp, log, log1p, tanh, erf, erfc), so f64 kernels are scalar.
// sigmoid, gelu_tanh, gelu_erf and softplus are composed from the primitives the same way for
// both types.
//
// Every floating-point instruction carries only the `contract` fast-math flag (never nnan,
// ninf, nsz or reassoc): inf, NaN and -0.0 are handled explicitly and must survive -O3.
#include "kiln/codegen/vector_math.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kiln/ir/error.h"

namespace kiln::codegen {
namespace {

// erfc_tail's range: erfc(t) is below half the smallest denormal beyond it.
constexpr double kErfcTailEnd = 10.5;

// Emits the body of one math function at the builder's insertion point. `type_` is float or
// double; constants are rounded to it.
class MathEmitter {
 public:
  MathEmitter(llvm::IRBuilder<>& b, llvm::Module& module, llvm::Type* type)
      : b_(b), module_(module), type_(type), i32_(b.getInt32Ty()) {}

  llvm::Value* emit(MathFunction fn, llvm::Value* x) {
    switch (fn) {
      case MathFunction::kExp:
        return exp(x);
      case MathFunction::kLog:
        return log(x);
      case MathFunction::kLog1p:
        return log1p(x);
      case MathFunction::kTanh:
        return tanh(x);
      case MathFunction::kSigmoid:
        return sigmoid(x);
      case MathFunction::kErf:
        return erf(x);
      case MathFunction::kGeluTanh:
        return gelu_tanh(x);
      case MathFunction::kGeluErf:
        return gelu_erf(x);
      case MathFunction::kSoftplus:
        return softplus(x);
    }
    internal_error(__FILE__, __LINE__, "unknown MathFunction");
  }

 private:
  bool is_f64() const { return type_->isDoubleTy(); }

  // ---- primitives: f32 approximations or f64 libm calls.
  llvm::Value* exp(llvm::Value* x) { return is_f64() ? libm("exp", x) : exp_f32(x); }
  llvm::Value* log(llvm::Value* x) { return is_f64() ? libm("log", x) : log_f32(x); }
  llvm::Value* log1p(llvm::Value* x) { return is_f64() ? libm("log1p", x) : log1p_f32(x); }
  llvm::Value* tanh(llvm::Value* x) { return is_f64() ? libm("tanh", x) : tanh_f32(x); }
  llvm::Value* erf(llvm::Value* x) { return is_f64() ? libm("erf", x) : erf_f32(x); }

  // ---- composites (both types).

  // 1 / (1 + e^-x), computed as e / (1 + e) for x < 0 with e = exp(-|x|): no overflow, no
  // NaN for large |x|, and results down in the denormal range for very negative x.
  llvm::Value* sigmoid(llvm::Value* x) {
    llvm::Value* e = exp(neg(abs(x)));
    llvm::Value* num = select(lt(x, c(0)), e, c(1));
    return div(num, add(c(1), e));
  }

  // 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), evaluated through the exact
  // identity 0.5 (1 + tanh(u)) = sigmoid(2u), which has no cancellation for negative x.
  llvm::Value* gelu_tanh(llvm::Value* x) {
    const double k = 2 * 0.7978845608028654;
    llvm::Value* two_u = mul(x, fma(mul(x, x), c(k * 0.044715), c(k)));
    return negative_inf_to_zero(x, mul(x, sigmoid(two_u)));
  }

  // 0.5 x (1 + erf(x / sqrt 2)); f64 as 0.5 x erfc(-x / sqrt 2) (no cancellation for x < 0).
  llvm::Value* gelu_erf(llvm::Value* x) {
    if (!is_f64()) return gelu_erf_f32(x);
    llvm::Value* h = libm("erfc", mul(neg(x), c(0.7071067811865476)));
    return negative_inf_to_zero(x, mul(mul(c(0.5), x), h));
  }

  // max(x, 0) + log1p(exp(-|x|)); NaN stays NaN (the select keeps NaN out of max).
  llvm::Value* softplus(llvm::Value* x) {
    llvm::Value* pos = select(gt(x, c(0)), x, c(0));
    return add(pos, log1p(exp(neg(abs(x)))));
  }

  // gelu(-inf) is -0 (the limit), not -inf * 0 = NaN.
  llvm::Value* negative_inf_to_zero(llvm::Value* x, llvm::Value* r) {
    return select(eq(x, c(-INFINITY)), c(-0.0), r);
  }

  // ---- f32 approximations.

  // expf in 18 vector instructions: x = n ln2 + r, exp(x) = 2^n exp(r) on |r| <= ln2/2.
  // - x is clamped to [-104, 88.8] (exp is +0 below, inf above) by compares that let NaN
  //   through (each a single min/max instruction), so no select for NaN at the end: NaN
  //   flows through the arithmetic into the result.
  // - n = rint(x log2 e) by the round-to-integer shifter: z = x log2 e + S rounds to an integer
  //   in [2^23, 2^24), so n = z - S is exact and the bits of z hold n (no rint, no float to
  //   integer conversion). S = 1.5 2^23 + 254, so bits(z) = 0x4B4000FE + n.
  // - r = x - n ln2 with ln2 in two parts (n * 0.693359375 is exact), then
  //   exp(r) - 1 = r + r^2 P(r), P of degree 4 (minimax for the relative error of exp on
  //   [-ln2/2, ln2/2]: 3.1e-9, 0.06 units of 2^-24 with the coefficients rounded to float).
  // - 2^n in two halves 2^floor(n/2) 2^ceil(n/2), built from the bits of z (its low nine
  //   bits, once shifted by 23, are the biased exponents 127 + floor(n/2) and
  //   127 + ceil(n/2)), applied as fma(t, s1, s1) * s2: the first product is exact (a normal
  //   result), so denormal results are rounded once and 2^128 overflows to inf.
  llvm::Value* exp_f32(llvm::Value* x) {
    llvm::Value* xc = select(lt(c(88.8), x), c(88.8), x);  // NaN stays NaN
    xc = select(lt(xc, c(-104.0)), c(-104.0), xc);         // NaN stays NaN
    const double shifter = 0x1.8p23 + 254;
    llvm::Value* z = fma(xc, c(1.44269504088896341), c(shifter));
    llvm::Value* n = sub(z, c(shifter));
    llvm::Value* r = fma(n, c(-0.693359375), xc);
    r = fma(n, c(2.12194440e-4), r);
    llvm::Value* p = horner(
        r, {1.3814583654e-3, 8.3687240258e-3, 4.1668388993e-2, 1.6666521132e-1, 4.9999994040e-1});
    llvm::Value* t = fma(p, mul(r, r), r);  // exp(r) - 1
    llvm::Value* bits = b_.CreateBitCast(z, i32_);
    llvm::Value* half = b_.CreateAShr(bits, 1);
    llvm::Value* s1 = b_.CreateBitCast(b_.CreateShl(half, 23), type_);
    llvm::Value* s2 = b_.CreateBitCast(b_.CreateShl(b_.CreateSub(bits, half), 23), type_);
    return mul(fma(t, s1, s1), s2);
  }

  // Cephes logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(x) = e ln2 + log(m) with
  // log(1 + f) = f - f^2/2 + f^3 P(f). Denormal inputs are scaled by 2^23 first.
  // log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN -> NaN.
  llvm::Value* log_f32(llvm::Value* x) {
    llvm::Value* denormal = lt(x, c(FLT_MIN));
    llvm::Value* xs = select(denormal, mul(x, c(0x1p23)), x);
    llvm::Value* bits = b_.CreateBitCast(xs, i32_);
    llvm::Value* e_bits = b_.CreateSub(b_.CreateLShr(bits, 23), i32c(126));  // m in [0.5, 1)
    llvm::Value* m_bits = b_.CreateOr(b_.CreateAnd(bits, i32c(0x007fffff)), i32c(0x3f000000));
    llvm::Value* m = b_.CreateBitCast(m_bits, type_);
    llvm::Value* e = add(b_.CreateSIToFP(e_bits, type_), select(denormal, c(-23), c(0)));
    // m < sqrt(1/2): use 2m (exact) and e - 1. f = m - 1 (or 2m - 1) is exact.
    llvm::Value* below = lt(m, c(0.707106781186547524));
    e = sub(e, select(below, c(1), c(0)));
    llvm::Value* f = add(sub(m, c(1)), select(below, m, c(0)));
    llvm::Value* z = mul(f, f);
    llvm::Value* p = horner(
        f, {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
            -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
    llvm::Value* y = mul(mul(f, z), p);
    y = fma(e, c(-2.12194440e-4), y);
    y = fma(z, c(-0.5), y);
    llvm::Value* r = fma(e, c(0.693359375), add(f, y));
    r = select(eq(x, c(INFINITY)), c(INFINITY), r);
    r = select(eq(x, c(0)), c(-INFINITY), r);
    return select(b_.CreateFCmpULT(x, c(0)), c(NAN), r);  // negative or NaN
  }

  // log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x rounded: the second term corrects
  // the rounding of u. x itself when u == 1 (tiny x; keeps -0); log(u) when it is infinite
  // (x = -1 or inf); x < -1 and NaN -> NaN.
  llvm::Value* log1p_f32(llvm::Value* x) {
    llvm::Value* u = add(x, c(1));
    llvm::Value* lu = log_f32(u);
    llvm::Value* r = add(lu, div(sub(x, sub(u, c(1))), u));
    r = select(eq(abs(lu), c(INFINITY)), lu, r);
    return select(eq(u, c(1)), x, r);
  }

  // |x| < 0.625: Cephes tanhf polynomial x + x^3 P(x^2); otherwise 1 - 2 / (exp(2|x|) + 1),
  // which saturates to 1 (exp overflows to inf: 2 / inf = 0). The sign is copied from x
  // (tanh(-0) = -0); NaN -> NaN.
  llvm::Value* tanh_f32(llvm::Value* x) {
    llvm::Value* ax = abs(x);
    llvm::Value* z = mul(ax, ax);
    llvm::Value* p = horner(z, {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
                                1.33314422036E-1, -3.33332819422E-1});
    llvm::Value* small = fma(mul(ax, z), p, ax);
    llvm::Value* large = sub(c(1), div(c(2), add(exp_f32(add(ax, ax)), c(1))));
    return copysign(select(lt(ax, c(0.625)), small, large), x);
  }

  // erf: |x| < 1: x P(x^2) (P: degree-6 mpmath.chebyfit of erf(x)/x, relative error 1.2e-9);
  // otherwise 1 - erfc(|x|) from erfc_tail. Sign copied from x (erf(-0) = -0); NaN -> NaN.
  llvm::Value* erf_f32(llvm::Value* x) {
    llvm::Value* ax = abs(x);
    llvm::Value* t = select(gt(ax, c(kErfcTailEnd)), c(kErfcTailEnd), ax);
    llvm::Value* t2 = mul(t, t);
    llvm::Value* large = sub(c(1), erfc_tail(t, t2, square_error(t, t2)));
    return copysign(select(lt(ax, c(1)), erf_small(ax), large), x);
  }

  // erf(t) = t P(t^2) for |t| <= 1, evaluated as t + t (P(t^2) - 1) so that the rounding
  // errors only touch the small correction term.
  llvm::Value* erf_small(llvm::Value* t) {
    llvm::Value* y = mul(t, t);
    llvm::Value* q =
        horner(y, {7.8758750626854883e-5, -0.00080168642871658695, 0.005189087423433974,
                   -0.026854212010626412, 0.11283594715160218, -0.37612626666720331});
    llvm::Value* p_minus_1 = fma(q, y, c(1.1283791658483509 - 1));
    return fma(t, p_minus_1, t);
  }

  // erfc(t) for t in [0.5, kErfcTailEnd] given t^2 = t2_hi + t2_lo (exactly: square_error):
  // erfc(t) = exp(-t^2) s K(s - s0) with s = 1 / (1 + 0.4 t) and K a degree-8 mpmath.chebyfit of
  // erfc(t) exp(t^2) / s (relative error 1.5e-8). exp(-t^2) = exp(-t2_hi) (1 - t2_lo) keeps
  // the relative error small in the far tail; past t ~ 10.2 the result underflows to 0.
  llvm::Value* erfc_tail(llvm::Value* t, llvm::Value* t2_hi, llvm::Value* t2_lo) {
    llvm::Value* s = div(c(1), fma(c(0.4), t, c(1)));
    llvm::Value* k = horner(sub(s, c(0.5128205418586731)),
                            {0.061051599912778256, 0.026317884077208289, -0.12032655068227538,
                             -0.11658111232053369, 0.17430558599196899, 0.55712327855651445,
                             0.7475165418630913, 0.6626154284572132, 0.42998611904070038});
    llvm::Value* e = exp_f32(neg(t2_hi));
    e = fma(neg(e), t2_lo, e);
    return mul(e, mul(s, k));
  }

  // gelu_erf for float: 0.5 x (1 + erf(t)), t = x / sqrt 2. The factor 1 + erf(t) is
  // 1 +- erf_small(|t|) for |t| below 0.5 (x < 0) or 1 (x >= 0); beyond, erfc(|t|) (x < 0: no
  // cancellation in the tail) or 2 - erfc(t) from erfc_tail, with t^2 = x^2 / 2 split exactly.
  // gelu_erf(-inf) = -0.
  llvm::Value* gelu_erf_f32(llvm::Value* x) {
    const double x_end = kErfcTailEnd * 1.4142135623730951;
    llvm::Value* ax = abs(x);
    llvm::Value* xc = select(gt(ax, c(x_end)), c(x_end), ax);  // keeps x^2 finite; NaN stays
    llvm::Value* t = mul(xc, c(0.7071067811865476));
    llvm::Value* x2 = mul(xc, xc);
    llvm::Value* x2_lo = square_error(xc, x2);
    llvm::Value* tail = erfc_tail(t, mul(c(0.5), x2), mul(c(0.5), x2_lo));
    llvm::Value* small = erf_small(t);
    llvm::Value* negative = lt(x, c(0));
    llvm::Value* use_tail = b_.CreateNot(lt(t, select(negative, c(0.5), c(1))));  // NaN: small
    llvm::Value* factor = select(negative, select(use_tail, tail, sub(c(1), small)),
                                 select(use_tail, sub(c(2), tail), add(c(1), small)));
    return negative_inf_to_zero(x, mul(mul(c(0.5), x), factor));
  }

  // x * x - x2 exactly, where x2 = fl(x * x) (float, |x| not tiny). fma(x, x, -x2) is exact
  // only where fmuladd is fused, and targets without FMA (x86-64-v2) round it to 0: Dekker's
  // product instead, x split into hi + lo of at most 12 significant bits each by clearing the
  // low 12 bits of its significand (integer operations, which cannot be contracted). Every
  // partial product and sum is exact, fused or not, so every target gets the same value.
  llvm::Value* square_error(llvm::Value* x, llvm::Value* x2) {
    llvm::Value* bits = b_.CreateAnd(b_.CreateBitCast(x, i32_), i32c(0xFFFFF000u));
    llvm::Value* hi = b_.CreateBitCast(bits, type_);
    llvm::Value* lo = sub(x, hi);
    return add(add(fma(hi, hi, neg(x2)), mul(c(2), mul(hi, lo))), mul(lo, lo));
  }

  // ---- f64: the C library.
  llvm::Value* libm(const char* name, llvm::Value* x) {
    llvm::FunctionCallee callee =
        module_.getOrInsertFunction(name, llvm::FunctionType::get(type_, {type_}, false));
    if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
      // As with -fno-math-errno: kernels never read errno, so the calls are pure.
      f->setDoesNotThrow();
      f->setWillReturn();
      f->setDoesNotAccessMemory();
    }
    return b_.CreateCall(callee, {x});
  }

  // ---- IR helpers.
  llvm::Value* c(double v) { return llvm::ConstantFP::get(type_, v); }
  llvm::Value* i32c(uint32_t v) { return b_.getInt32(v); }
  llvm::Value* add(llvm::Value* a, llvm::Value* b) { return b_.CreateFAdd(a, b); }
  llvm::Value* sub(llvm::Value* a, llvm::Value* b) { return b_.CreateFSub(a, b); }
  llvm::Value* mul(llvm::Value* a, llvm::Value* b) { return b_.CreateFMul(a, b); }
  llvm::Value* div(llvm::Value* a, llvm::Value* b) { return b_.CreateFDiv(a, b); }
  llvm::Value* neg(llvm::Value* a) { return b_.CreateFNeg(a); }
  // a * b + addend, fused when the target has FMA (llvm.fmuladd never becomes a libm call).
  llvm::Value* fma(llvm::Value* a, llvm::Value* b, llvm::Value* addend) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {type_}, {a, b, addend});
  }
  llvm::Value* unary(llvm::Intrinsic::ID id, llvm::Value* a) {
    return b_.CreateIntrinsic(id, {type_}, {a});
  }
  llvm::Value* abs(llvm::Value* a) { return unary(llvm::Intrinsic::fabs, a); }
  llvm::Value* copysign(llvm::Value* magnitude, llvm::Value* sign) {
    return b_.CreateIntrinsic(llvm::Intrinsic::copysign, {type_}, {magnitude, sign});
  }
  llvm::Value* lt(llvm::Value* a, llvm::Value* b) { return b_.CreateFCmpOLT(a, b); }
  llvm::Value* gt(llvm::Value* a, llvm::Value* b) { return b_.CreateFCmpOGT(a, b); }
  llvm::Value* eq(llvm::Value* a, llvm::Value* b) { return b_.CreateFCmpOEQ(a, b); }
  llvm::Value* is_nan(llvm::Value* a) { return b_.CreateFCmpUNO(a, a); }
  llvm::Value* select(llvm::Value* cond, llvm::Value* a, llvm::Value* b) {
    return b_.CreateSelect(cond, a, b);
  }
  // Horner's scheme; coefficients from the highest degree down.
  llvm::Value* horner(llvm::Value* x, std::initializer_list<double> coefficients) {
    llvm::Value* acc = nullptr;
    for (double k : coefficients) acc = acc ? fma(acc, x, c(k)) : c(k);
    return acc;
  }

  llvm::IRBuilder<>& b_;
  llvm::Module& module_;
  llvm::Type* type_;
  llvm::Type* i32_;
};

llvm::Function* define_math_function(llvm::Module& module, MathFunction fn, llvm::Type* type,
                                     const std::string& name) {
  auto* fn_type = llvm::FunctionType::get(type, {type}, false);
  auto* f = llvm::Function::Create(fn_type, llvm::GlobalValue::InternalLinkage, name, module);
  f->addFnAttr(llvm::Attribute::AlwaysInline);
  f->setDoesNotThrow();
  f->setWillReturn();
  f->setDoesNotAccessMemory();
  f->setDoesNotFreeMemory();
  f->setNoSync();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(module.getContext(), "entry", f));
  llvm::FastMathFlags fmf;
  fmf.setAllowContract(true);
  b.setFastMathFlags(fmf);
  MathEmitter emitter(b, module, type);
  b.CreateRet(emitter.emit(fn, f->getArg(0)));
  return f;
}

}  // namespace

const char* math_function_name(MathFunction fn) {
  switch (fn) {
    case MathFunction::kExp:
      return "exp";
    case MathFunction::kLog:
      return "log";
    case MathFunction::kLog1p:
      return "log1p";
    case MathFunction::kTanh:
      return "tanh";
    case MathFunction::kSigmoid:
      return "sigmoid";
    case MathFunction::kErf:
      return "erf";
    case MathFunction::kGeluTanh:
      return "gelu_tanh";
    case MathFunction::kGeluErf:
      return "gelu_erf";
    case MathFunction::kSoftplus:
      return "softplus";
  }
  internal_error(__FILE__, __LINE__, "unknown MathFunction");
}

llvm::Function* get_math_function(llvm::Module& module, MathFunction fn, llvm::Type* type) {
  KILN_ASSERT(type->isFloatTy() || type->isDoubleTy(),
              "vector math is defined for float and double only");
  std::string name =
      std::string("kiln.math.") + math_function_name(fn) + (type->isFloatTy() ? ".f32" : ".f64");
  if (llvm::Function* existing = module.getFunction(name)) return existing;
  return define_math_function(module, fn, type, name);
}

}  // namespace kiln::codegen
