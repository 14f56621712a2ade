// Products of bf16 operands (runtime::gemm_bf16, the engine's widening packers in
// runtime/gemm_widen.h, and the bf16 MatMul kernel): a bf16 value widens to float32 exactly, so
// each product must be, bit for bit, gemm<float> of the widened operands, on every kernel set,
// thread count, grid and entry point (the engine's promise: every element one FMA chain over k
// in k order); bf16 operands are always packed, and plans say so; the MatMul kernel gives the
// float32 product rounded once (ops.def's via-f32 values) for stacked, batched and broadcast
// operands. Operand values are random bf16 with the full range of exponents a product of
// activations sees, padded leading dimensions, and a canary border on C. Fixed seeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/gemm_settings_guard.h"

namespace kiln::runtime {
namespace {

// The bf16 kernel sets this CPU runs: float32 always, the emulated VDPBF16PS pairs on AVX-512F
// and AMX tiles on AVX2, the VDPBF16PS kernels on AVX512-BF16, the AMX ones on AMX-BF16.
std::vector<std::string> runnable_bf16_sets() {
  std::vector<std::string> sets;
  for (const char* name : {"float32", "avx512bf16-emulated", "amx-emulated", "avx512bf16", "amx"}) {
    try {
      GemmSettingsGuard guard;
      set_gemm_bf16_kernels(name);
      sets.push_back(name);
    } catch (const Error&) {  // this CPU cannot run them
    }
  }
  return sets;
}

// Equal as floats (a zero's sign aside: the pair kernels' odd k adds +0 at the end) and, where
// `bitwise`, bit for bit.
bool same_values(const std::vector<float>& got, const std::vector<float>& want, bool bitwise) {
  if (bitwise)
    return got.size() == want.size() && std::memcmp(got.data(), want.data(), 4 * got.size()) == 0;
  return got == want;
}

std::vector<std::string> runnable_kernel_sets() {
  std::vector<std::string> sets;
  for (const char* name : {"avx512", "avx2", "eigen"}) {
    try {
      GemmSettingsGuard guard;
      set_gemm_kernels(name);
      sets.push_back(name);
    } catch (const Error&) {  // this CPU cannot run them
    }
  }
  return sets;
}

// One product of bf16 operands, and the same operands widened to float32 (same layout).
struct Bf16Product {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<bfloat16> a, b;
  std::vector<float> wa, wb;
  static constexpr float kCanary = -777.25f;

  Bf16Product(bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, uint64_t seed)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<int> e(-6, 6);
    lda = (ta ? m : k) + 3;
    ldb = (tb ? k : n) + 5;
    ldc = n + 7;
    auto fill = [&](std::vector<bfloat16>& x, std::vector<float>& w, size_t size) {
      x.resize(size);
      w.resize(size);
      for (size_t i = 0; i < size; ++i) {
        x[i] = bfloat16::from_float(std::ldexp(u(rng), e(rng)));
        w[i] = x[i].to_float();
      }
    };
    fill(a, wa, size_t((ta ? k : m) * lda));
    fill(b, wb, size_t((tb ? n : k) * ldb));
  }

  std::vector<float> canvas() const { return std::vector<float>(size_t(m * ldc), kCanary); }

  // This product's bf16 operands into `c` (a canvas), straight through the engine: the
  // arguments of gemm_detail::run_gemm.
  gemm_detail::SgemmArgs engine_args(float* c) const {
    gemm_detail::SgemmArgs args{ta, tb, m, n, k, nullptr, lda, nullptr, ldb, c, ldc, false};
    args.a16 = reinterpret_cast<const uint16_t*>(a.data());
    args.b16 = reinterpret_cast<const uint16_t*>(b.data());
    return args;
  }

  // gemm<float> (or gemm_serial) of the widened operands: the bits every path must give.
  std::vector<float> float32(bool parallel) const {
    std::vector<float> c = canvas();
    if (parallel)
      gemm<float>(ta, tb, m, n, k, wa.data(), lda, wb.data(), ldb, c.data(), ldc);
    else
      gemm_serial<float>(ta, tb, m, n, k, wa.data(), lda, wb.data(), ldb, c.data(), ldc);
    return c;
  }

