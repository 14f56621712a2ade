// Vector math (codegen/vector_math.h): every function is compiled into a real kernel (a loop
// `void k(const T* x, T* y, int64 n)` through the O3 host pipeline, so it is the vectorized
// code that is measured), swept densely over the float line against float64 std:: references,
// and checked on special values. Also: the loop vectorizes and calls nothing; f64 is libm.
//
// Error metric: |y - ref| / max(ulp(ref), floor), ulp(ref) being the spacing of floats at
// |ref| (2^-149 in the denormal range). floor = 2^-149 is the plain ulp error; the gelu
// functions use an absolute floor (see kBounds). The bounds are those in docs/codegen.md.
#include "kiln/codegen/vector_math.h"

#include <gtest/gtest.h>
#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/codegen/jit.h"
#include "kiln/codegen/target.h"
#include "kiln/codegen/target_machine.h"

namespace kiln::codegen {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

constexpr MathFunction kAll[] = {
    MathFunction::kExp,      MathFunction::kLog,     MathFunction::kLog1p,
    MathFunction::kTanh,     MathFunction::kSigmoid, MathFunction::kErf,
    MathFunction::kGeluTanh, MathFunction::kGeluErf, MathFunction::kSoftplus};

// ---- kernels

// A module with `void <symbol>(const T* noalias x, T* noalias y, int64 n)`:
// for i in [0, n): y[i] = fn(x[i]).
KernelModule unary_loop(MathFunction fn, bool f64) {
  static int counter = 0;
  std::string symbol = std::string("vm_") + math_function_name(fn) + (f64 ? "_f64_" : "_f32_") +
                       std::to_string(counter++);
  KernelModule k = new_kernel_module(symbol, symbol);
  llvm::LLVMContext& ctx = *k.context;
  llvm::Type* t = f64 ? llvm::Type::getDoubleTy(ctx) : llvm::Type::getFloatTy(ctx);
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* f = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, i64}, false),
      llvm::GlobalValue::ExternalLinkage, symbol, *k.module);
  f->addParamAttr(0, llvm::Attribute::NoAlias);
  f->addParamAttr(1, llvm::Attribute::NoAlias);
  apply_target_attributes(*f, *k.target);
  llvm::Function* math = get_math_function(*k.module, fn, t);

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(ctx, "loop", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);
  llvm::IRBuilder<> b(entry);
  llvm::Value* n = f->getArg(2);
  b.CreateCondBr(b.CreateICmpSGT(n, b.getInt64(0)), loop, exit);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(i64, 2);
  i->addIncoming(b.getInt64(0), entry);
  llvm::Value* x = b.CreateLoad(t, b.CreateGEP(t, f->getArg(0), i));
  b.CreateStore(b.CreateCall(math, {x}), b.CreateGEP(t, f->getArg(1), i));
  llvm::Value* next = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpEQ(next, n), exit, loop);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return k;
}

template <typename T>
using UnaryKernel = void (*)(const T*, T*, int64_t);

// The compiled kernel for fn (compiled once per process).
template <typename T>
UnaryKernel<T> kernel(MathFunction fn) {
  static std::map<MathFunction, UnaryKernel<T>> compiled;
  auto it = compiled.find(fn);
  if (it != compiled.end()) return it->second;
  void* p = compile_uncached(unary_loop(fn, std::is_same_v<T, double>));
  return compiled[fn] = reinterpret_cast<UnaryKernel<T>>(p);
}

