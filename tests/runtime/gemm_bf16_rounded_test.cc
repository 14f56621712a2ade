// Float32 operands read as bf16 (runtime::Bf16Operand::rounded: a compiled group's fused cast,
// ir/operand_prologue.h): each value is rounded to bf16 as it is packed, so a product must be,
// bit for bit, gemm_bf16 of the operands rounded beforehand by bfloat16::from_float, on every
// kernel set (the float32 kernels, the pair layouts' emulations, and the VDPBF16PS / AMX
// kernels where the CPU has them: the same packed values reach the same tiles), every thread
// count and entry point, A, B or both rounded. Values have random mantissas (rounding matters),
// exact ties (ties to even), and values that round up to the next binade; leading dimensions
// are padded. Fixed seeds.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/loop_invariants.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/gemm_settings_guard.h"

namespace kiln::runtime {
namespace {

// (float32 kernel set, bf16 kernel set) pairs this CPU runs: every bf16 set beside avx512
// float32 kernels, and the AMX layout's emulation beside avx2 ones too (it needs only AVX2), so
// that the pair packers' rounding runs on every AVX2 CPU.
std::vector<std::pair<std::string, std::string>> rounded_kernel_sets() {
  std::vector<std::pair<std::string, std::string>> sets;
  for (const auto& [f32, bf16] : runnable_kernel_set_pairs({"avx512", "avx2", "eigen"}))
    if (bf16 == "float32" || f32 == "avx512" || (bf16 == "amx-emulated" && f32 == "avx2"))
      sets.emplace_back(f32, bf16);
  return sets;
}

// Random float32 values of mixed exponents with random low halves; every 7th an exact tie
// (low half 0x8000), every 11th one that rounds up into the next binade.
std::vector<float> rounding_inputs(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-6, 6);
  std::vector<float> x(size);
  for (size_t i = 0; i < size; ++i) {
    x[i] = std::ldexp(u(rng), e(rng));
    uint32_t bits = std::bit_cast<uint32_t>(x[i]);
    if (i % 7 == 3) bits = (bits & 0xFFFF0000u) | 0x8000u;
    if (i % 11 == 5) bits = (bits & 0xFF800000u) | 0x007FFFFFu;
    x[i] = std::bit_cast<float>(bits);
  }
  return x;
}

std::vector<bfloat16> rounded_bf16(const std::vector<float>& x) {
  std::vector<bfloat16> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = bfloat16::from_float(x[i]);
  return r;
}

struct RoundedProduct {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<float> a, b;
  std::vector<bfloat16> a16, b16;

  RoundedProduct(bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, uint64_t seed)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_) {
    lda = (ta ? m : k) + 3;
    ldb = (tb ? k : n) + 5;
    ldc = n + 1;
    a = rounding_inputs(size_t((ta ? k : m) * lda), seed);
    b = rounding_inputs(size_t((tb ? n : k) * ldb), seed + 1);
    a16 = rounded_bf16(a);
    b16 = rounded_bf16(b);
  }

  // gemm_bf16 with A and / or B given as float32 (rounded as packed), else as bf16.
  std::vector<float> run(bool round_a, bool round_b, bool parallel, bool by_rows) const {
    std::vector<float> c(size_t(m * ldc), -5.5f);
    const Bf16Operand oa = round_a ? Bf16Operand::rounded(a.data()) : Bf16Operand(a16.data());
    const Bf16Operand ob = round_b ? Bf16Operand::rounded(b.data()) : Bf16Operand(b16.data());
    const std::function<void(int64_t, int64_t)> rows = [](int64_t, int64_t) {};
    gemm_bf16(ta, tb, m, n, k, oa, lda, ob, ldb, c.data(), ldc, parallel,
              by_rows ? &rows : nullptr);
    return c;
  }

  std::string describe() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
  }
};

bool same_rounded_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), 4 * x.size()) == 0;
}

// {m, n, k}: packed panels both ways, one column tile against a transposed B (C^T), few rows
// of a deep product, odd k (a half pair) and k past one k block, edge tiles.
constexpr int64_t kRoundedShapes[][3] = {{130, 97, 300}, {32, 256, 129}, {9, 70, 600},
                                         {150, 30, 70},  {33, 47, 1100}, {1, 1, 1}};

TEST(GemmBf16Rounded, BitwiseTheProductOfTheRoundedOperands) {
  GemmSettingsGuard guard;
  for (const auto& [f32, bf16] : rounded_kernel_sets()) {
    set_gemm_kernels(f32);
    set_gemm_bf16_kernels(bf16);
    for (const auto& s : kRoundedShapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          if (bf16 == "amx-emulated" && s[0] * s[1] * s[2] > 3'000'000) continue;
          const RoundedProduct p(ta, tb, s[0], s[1], s[2], 31 + uint64_t(s[0] + s[2]));
          const std::string what = f32 + "/" + bf16 + " " + p.describe();
          for (int threads : {1, 2, 3}) {
            set_num_threads(threads);
            const std::vector<float> want = p.run(false, false, true, false);
            for (bool by_rows : {false, true}) {
              EXPECT_TRUE(same_rounded_bits(p.run(true, false, true, by_rows), want))
                  << what << " A";
              EXPECT_TRUE(same_rounded_bits(p.run(false, true, true, by_rows), want))
                  << what << " B";
              EXPECT_TRUE(same_rounded_bits(p.run(true, true, true, by_rows), want))
                  << what << " A, B";
            }
          }
          EXPECT_TRUE(
              same_rounded_bits(p.run(true, true, false, false), p.run(false, false, false, false)))
              << what << " serial";
        }
  }
}