  std::vector<float> bf16(bool parallel, std::vector<int>* rows_seen = nullptr) const {
    std::vector<float> c = canvas();
    const std::function<void(int64_t, int64_t)> on_rows = [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) ++(*rows_seen)[size_t(i)];
    };
    gemm_bf16(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, parallel,
              rows_seen ? &on_rows : nullptr);
    return c;
  }

  std::string describe(const std::string& set) const {
    return set + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
  }
};

// {m, n, k}: large square (both packed), narrow tasks (A read directly in float32), one column
// tile against a transposed B (computed as C^T), a B over 4 MiB of few rows (copied in blocks
// in float32), a narrow C of many rows (C^T), edge tiles everywhere; odd k (a half pair) with
// even and odd leading dimensions.
constexpr int64_t kShapes[][3] = {{515, 641, 384}, {64, 256, 784}, {32, 1024, 256}, {9, 70, 600},
                                  {150, 30, 700},  {40, 70, 9000}, {500, 10, 64},   {1, 1, 1},
                                  {33, 47, 129},   {20, 40, 77},   {70, 3, 2}};

// On every float32 kernel set and every bf16 one: the float32 kernels bit for bit, the pair
// kernels up to a zero's sign (the values here have no denormal products or sums).
TEST(GemmBf16Test, BitwiseTheFloat32ProductOfTheWidenedOperands) {
  GemmSettingsGuard guard;
  for (const std::string& set : runnable_kernel_sets())
    for (const std::string& bf16_set : runnable_bf16_sets()) {
      if (bf16_set != "float32" && set != "avx512") continue;  // pair kernels pack with AVX2
      set_gemm_kernels(set);
      set_gemm_bf16_kernels(bf16_set);
      const bool bitwise = bf16_set == "float32";
      for (const auto& s : kShapes) {
        // The AMX emulation is scalar: the products of a few million multiplications.
        if (bf16_set == "amx-emulated" && s[0] * s[1] * s[2] > 3'000'000) continue;
        // Real AMX adds a tile's pairs in an order of its own (gemm_bf16.h): its own test.
        if (bf16_set == "amx") continue;
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            const Bf16Product p(ta, tb, s[0], s[1], s[2], 11 + uint64_t(s[0] * 3 + s[2]));
            const std::string what = p.describe(set + "/" + bf16_set);
            for (int threads : {1, 2, 3}) {
              set_num_threads(threads);
              const std::vector<float> want = p.float32(true);
              EXPECT_TRUE(same_values(p.bf16(true), want, bitwise))
                  << what << ", " << threads << " threads";
              std::vector<int> seen(size_t(p.m), 0);
              EXPECT_TRUE(same_values(p.bf16(true, &seen), want, bitwise))
                  << what << " with row blocks";
              for (int64_t i = 0; i < p.m; ++i)
                ASSERT_EQ(seen[size_t(i)], 1) << what << ": row " << i << "'s callbacks";
            }
            EXPECT_TRUE(same_values(p.bf16(false), p.float32(false), bitwise)) << what << " serial";
          }
      }
    }
}

// accumulate: C += op(A) op(B), each element's chain continuing from C, as gemm<float>'s
// accumulate on the widened operands (from a C of random values, twice in a row: a filter
// gradient's chunks), serial and split, on every kernel set.
TEST(GemmBf16Test, AccumulateContinuesFromC) {
  GemmSettingsGuard guard;
  for (const std::string& set : runnable_kernel_sets())
    for (const std::string& bf16_set : runnable_bf16_sets()) {
      if (bf16_set != "float32" && set != "avx512") continue;
      if (bf16_set == "amx") continue;  // its own order of a tile's pairs: its own test
      set_gemm_kernels(set);
      set_gemm_bf16_kernels(bf16_set);
      const bool bitwise = bf16_set == "float32";
      for (const auto& s :
           {std::array<int64_t, 3>{144, 32, 1568}, std::array<int64_t, 3>{33, 47, 129},
            std::array<int64_t, 3>{515, 64, 300}})
        for (bool ta : {false, true}) {
          const Bf16Product p(ta, false, s[0], s[1], s[2], 97 + uint64_t(s[2]));
          std::mt19937_64 rng(5);
          std::uniform_real_distribution<float> u(-4.0f, 4.0f);
          std::vector<float> start = p.canvas();
          for (float& v : start) v = u(rng);
          for (bool parallel : {false, true}) {
            set_num_threads(2);
            std::vector<float> want = start, got = start;
            for (int twice = 0; twice < 2; ++twice) {
              if (parallel)
                gemm<float>(p.ta, p.tb, p.m, p.n, p.k, p.wa.data(), p.lda, p.wb.data(), p.ldb,
                            want.data(), p.ldc, true);
              else
                gemm_serial<float>(p.ta, p.tb, p.m, p.n, p.k, p.wa.data(), p.lda, p.wb.data(),
                                   p.ldb, want.data(), p.ldc, true);
              gemm_bf16(p.ta, p.tb, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, got.data(),
                        p.ldc, parallel, nullptr, true);
            }
            EXPECT_TRUE(same_values(got, want, bitwise))
                << p.describe(set + "/" + bf16_set) << (parallel ? " split" : " serial");
          }
        }
    }
}