template <typename T>
std::vector<T> run(MathFunction fn, const std::vector<T>& x) {
  std::vector<T> y(x.size());
  kernel<T>(fn)(x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

// fn(x) through both the vector body and the scalar remainder of the loop (which must agree).
float run1(MathFunction fn, float x) {
  std::vector<float> ys = run(fn, std::vector<float>(67, x));
  for (float y : ys) {
    bool same = std::bit_cast<uint32_t>(y) == std::bit_cast<uint32_t>(ys[0]) ||
                (std::isnan(y) && std::isnan(ys[0]));
    EXPECT_TRUE(same) << math_function_name(fn) << "(" << x << "): " << y << " vs " << ys[0];
  }
  return ys[0];
}

// ---- references (float64)

double reference(MathFunction fn, double x) {
  constexpr double k = 0.7978845608028654;
  switch (fn) {
    case MathFunction::kExp:
      return std::exp(x);
    case MathFunction::kLog:
      return std::log(x);
    case MathFunction::kLog1p:
      return std::log1p(x);
    case MathFunction::kTanh:
      return std::tanh(x);
    case MathFunction::kSigmoid:
      return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
    case MathFunction::kErf:
      return std::erf(x);
    case MathFunction::kGeluTanh:  // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u))
      if (std::isinf(x)) return x > 0 ? x : 0.0;
      return x / (1 + std::exp(-2 * k * (x + 0.044715 * x * x * x)));
    case MathFunction::kGeluErf:  // 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2)
      if (std::isinf(x)) return x > 0 ? x : 0.0;
      return 0.5 * x * std::erfc(-x * 0.7071067811865476);
    case MathFunction::kSoftplus:
      return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return NAN;
}

// ---- error measurement

// The spacing of floats at |r| (r a double): 2^(e-24) for |r| in [2^(e-1), 2^e).
double float_ulp(double r) {
  double a = std::fabs(r);
  if (a < FLT_MIN) return 0x1p-149;
  int e;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - 24);
}

// |y - ref| / max(ulp(ref), floor); infinite when y has the wrong special value.
double error_units(float y, double ref, double floor) {
  if (std::isnan(ref)) return std::isnan(y) ? 0 : INFINITY;
  float rounded = static_cast<float>(ref);
  if (std::isinf(rounded)) return y == rounded ? 0 : INFINITY;
  if (!std::isfinite(y)) return INFINITY;
  return std::fabs(y - ref) / std::max(float_ulp(ref), floor);
}

// Floats ordered as unsigned keys (-inf < ... < -0 < +0 < ... < inf), to step through bit
// patterns across a range.
uint32_t order_key(float f) {
  uint32_t b = std::bit_cast<uint32_t>(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
float from_order_key(uint32_t k) {
  return std::bit_cast<float>((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// About `samples` floats evenly spaced in bit patterns over [lo, hi] (both included).
std::vector<float> sweep(float lo, float hi, double samples) {
  uint64_t a = order_key(lo), b = order_key(hi);
  uint64_t stride = std::max<uint64_t>(1, static_cast<uint64_t>((b - a) / samples)) | 1;
  std::vector<float> xs;
  for (uint64_t k = a; k <= b; k += stride) xs.push_back(from_order_key(static_cast<uint32_t>(k)));
  xs.push_back(hi);
  return xs;
}

struct Worst {
  double error = 0;
  float x = 0;
};

Worst max_error(MathFunction fn, const std::vector<float>& xs, double floor) {
  std::vector<float> ys = run(fn, xs);
  Worst w;
  for (size_t i = 0; i < xs.size(); ++i) {
    double e = error_units(ys[i], reference(fn, xs[i]), floor);
    if (e > w.error || std::isnan(e)) w = {e, xs[i]};
  }
  return w;
}

// ---- bounds (docs/codegen.md)

struct Bound {
  const char* name;
  MathFunction fn;
  float lo, hi;  // the dense sweep's range
  double floor;  // absolute floor of the error metric
  double max_units;
  bool whole_line;  // also sweep every ~1000th float of the whole float line
};

constexpr double kUlpOnly = 0x1p-149;

// Measured maxima (docs/codegen.md) with some headroom.
const Bound kBounds[] = {
    {"exp", MathFunction::kExp, -104.f, 89.f, kUlpOnly, 1.5, true},
    {"log", MathFunction::kLog, 0.f, FLT_MAX, kUlpOnly, 1.5, true},
    {"log_near_1", MathFunction::kLog, 0.5f, 2.f, kUlpOnly, 1.5, false},
    {"log1p", MathFunction::kLog1p, -1.f, 1e6f, kUlpOnly, 2, true},
    {"log1p_near_0", MathFunction::kLog1p, -0.3f, 0.5f, kUlpOnly, 2, false},
    {"tanh", MathFunction::kTanh, -10.f, 10.f, kUlpOnly, 2, true},
    {"tanh_branch", MathFunction::kTanh, 0.55f, 0.7f, kUlpOnly, 2, false},
    {"sigmoid", MathFunction::kSigmoid, -105.f, 20.f, kUlpOnly, 3, true},
    {"erf", MathFunction::kErf, -4.f, 4.f, kUlpOnly, 2, true},
    {"erf_branch", MathFunction::kErf, 0.9f, 1.1f, kUlpOnly, 2, false},
    {"gelu_tanh", MathFunction::kGeluTanh, -12.f, 12.f, 0x1p-24, 3, true},
    {"gelu_tanh_positive", MathFunction::kGeluTanh, 0.f, 1e4f, kUlpOnly, 3, false},
    {"gelu_erf", MathFunction::kGeluErf, -12.f, 12.f, 0x1p-24, 2.5, true},
    {"gelu_erf_positive", MathFunction::kGeluErf, 0.f, 1e4f, kUlpOnly, 2.5, false},
    {"gelu_erf_negative", MathFunction::kGeluErf, -15.f, -0.f, kUlpOnly, 8, false},
    {"gelu_tanh_negative", MathFunction::kGeluTanh, -15.f, -0.f, kUlpOnly, 200, false},
    {"softplus", MathFunction::kSoftplus, -105.f, 30.f, kUlpOnly, 2.5, true},
};

class VectorMathAccuracy : public ::testing::TestWithParam<Bound> {};

TEST_P(VectorMathAccuracy, DenseSweepWithinBound) {
  const Bound& bound = GetParam();
  Worst dense = max_error(bound.fn, sweep(bound.lo, bound.hi, 4e6), bound.floor);
  std::printf("[ vm ] %-18s [%g, %g] floor 2^%d: max %.3f units at x = %.9g\n", bound.name,
              bound.lo, bound.hi, std::ilogb(bound.floor), dense.error, dense.x);
  EXPECT_LE(dense.error, bound.max_units) << "at x = " << dense.x;
  if (!bound.whole_line) return;
  Worst line = max_error(bound.fn, sweep(-kInf, kInf, 4e6), bound.floor);
  std::printf("[ vm ] %-18s whole float line: max %.3f units at x = %.9g\n", bound.name, line.error,
              line.x);
  EXPECT_LE(line.error, bound.max_units) << "at x = " << line.x;
}

INSTANTIATE_TEST_SUITE_P(All, VectorMathAccuracy, ::testing::ValuesIn(kBounds),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- special values

// y is exactly `want` (NaN matches NaN; the sign of zeros must match).
void expect_exactly(MathFunction fn, float x, float want) {
  float y = run1(fn, x);
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(y)) << math_function_name(fn) << "(" << x << ") = " << y;
    return;
  }
  EXPECT_EQ(std::bit_cast<uint32_t>(y), std::bit_cast<uint32_t>(want))
      << math_function_name(fn) << "(" << x << ") = " << y << ", want " << want;
}

// y is within 1 ulp of the float64 reference.
void expect_close(MathFunction fn, float x) {
  float y = run1(fn, x);
  double ref = reference(fn, x);
  EXPECT_LE(error_units(y, ref, kUlpOnly), 1.0)
      << math_function_name(fn) << "(" << x << ") = " << y << ", reference " << ref;
}

TEST(VectorMathSpecial, Exp) {
  auto f = MathFunction::kExp;
  expect_exactly(f, kInf, kInf);
  expect_exactly(f, -kInf, 0.f);
  expect_exactly(f, kNaN, kNaN);
  expect_exactly(f, 0.f, 1.f);
  expect_exactly(f, -0.f, 1.f);
  expect_exactly(f, kDenormMin, 1.f);
  expect_exactly(f, 89.f, kInf);
  expect_exactly(f, 88.8f, kInf);
  expect_exactly(f, FLT_MAX, kInf);
  expect_exactly(f, -FLT_MAX, 0.f);
  expect_exactly(f, -104.f, 0.f);
  expect_exactly(f, -200.f, 0.f);
  expect_close(f, 88.72f);  // just below overflow: finite
  EXPECT_TRUE(std::isfinite(run1(f, 88.72f)));
  expect_close(f, -87.f);   // smallest normal range
  expect_close(f, -100.f);  // denormal results, rounded once
  expect_close(f, -103.f);
  expect_exactly(f, -103.2789f, kDenormMin);  // ln(2^-149)
}

TEST(VectorMathSpecial, Log) {
  auto f = MathFunction::kLog;
  expect_exactly(f, 0.f, -kInf);
  expect_exactly(f, -0.f, -kInf);
  expect_exactly(f, kInf, kInf);
  expect_exactly(f, -kInf, kNaN);
  expect_exactly(f, kNaN, kNaN);
  expect_exactly(f, -1.f, kNaN);
  expect_exactly(f, -kDenormMin, kNaN);
  expect_exactly(f, 1.f, 0.f);
  for (float x : {kDenormMin, 2 * kDenormMin, FLT_MIN / 3, FLT_MIN, FLT_MAX, 0.5f, 2.f, 1e-30f})
    expect_close(f, x);
}

TEST(VectorMathSpecial, Log1p) {
  auto f = MathFunction::kLog1p;
  expect_exactly(f, 0.f, 0.f);
  expect_exactly(f, -0.f, -0.f);
  expect_exactly(f, -1.f, -kInf);
  expect_exactly(f, -2.f, kNaN);
  expect_exactly(f, kInf, kInf);
  expect_exactly(f, -kInf, kNaN);
  expect_exactly(f, kNaN, kNaN);
  expect_exactly(f, kDenormMin, kDenormMin);
  expect_exactly(f, -kDenormMin, -kDenormMin);
  for (float x : {1e-10f, -1e-10f, 1e-5f, -0.999999f, FLT_MAX, 1e30f}) expect_close(f, x);
}

TEST(VectorMathSpecial, Tanh) {
  auto f = MathFunction::kTanh;
  expect_exactly(f, 0.f, 0.f);
  expect_exactly(f, -0.f, -0.f);
  expect_exactly(f, kInf, 1.f);
  expect_exactly(f, -kInf, -1.f);
  expect_exactly(f, kNaN, kNaN);
  expect_exactly(f, 10.f, 1.f);
  expect_exactly(f, -10.f, -1.f);
  expect_exactly(f, 1e30f, 1.f);
  expect_exactly(f, -FLT_MAX, -1.f);
  expect_exactly(f, kDenormMin, kDenormMin);
  expect_exactly(f, -kDenormMin, -kDenormMin);
  for (float x : {0.6249f, 0.625f, -0.625f, 1e-20f, 5.f}) expect_close(f, x);
}

TEST(VectorMathSpecial, Sigmoid) {
  auto f = MathFunction::kSigmoid;
  expect_exactly(f, 0.f, 0.5f);
  expect_exactly(f, -0.f, 0.5f);
  expect_exactly(f, kInf, 1.f);
  expect_exactly(f, -kInf, 0.f);
  expect_exactly(f, kNaN, kNaN);
  expect_exactly(f, 100.f, 1.f);
  expect_exactly(f, FLT_MAX, 1.f);
  expect_exactly(f, -FLT_MAX, 0.f);
  expect_exactly(f, -1000.f, 0.f);
  for (float x : {-100.f, -88.f, -20.f, 20.f, 1e-30f}) expect_close(f, x);  // -100: denormal
}

TEST(VectorMathSpecial, Erf) {
  auto f = MathFunction::kErf;
  expect_exactly(f, 0.f, 0.f);
  expect_exactly(f, -0.f, -0.f);
  expect_exactly(f, kInf, 1.f);
  expect_exactly(f, -kInf, -1.f);
  expect_exactly(f, kNaN, kNaN);
  expect_exactly(f, 4.f, 1.f);
  expect_exactly(f, -5.f, -1.f);
  expect_exactly(f, FLT_MAX, 1.f);
  expect_exactly(f, kDenormMin, kDenormMin);
  for (float x : {1e-30f, -1e-30f, 0.5f, 3.9f}) expect_close(f, x);
}

TEST(VectorMathSpecial, Gelu) {
  for (auto f : {MathFunction::kGeluTanh, MathFunction::kGeluErf}) {
    SCOPED_TRACE(math_function_name(f));
    expect_exactly(f, 0.f, 0.f);
    expect_exactly(f, -0.f, -0.f);
    expect_exactly(f, kInf, kInf);
    expect_exactly(f, -kInf, -0.f);
    expect_exactly(f, kNaN, kNaN);
    expect_exactly(f, FLT_MAX, FLT_MAX);
    expect_exactly(f, -FLT_MAX, -0.f);
    expect_exactly(f, 100.f, 100.f);
    EXPECT_EQ(std::fabs(run1(f, -100.f)), 0.f);
  }
}

TEST(VectorMathSpecial, Softplus) {
  auto f = MathFunction::kSoftplus;
  expect_exactly(f, kInf, kInf);
  expect_exactly(f, -kInf, 0.f);
  expect_exactly(f, kNaN, kNaN);
  expect_exactly(f, 100.f, 100.f);
  expect_exactly(f, FLT_MAX, FLT_MAX);
  expect_exactly(f, -FLT_MAX, 0.f);
  for (float x : {0.f, -0.f, -100.f, -20.f, 1.f, 1e-30f}) expect_close(f, x);  // -100: denormal
}

// ---- code shape

// Whether IR text calls anything other than an LLVM intrinsic.
bool calls_a_function(const std::string& ir) {
  for (size_t at = ir.find("call "); at != std::string::npos; at = ir.find("call ", at + 1)) {
    size_t callee = ir.find('@', at);
    if (ir.compare(callee, 6, "@llvm.") != 0) return true;
  }
  return false;
}

// The optimized loop is vectorized (packed float math on the widest vector registers) and
// contains no calls (no libm).
TEST(VectorMathCode, LoopVectorizesWithoutCalls) {
  bool avx = current_target()->features.find("avx") != std::string::npos;
  for (MathFunction fn : kAll) {
    SCOPED_TRACE(math_function_name(fn));
    KernelModule k = unary_loop(fn, false);
    optimize_module(k);
    std::string ir = module_text(*k.module);
    EXPECT_NE(ir.find(" x float>"), std::string::npos) << "not vectorized:\n" << ir;
    EXPECT_FALSE(calls_a_function(ir)) << "a call survived:\n" << ir;
    std::string asm_text = emit_assembly(k);
    if (avx) {
      EXPECT_TRUE(asm_text.find("ymm") != std::string::npos ||
                  asm_text.find("zmm") != std::string::npos);
    }
    for (const char* libm : {"expf", "logf", "log1pf", "tanhf", "erff", "call"})
      EXPECT_EQ(asm_text.find(libm), std::string::npos) << libm << " in:\n" << asm_text;
  }
}

// Functions are defined once per module, internal and always-inline, and the f32 bodies carry
// no fast-math flag but `contract` (special values must survive optimization).
TEST(VectorMathCode, DefinitionAndFlags) {
  KernelModule k = new_kernel_module("vm_flags", "vm_flags");
  llvm::Type* f32 = llvm::Type::getFloatTy(*k.context);
  for (MathFunction fn : kAll) {
    llvm::Function* f = get_math_function(*k.module, fn, f32);
    EXPECT_EQ(f, get_math_function(*k.module, fn, f32));
    EXPECT_EQ(f->getName().str(), std::string("kiln.math.") + math_function_name(fn) + ".f32");
    EXPECT_TRUE(f->hasInternalLinkage());
    EXPECT_TRUE(f->hasFnAttribute(llvm::Attribute::AlwaysInline));
    EXPECT_EQ(f->size(), 1u) << "branch-free: one basic block";
  }
  std::string ir = module_text(*k.module);
  for (const char* flag : {" fast ", " nnan ", " ninf ", " nsz ", " reassoc ", " afn ", " arcp "})
    EXPECT_EQ(ir.find(flag), std::string::npos) << flag;
  EXPECT_NE(ir.find(" contract "), std::string::npos);
  EXPECT_EQ(ir.find("call float @"), std::string::npos) << "no libm calls for f32";
}

// ---- double: the C library

TEST(VectorMathF64, PrimitivesAreLibm) {
  std::vector<double> xs = {-1000.0, -30.0, -2.5, -1e-300, -0.0,   0.0,      1e-300,   0.3,
                            1.0,     2.5,   30.0, 700.0,   1000.0, INFINITY, -INFINITY};
  struct Case {
    MathFunction fn;
    double (*libm)(double);
  };
  for (Case c : {Case{MathFunction::kExp, [](double x) { return std::exp(x); }},
                 Case{MathFunction::kLog, [](double x) { return std::log(x); }},
                 Case{MathFunction::kLog1p, [](double x) { return std::log1p(x); }},
                 Case{MathFunction::kTanh, [](double x) { return std::tanh(x); }},
                 Case{MathFunction::kErf, [](double x) { return std::erf(x); }}}) {
    std::vector<double> ys = run(c.fn, xs);
    for (size_t i = 0; i < xs.size(); ++i) {
      double want = c.libm(xs[i]);
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(ys[i])) << math_function_name(c.fn) << "(" << xs[i] << ")";
      else
        EXPECT_EQ(std::bit_cast<uint64_t>(ys[i]), std::bit_cast<uint64_t>(want))
            << math_function_name(c.fn) << "(" << xs[i] << ")";
    }
  }
}

TEST(VectorMathF64, Composites) {
  std::vector<double> xs;
  for (double x = -50; x <= 50; x += 0.01) xs.push_back(x);
  for (MathFunction fn : {MathFunction::kSigmoid, MathFunction::kGeluTanh, MathFunction::kGeluErf,
                          MathFunction::kSoftplus}) {
    std::vector<double> ys = run(fn, xs);
    for (size_t i = 0; i < xs.size(); ++i) {
      double ref = reference(fn, xs[i]);
      EXPECT_NEAR(ys[i], ref, 1e-15 * std::max(1.0, std::fabs(xs[i])) + 4e-16 * std::fabs(ref))
          << math_function_name(fn) << "(" << xs[i] << ")";
    }
    std::vector<double> special = run<double>(fn, {INFINITY, -INFINITY, NAN});
    EXPECT_EQ(special[0], fn == MathFunction::kSigmoid ? 1.0 : INFINITY);
    EXPECT_EQ(special[1], 0.0);
    EXPECT_TRUE(std::isnan(special[2]));
  }
}

}  // namespace
}  // namespace kiln::codegen