// A B packed once per loop (runtime/loop_invariants.h) is keyed by whether it was rounded: a
// float32 product and a bf16 product reading the same float32 buffer in one loop each get their
// own packed copy (the float32 kernels pack B once per loop).
TEST(GemmBf16Rounded, LoopInvariantBKeepsRoundedAndFloat32CopiesApart) {
  GemmSettingsGuard guard;
  set_gemm_bf16_kernels("float32");
  if (gemm_kernels() == "eigen") GTEST_SKIP() << "Eigen's GEMM packs nothing once per loop";
  set_num_threads(2);
  const RoundedProduct p(false, false, 32, 256, 300, 7);
  const std::vector<float> want_bf16 = p.run(false, false, true, false);
  std::vector<float> want_f32(size_t(p.m * p.ldc), 0.0f);
  gemm<float>(false, false, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, want_f32.data(),
              p.ldc);
  LoopInvariantScope loop({{p.b.data(), p.b.size() * sizeof(float)}});
  for (int round = 0; round < 2; ++round) {
    std::vector<float> f32(size_t(p.m * p.ldc), 0.0f);
    gemm<float>(false, false, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, f32.data(),
                p.ldc);
    EXPECT_TRUE(same_rounded_bits(f32, want_f32)) << "float32, round " << round;
    EXPECT_TRUE(same_rounded_bits(p.run(false, true, true, false), want_bf16))
        << "rounded, round " << round;
  }
  EXPECT_EQ(loop.fills(), 2);
}

// The plan says which operand is rounded as it is packed.
TEST(GemmBf16Rounded, PlansNameTheRoundedOperand) {
  GemmSettingsGuard guard;
  set_gemm_bf16_kernels("float32");
  const gemm_detail::MicroKernels* mk = gemm_detail::active_microkernels();
  if (mk == nullptr) GTEST_SKIP() << "this CPU runs only Eigen's GEMM (no plans)";
  gemm_detail::GemmShape shape{512, 1024, 256, false, false, 2, true};
  shape.a_bf16 = shape.b_bf16 = true;
  shape.b_rounded = true;
  const std::string text =
      gemm_detail::make_gemm_plan(*mk, shape, gemm_detail::gemm_params(*mk, shape)).describe();
  EXPECT_NE(text.find("A bf16 packed"), std::string::npos) << text;
  EXPECT_NE(text.find("B f32->bf16 packed"), std::string::npos) << text;
}

// The MatMul kernel of a bf16 result takes float32 operands as rounded ones (what a compiled
// group's fused cast hands it): stacked, batched and broadcast operands give the product of the
// cast operands bit for bit; an operand of another dtype is an error naming it.
TEST(GemmBf16Rounded, MatMulKernelRoundsFloat32Operands) {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {{Shape({40, 33}), Shape({33, 20}), false, false},
                        {Shape({3, 17, 24}), Shape({24, 9}), false, false},
                        {Shape({2, 24, 17}), Shape({2, 9, 24}), true, true}};
  uint64_t seed = 3;
  for (const Case& c : cases) {
    Array a32 = Array::empty(DType::f32, c.a), b32 = Array::empty(DType::f32, c.b);
    const std::vector<float> av = rounding_inputs(size_t(a32.size()), seed++),
                             bv = rounding_inputs(size_t(b32.size()), seed++);
    std::memcpy(a32.raw(), av.data(), a32.nbytes());
    std::memcpy(b32.raw(), bv.data(), b32.nbytes());
    Array a16 = Array::empty(DType::bf16, c.a), b16 = Array::empty(DType::bf16, c.b);
    const std::vector<bfloat16> ar = rounded_bf16(av), br = rounded_bf16(bv);
    std::memcpy(a16.raw(), ar.data(), a16.nbytes());
    std::memcpy(b16.raw(), br.data(), b16.nbytes());
    Attrs attrs;
    attrs.set("transpose_a", c.ta);
    attrs.set("transpose_b", c.tb);
    const Array want = run_op(OpKind::MatMul, std::vector<Array>{a16, b16}, attrs);
    for (int which = 0; which < 3; ++which) {  // A rounded, B rounded, both
      const std::vector<Array> operands{which == 1 ? a16 : a32, which == 0 ? b16 : b32};
      Array got = Array::empty(want.type());
      kernel_for(OpKind::MatMul)(operands, attrs, got);
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0)
          << c.a.to_string() << " x " << c.b.to_string() << ", case " << which;
    }
  }
  Array i32 = Array::empty(DType::i32, Shape({4, 4}));
  Array b16 = Array::empty(DType::bf16, Shape({4, 4}));
  Array out = Array::empty(DType::bf16, Shape({4, 4}));
  Attrs attrs;
  attrs.set("transpose_a", false);
  attrs.set("transpose_b", false);
  try {
    kernel_for(OpKind::MatMul)(std::vector<Array>{i32, b16}, attrs, out);
    ADD_FAILURE() << "an int32 operand of a bf16 product was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::runtime