TEST(GemmBf16Test, Bf16KernelSetsAreNamedAndCheckedAgainstTheCpu) {
  GemmSettingsGuard guard;
  EXPECT_THROW(set_gemm_bf16_kernels("tpu"), Error);
  set_gemm_bf16_kernels("float32");
  EXPECT_EQ(gemm_bf16_kernels(), "float32");
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("amx-bf16")) {
    EXPECT_THROW(set_gemm_bf16_kernels("amx"), Error);
  }
  if (!__builtin_cpu_supports("avx512bf16")) {
    EXPECT_THROW(set_gemm_bf16_kernels("avx512bf16"), Error);
  } else if (!__builtin_cpu_supports("amx-bf16")) {
    set_gemm_bf16_kernels("auto");
    if (gemm_kernels() == "avx512") {
      EXPECT_EQ(gemm_bf16_kernels(),
                gemm_detail::vdpbf16ps_outruns_fma() ? "avx512bf16" : "float32");
    }
  }
  set_gemm_bf16_kernels("auto");
  if (!__builtin_cpu_supports("avx512bf16") && !__builtin_cpu_supports("amx-bf16")) {
    EXPECT_EQ(gemm_bf16_kernels(), "float32");
  }
}

// Where the CPU has AVX512-BF16 and the float32 kernels are avx512, auto's choice between
// VDPBF16PS and the float32 kernels follows the two loops it measured, and says so (skipped
// elsewhere, saying so; the choice itself is the faster loop, whatever the CPU).
TEST(GemmBf16Test, VdpbfChoiceFollowsTheMeasuredLoops) {
  GemmSettingsGuard guard;
  __builtin_cpu_init();
  set_gemm_kernels("auto");
  if (!__builtin_cpu_supports("avx512bf16") || gemm_kernels() != "avx512")
    GTEST_SKIP() << "this CPU has no AVX512-BF16 (or no avx512 float32 kernels): auto never "
                    "weighs VDPBF16PS here";
  const bool faster = gemm_detail::vdpbf16ps_outruns_fma();
  const std::string note = gemm_detail::vdpbf16ps_choice_note();
  ASSERT_FALSE(note.empty());
  EXPECT_TRUE(note.ends_with(faster ? ": avx512bf16" : ": float32")) << note;
  std::cout << note << "\n";
}

// Checks kernel set `real` against a float64 product within the bound of a float32 dot product
// of length k (any order of the additions), and, if `bitwise_with` is set, against that
// emulation of it (equal as floats), on values without denormal products.
void check_bf16_set(const std::string& real, const char* bitwise_with) {
  set_gemm_kernels("avx512");
  for (const auto& s : kShapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Bf16Product p(ta, tb, s[0], s[1], s[2], 23 + uint64_t(s[1]));
        std::vector<float> emulated;
        if (bitwise_with) {
          set_gemm_bf16_kernels(bitwise_with);
          emulated = p.bf16(true);
        }
        set_gemm_bf16_kernels(real);
        const std::vector<float> got = p.bf16(true);
        const std::string what = p.describe(real);
        const double u = std::ldexp(1.0, -24);
        const double gamma = (2.0 * double(p.k) + 2.0) * u / (1.0 - (2.0 * double(p.k) + 2.0) * u);
        for (int64_t i = 0; i < p.m; ++i) {
          for (int64_t j = 0; j < p.n; ++j) {
            double exact = 0, magnitude = 0;
            for (int64_t q = 0; q < p.k; ++q) {
              const double a = p.wa[size_t(ta ? q * p.lda + i : i * p.lda + q)];
              const double b = p.wb[size_t(tb ? j * p.ldb + q : q * p.ldb + j)];
              exact += a * b;
              magnitude += std::abs(a * b);
            }
            ASSERT_LE(std::abs(double(got[size_t(i * p.ldc + j)]) - exact), gamma * magnitude)
                << what << " at (" << i << ", " << j << ")";
          }
          for (int64_t j = p.n; j < p.ldc; ++j)
            ASSERT_EQ(got[size_t(i * p.ldc + j)], Bf16Product::kCanary) << what << ": row " << i;
        }
        if (bitwise_with) {
          EXPECT_TRUE(same_values(got, emulated, false)) << what << " vs " << bitwise_with;
        }
      }
}

// The VDPBF16PS kernels where the CPU has them (skipped elsewhere, saying so): within the bound,
// and bit for bit their emulation, the order the SDM gives VDPBF16PS (a lane's upper pair
// element first).
TEST(GemmBf16Test, Avx512Bf16KernelsAgreeWithTheirEmulation) {
  GemmSettingsGuard guard;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512f"))
    GTEST_SKIP() << "this CPU has no AVX512-BF16: the VDPBF16PS kernels are not run here";
  check_bf16_set("avx512bf16", "avx512bf16-emulated");
}

// The AMX kernels where the CPU has them and Linux grants the tile data (skipped elsewhere,
// saying so): within the bound only, as the SDM describes TDPBF16PS's order of additions in two
// ways (one chain per element, or even and odd products apart); the layout itself is checked
// bit for bit on every AVX2 CPU through amx-emulated.
TEST(GemmBf16Test, AmxKernelsStayWithinTheDotProductBound) {
  GemmSettingsGuard guard;
  try {
    set_gemm_bf16_kernels("amx");
  } catch (const Error& e) {
    GTEST_SKIP() << "the AMX kernels are not run here: " << e.what();
  }
  check_bf16_set("amx", nullptr);
}

// A product with a side under half of the pair kernels' tile (gemm_detail::bf16_kernels_for)
// runs on the float32 kernels: the float32 product's bits (checked on the AMX layout's
// emulation, which any AVX2 CPU runs).
TEST(GemmBf16Test, ThinProductsRunOnTheFloat32Kernels) {
  GemmSettingsGuard guard;
  try {
    set_gemm_bf16_kernels("amx-emulated");
  } catch (const Error& e) {
    GTEST_SKIP() << "no AMX emulation here: " << e.what();
  }
  const gemm_detail::MicroKernels* amx = gemm_detail::active_bf16_microkernels();
  ASSERT_NE(amx, nullptr);
  EXPECT_EQ(gemm_detail::bf16_kernels_for(64, 64, 64), amx);
  EXPECT_EQ(gemm_detail::bf16_kernels_for(16, 16, 16), amx);        // half of 32 in every side
  EXPECT_EQ(gemm_detail::bf16_kernels_for(6272, 10, 64), nullptr);  // 10 of 32 columns
  EXPECT_EQ(gemm_detail::bf16_kernels_for(10, 6272, 64), nullptr);  // the same, as C^T
  EXPECT_EQ(gemm_detail::bf16_kernels_for(64, 6272, 10), nullptr);  // 10 of 32 per k step
  EXPECT_EQ(gemm_detail::bf16_kernels_for(15, 64, 64), nullptr);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Bf16Product p(ta, tb, 300, 10, 70, 77);
      EXPECT_TRUE(same_values(p.bf16(true), p.float32(true), true)) << p.describe("amx-emulated");
    }
}

// Straight through the engine: any grid gives the same bits, and bf16 operands are never read
// as they are stored: packed (as pairs by the pair kernels), or on the float32 kernels widened
// (the rows of A's panels, AMode::kRowsWidened; a small B whole, BMode::kWidened).
TEST(GemmBf16Test, EveryGridPacksTheBf16OperandsAndGivesTheSameBits) {
  GemmSettingsGuard guard;
  bool ran = false;
  int widened_a = 0, widened_b = 0, rows_planned = 0, tiles_in_place = 0;
  std::vector<std::string> sets = runnable_kernel_sets();
  if (std::find(sets.begin(), sets.end(), "avx512") != sets.end()) {
    sets.push_back("avx512bf16-emulated");
    sets.push_back("amx-emulated");
  }
  for (const std::string& set : sets) {
    if (set == "eigen") continue;
    const bool pairs = set.find("-emulated") != std::string::npos;
    set_gemm_kernels(pairs ? "avx512" : set);
    set_num_threads(1);
    ran = true;
    const gemm_detail::MicroKernels& mk =
        set == "avx512bf16-emulated" ? gemm_detail::avx512bf16_emulated_microkernels()
        : set == "amx-emulated"      ? gemm_detail::amx_emulated_microkernels()
                                     : *gemm_detail::active_microkernels();
    for (const auto& s : kShapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          if (set == "amx-emulated" && s[0] * s[1] * s[2] > 3'000'000) continue;
          const Bf16Product p(ta, tb, s[0], s[1], s[2], 5 + uint64_t(s[1]));
          const std::vector<float> want = p.float32(false);
          gemm_detail::GemmShape shape{p.m, p.n, p.k, ta, tb, 3, false};
          shape.a_bf16 = shape.b_bf16 = true;
          for (gemm_detail::GemmGrid grid :
               {gemm_detail::GemmGrid{1, 1}, gemm_detail::GemmGrid{3, 1},
                gemm_detail::GemmGrid{1, 4}, gemm_detail::GemmGrid{5, 3}})
            for (bool row_calls : {true, false}) {
              // A set with a row function (AMX) runs each plan with and without it.
              if (!row_calls && !mk.tile_row) continue;
              gemm_detail::GemmParams params = gemm_detail::gemm_params(mk, shape);
              params.row_calls = row_calls;
              const gemm_detail::GemmPlan plan =
                  gemm_detail::make_gemm_plan(mk, shape, params, grid);
              EXPECT_EQ(plan.row_calls, row_calls && mk.tile_row != nullptr);
              rows_planned += plan.row_calls;
              const std::string what = p.describe(set) + " grid " +
                                       std::to_string(grid.row_blocks) + "x" +
                                       std::to_string(grid.col_blocks) + ": " + plan.describe();
              const bool a_widened = plan.a == gemm_detail::AMode::kRowsWidened;
              const bool b_widened = plan.b == gemm_detail::BMode::kWidened;
              // AMX tiles read a row-major bf16 A in place (whole chunks of 32 values a row).
              const bool a_in_place = plan.a == gemm_detail::AMode::kRowsDirect;
              EXPECT_TRUE(plan.a == gemm_detail::AMode::kPackedAll ||
                          plan.a == gemm_detail::AMode::kPackedPerPanel || (a_widened && !pairs) ||
                          (a_in_place && mk.pair_layout == gemm_detail::PairLayout::kTiles &&
                           p.k % 32 == 0 && !plan.ta))
                  << what;
              tiles_in_place += a_in_place;
              EXPECT_TRUE(plan.b == gemm_detail::BMode::kPacked ||
                          plan.b == gemm_detail::BMode::kPackedPerTask ||
                          plan.b == gemm_detail::BMode::kPackedPerKBlock || (b_widened && !pairs))
                  << what;
              EXPECT_NE(plan.describe().find(a_widened    ? "A bf16 rows-widened"
                                             : a_in_place ? "A bf16 rows-direct"
                                                          : "A bf16 packed"),
                        std::string::npos)
                  << what;
              EXPECT_NE(plan.describe().find(b_widened ? "B bf16 widened" : "B bf16 packed"),
                        std::string::npos)
                  << what;
              widened_a += a_widened;
              widened_b += b_widened;
              EXPECT_EQ(plan.describe().find(" pairs x ") != std::string::npos, pairs) << what;
              EXPECT_EQ(plan.k, mk.steps(p.k)) << what;
              EXPECT_EQ(plan.k, set == "amx-emulated" ? (p.k + 31) / 32 * 16
                                : pairs               ? (p.k + 1) / 2
                                                      : p.k)
                  << what;
              std::vector<float> c = p.canvas();
              gemm_detail::run_gemm(mk, plan, p.engine_args(c.data()));
              EXPECT_TRUE(same_values(c, want, !pairs)) << what;
            }
        }
  }
  if (!ran) GTEST_SKIP() << "this CPU runs only Eigen's GEMM (no packing to test)";
  // Narrow tasks over A's rows and small B's occur among these shapes and grids; the AMX sets
  // (amx-emulated wherever avx512 runs) plan row calls and read A in place.
  EXPECT_GT(widened_a, 0);
  if (std::find(sets.begin(), sets.end(), "amx-emulated") != sets.end()) {
    EXPECT_GT(rows_planned, 0);
    EXPECT_GT(tiles_in_place, 0);
  }
  EXPECT_GT(widened_b, 0);
}

// Runs fn(set, kernels) with each float32 kernel set of the engine this CPU runs (not Eigen's)
// made the active one; false when there is none.
template <class Fn>
bool for_each_engine_set(Fn fn) {
  bool ran = false;
  for (const std::string& set : runnable_kernel_sets()) {
    if (set == "eigen") continue;
    set_gemm_kernels(set);
    ran = true;
    fn(set, *gemm_detail::active_microkernels());
  }
  return ran;
}

// A narrow bf16 B under a task of one panel's rows is widened, never read in place, even where
// a float32 B of its size would be copied block by block (every B "large": large_b_bytes 1):
// the float32 kernels' bits.
TEST(GemmBf16Test, ANarrowBf16BIsWidenedWhereAFloat32OneWouldBeCopied) {
  GemmSettingsGuard guard;
  const bool ran =
      for_each_engine_set([](const std::string& set, const gemm_detail::MicroKernels& mk) {
        const int64_t mr = mk.shapes[0].mr;
        const Bf16Product p(false, false, mr, 10, 300, 41);
        gemm_detail::GemmShape shape{p.m, p.n, p.k, false, false, 1, false};
        shape.a_bf16 = shape.b_bf16 = true;
        gemm_detail::GemmParams params = gemm_detail::gemm_params(mk, shape);
        params.large_b_bytes = 1;
        params.mr_direct = int32_t(std::max<int64_t>(1, mr / 2));  // two panels: copies would pay
        const gemm_detail::GemmPlan plan = gemm_detail::make_gemm_plan(mk, shape, params);
        EXPECT_EQ(plan.b, gemm_detail::BMode::kWidened) << set << ": " << plan.describe();
        std::vector<float> c = p.canvas();
        gemm_detail::run_gemm(mk, plan, p.engine_args(c.data()));
        EXPECT_TRUE(same_values(c, p.float32(false), true)) << set << ": " << plan.describe();
      });
  if (!ran) GTEST_SKIP() << "this CPU runs only Eigen's GEMM (no plans to test)";
}

// The widening transposing copy of each kernel set, every block and remainder size.
TEST(GemmBf16Test, WideningTransposeIsExact) {
  GemmSettingsGuard guard;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> bits(0, 0xFFFF);
  const bool ran =
      for_each_engine_set([&](const std::string& set, const gemm_detail::MicroKernels& mk) {
        for (int64_t rows = 1; rows <= 19; ++rows)
          for (int64_t cols = 1; cols <= 19; ++cols) {
            const int64_t src_ld = cols + 2, dst_ld = rows + 3;
            std::vector<uint16_t> src(size_t(rows * src_ld));
            for (uint16_t& x : src) x = uint16_t(bits(rng));
            std::vector<float> dst(size_t(cols * dst_ld), 5.0f);
            mk.widen_transpose(src.data(), src_ld, rows, cols, dst.data(), dst_ld);
            for (int64_t p = 0; p < cols; ++p)
              for (int64_t i = 0; i < dst_ld; ++i) {
                const uint32_t want = i < rows ? uint32_t(src[size_t(i * src_ld + p)]) << 16
                                               : std::bit_cast<uint32_t>(5.0f);
                ASSERT_EQ(std::bit_cast<uint32_t>(dst[size_t(p * dst_ld + i)]), want)
                    << set << " " << rows << "x" << cols << " at column " << p << " row " << i;
              }
          }
      });
  if (!ran) GTEST_SKIP() << "this CPU runs only Eigen's GEMM (no packing to test)";
}

Array bf16_array(const Shape& shape, std::mt19937& rng) {
  Array x = Array::empty({DType::bf16, shape});
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  auto* d = x.data<bfloat16>();
  for (int64_t i = 0; i < x.size(); ++i) d[i] = bfloat16::from_float(u(rng));
  return x;
}

// |x| of a float32 array.
Array absolute_values(const Array& x) {
  Array y = Array::empty({DType::f32, x.shape});
  for (int64_t i = 0; i < x.size(); ++i) y.data<float>()[i] = std::abs(x.data<float>()[i]);
  return y;
}

Array widened(const Array& x) {
  Array w = Array::empty({DType::f32, x.shape});
  for (int64_t i = 0; i < x.size(); ++i) w.data<float>()[i] = x.data<bfloat16>()[i].to_float();
  return w;
}

// The MatMul kernel on bf16, for every way it cuts a batch into products (stacked rows,
// entries in parallel, in turn) and every bf16 kernel set this CPU runs: the float32 kernel's
// result on the widened operands, rounded once (the same value on the pair kernels that keep its
// chains: VDPBF16PS and the emulations; bit for bit on the float32 kernels); on the real AMX
// kernels, whose TDPBF16PS adds in an order of its own, within the bound of a float32 sum in any
// order rounded to bf16.
TEST(GemmBf16Test, MatMulKernelRoundsTheFloat32ProductOnce) {
  GemmSettingsGuard guard;
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {Shape{4, 33, 70}, Shape{70, 50}, false, false},        // stacked rows against one matrix
      {Shape{4, 33, 70}, Shape{50, 70}, false, true},         // the same, B transposed
      {Shape{64, 9, 12}, Shape{64, 12, 7}, false, false},     // many small entries in parallel
      {Shape{2, 300, 200}, Shape{2, 200, 260}, true, false},  // few large ones in turn (ta)
      {Shape{3, 1, 40, 24}, Shape{5, 24, 16}, false, false},  // broadcast batch axes
      {Shape{0, 8, 8}, Shape{8, 8}, false, false},            // empty
  };
  for (const std::string& set : runnable_bf16_sets()) {
    set_gemm_bf16_kernels(set);
    std::mt19937 rng(3);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (const Case& c : cases) {
        Attrs attrs;
        attrs.set("transpose_a", AttrValue(c.ta));
        attrs.set("transpose_b", AttrValue(c.tb));
        // ta on the left operand's last two axes.
        Shape as = c.a;
        if (c.ta) std::swap(as[as.rank() - 2], as[as.rank() - 1]);
        const Array a = bf16_array(as, rng), b = bf16_array(c.b, rng);
        const Array in16[] = {a, b};
        const Array in32[] = {widened(a), widened(b)};
        const Array absolute[] = {absolute_values(in32[0]), absolute_values(in32[1])};
        const Array got = run_op(OpKind::MatMul, in16, attrs);
        const Array f = run_op(OpKind::MatMul, in32, attrs);
        const Array magnitude = run_op(OpKind::MatMul, absolute, attrs);
        ASSERT_EQ(got.dtype, DType::bf16);
        ASSERT_EQ(got.shape, f.shape);
        const std::string what = as.to_string() + " x " + c.b.to_string() + " on " + set + ", " +
                                 std::to_string(threads) + " threads";
        // Each element sums k products of values that bf16 holds (no denormals: |x| <= 2).
        const int64_t k = c.ta ? as[as.rank() - 2] : as[as.rank() - 1];
        const double u = std::ldexp(1.0, -24), n = 2.0 * double(k) + 2.0;
        const double gamma = n * u / (1.0 - n * u);
        for (int64_t i = 0; i < got.size(); ++i) {
          const float value = got.data<bfloat16>()[i].to_float(), f32 = f.data<float>()[i];
          if (set == "float32") {
            ASSERT_EQ(got.data<bfloat16>()[i].bits, bfloat16::from_float(f32).bits)
                << what << " at " << i;
          } else if (set != "amx") {
            ASSERT_EQ(value, bfloat16::from_float(f32).to_float()) << what << " at " << i;
          } else {
            // |got - f| <= |got - s| + |s - exact| + |exact - f|, s the kernel's float32 sum:
            // 2^-8 |s| + 2 gamma sum|ab|, with |s| <= |f| + 2 gamma sum|ab|; the float32 sum of
            // |ab| is at least (1 - gamma) sum|ab|.
            const double mag = double(magnitude.data<float>()[i]) / (1.0 - gamma);
            const double bound = 2 * gamma * mag + std::ldexp(std::abs(f32) + 2 * gamma * mag, -8);
            ASSERT_LE(std::abs(double(value) - double(f32)), bound) << what << " at " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::runtime
