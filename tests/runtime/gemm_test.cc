// kiln's float32 GEMM engine (runtime/gemm.h, gemm_engine.h) on every kernel set this CPU runs
// (avx512, avx2, eigen): results against a float64 loop within the a-priori bound of a
// length-k float32 dot product (gamma_(2k+2) * sum |a| |b|, any summation order, so the test
// holds on every CPU); and bitwise identity where the engine promises it: any task grid, any
// thread count, gemm / gemm_serial / gemm_rows, and the avx512 kernels against the avx2 ones.
// Tiles at every edge (rows 1..mr, partial columns), strided operands, accumulation; nothing
// outside C is written. Fixed seeds.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

// Restores the kernel set and thread count at scope exit.
class GemmSettingsGuard {
 public:
  GemmSettingsGuard() : kernels_(gemm_kernels()), threads_(num_threads()) {}
  ~GemmSettingsGuard() {
    set_gemm_kernels(kernels_);
    set_num_threads(threads_);
  }

 private:
  std::string kernels_;
  int threads_;
};

std::vector<std::string> kernel_sets() {
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

// One product's operands, stored with padded leading dimensions; C has a canary border.
struct Problem {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  std::vector<float> a, b, c0;  // c0: C's initial contents (accumulate)
  static constexpr float kCanary = -12345.5f;

  Problem(bool ta_, bool tb_, int64_t m_, int64_t n_, int64_t k_, uint64_t seed)
      : ta(ta_), tb(tb_), m(m_), n(n_), k(k_) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    lda = (ta ? m : k) + 3;
    ldb = (tb ? k : n) + 5;
    ldc = n + 7;
    a.resize(size_t((ta ? k : m) * lda));
    b.resize(size_t((tb ? n : k) * ldb));
    c0.assign(size_t(m * ldc), kCanary);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c0[size_t(i * ldc + j)] = u(rng);
  }
  float av(int64_t i, int64_t p) const { return a[size_t(ta ? p * lda + i : i * lda + p)]; }
  float bv(int64_t p, int64_t j) const { return b[size_t(tb ? j * ldb + p : p * ldb + j)]; }

  std::vector<float> run(bool accumulate, int mode) const {
    std::vector<float> c = c0;
    if (mode == 0)
      gemm<float>(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
    else
      gemm_serial<float>(ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
    return c;
  }

  // Checks c against a float64 product within the bound of a float32 dot product of length k.
  void check(const std::vector<float>& c, bool accumulate, const std::string& what) const {
    const double u = std::ldexp(1.0, -24);
    const double gamma = (2.0 * double(k) + 2.0) * u / (1.0 - (2.0 * double(k) + 2.0) * u);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          exact += double(av(i, p)) * double(bv(p, j));
          magnitude += std::abs(double(av(i, p)) * double(bv(p, j)));
        }
        if (accumulate) {
          exact += double(c0[size_t(i * ldc + j)]);
          magnitude += std::abs(double(c0[size_t(i * ldc + j)]));
        }
        const double got = c[size_t(i * ldc + j)];
        ASSERT_LE(std::abs(got - exact), gamma * magnitude + 1e-30)
            << what << " at (" << i << ", " << j << "): got " << got << ", float64 " << exact;
      }
      for (int64_t j = n; j < ldc; ++j)
        ASSERT_EQ(c[size_t(i * ldc + j)], kCanary) << what << ": wrote past row " << i;
    }
  }
};

std::string describe_gemm_problem(const std::string& set, const Problem& p, bool acc) {
  return set + " m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
         " k=" + std::to_string(p.k) + " ta=" + std::to_string(p.ta) +
         " tb=" + std::to_string(p.tb) + " acc=" + std::to_string(acc);
}

TEST(GemmEngineTest, KernelSetsIncludeEigenAndTheDefaultIsTheBest) {
  const std::vector<std::string> sets = kernel_sets();
  ASSERT_FALSE(sets.empty());
  EXPECT_EQ(sets.back(), "eigen");
  GemmSettingsGuard guard;
  set_gemm_kernels("auto");
  EXPECT_EQ(gemm_kernels(), sets.front());
}

// Every edge of the tiling: rows 1..13 (mr is 12 or 6), columns around one and two vectors of
// 8 and 16 lanes, k across a block boundary (256), tall products that pack B, products of few
// rows against a transposed B (gemm_engine.cc computes their transpose) or a large B (packed
// block by block).
TEST(GemmEngineTest, MatchesFloat64WithinTheDotProductBound) {
  GemmSettingsGuard guard;
  const int64_t shapes[][3] = {{1, 1, 1},
                               {5, 7, 3},
                               {12, 32, 256},
                               {13, 33, 257},
                               {6, 16, 9},
                               {7, 17, 100},
                               {11, 31, 513},
                               {24, 64, 40},
                               {64, 10, 256},
                               {200, 48, 70},
                               {37, 100, 1},
                               {300, 45, 300},
                               // few rows, many columns: with tb, computed as C^T
                               {20, 200, 70},
                               {32, 130, 600},
                               // narrow: with ta, computed as C^T (12: two whole AVX2 row
                               // tiles)
                               {300, 10, 50},
                               {300, 12, 40},
                               {130, 16, 700},
                               {200, 7, 30},
                               // few rows against a B too large for the cache (over 4 MiB):
                               // B copied block by block by the first panel's tiles,
                               // a partial last tile; then several column blocks
                               {40, 70, 16000},
                               {30, 300, 4000}};
  uint64_t seed = 1;
  for (const std::string& set : kernel_sets()) {
    set_gemm_kernels(set);
    for (const auto& s : shapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (bool acc : {false, true}) {
            Problem p(ta, tb, s[0], s[1], s[2], seed++);
            // Both entry points: one task (whole-task paths such as B's block copies) and
            // the threads' grid.
            p.check(p.run(acc, 1), acc, describe_gemm_problem(set, p, acc) + " serial");
            p.check(p.run(acc, 0), acc, describe_gemm_problem(set, p, acc));
            if (HasFatalFailure()) return;
          }
  }
}

// Results do not depend on how C is cut into tasks, on the thread count, on the entry point
// or on the microkernels' ISA.
TEST(GemmEngineTest, BitwiseIdenticalAcrossGridsThreadsEntryPointsAndIsas) {
  GemmSettingsGuard guard;
  std::vector<std::string> engines;
  for (const std::string& set : kernel_sets())
    if (set != "eigen") engines.push_back(set);
  if (engines.empty()) GTEST_SKIP() << "this CPU runs only Eigen's GEMM";
  // {150, 30, 700}: one AVX-512 column tile, so a transposed A is read directly there and
  // packed by the AVX2 kernels (two tiles of 16 columns) and by grids that split the columns.
  // {40, 70, 16000}: B (16000 x 70) over 4 MiB, packed block by block; {200, 70, 16000}: the
  // same on one thread, packed whole on two or three. {40, 1024, 256}: more rows than 4
  // AVX2 panels, a transposed B packed by the tasks of the grids that split only the columns.
  const int64_t shapes[][3] = {{515, 641, 384},  {64, 256, 784}, {32, 1024, 256},
                               {9, 70, 600},     {150, 30, 700}, {40, 70, 16000},
                               {200, 70, 16000}, {500, 10, 64},  {40, 1024, 256}};
  for (const auto& s : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Problem p(ta, tb, s[0], s[1], s[2], 100 + uint64_t(s[0]));
        set_gemm_kernels(engines.front());
        set_num_threads(1);
        const std::vector<float> want = p.run(true, 0);
        const std::string what = describe_gemm_problem(engines.front(), p, true);
        p.check(want, true, what);
        for (const std::string& set : engines) {
          set_gemm_kernels(set);
          for (int threads : {1, 2, 3}) {
            set_num_threads(threads);
            EXPECT_TRUE(p.run(true, 0) == want) << what << " vs " << set << ", " << threads;
            EXPECT_TRUE(p.run(true, 1) == want) << what << " vs " << set << " serial";
          }
          // Any grid, straight through the engine.
          const gemm_detail::MicroKernels& mk = *gemm_detail::active_microkernels();
          const gemm_detail::GemmShape shape{p.m, p.n, p.k, ta, tb, 3, false};
          for (gemm_detail::GemmGrid grid :
               {gemm_detail::GemmGrid{1, 1}, gemm_detail::GemmGrid{3, 1},
                gemm_detail::GemmGrid{1, 4}, gemm_detail::GemmGrid{5, 3}}) {
            std::vector<float> c = p.c0;
            const gemm_detail::GemmPlan plan =
                gemm_detail::make_gemm_plan(mk, shape, gemm_detail::gemm_params(mk, shape), grid);
            gemm_detail::run_gemm(mk, plan,
                                  {ta, tb, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb,
                                   c.data(), p.ldc, true});
            EXPECT_TRUE(c == want)
                << what << " vs " << set << " grid " << grid.row_blocks << "x" << grid.col_blocks;
          }
        }
      }
}

// gemm_rows: blocks of whole rows covering [0, m) once, each finished when its callback runs,
// and the same bits as gemm().
TEST(GemmEngineTest, RowBlocksAreCompleteWhenTheirCallbackRuns) {
  GemmSettingsGuard guard;
  set_num_threads(2);
  for (const std::string& set : kernel_sets()) {
    set_gemm_kernels(set);
    // {m, n, k, ta}; the last two computed as C^T
    for (const auto& s :
         {std::array<int64_t, 4>{512, 300, 200, 0}, std::array<int64_t, 4>{7, 5, 3, 0},
          std::array<int64_t, 4>{64, 256, 784, 0}, std::array<int64_t, 4>{30, 300, 100, 0},
          std::array<int64_t, 4>{300, 10, 64, 1}}) {
      const bool ta = s[3] != 0, tb = !ta;
      Problem p(ta, tb, s[0], s[1], s[2], 7);
      std::vector<float> c = p.c0, seen(p.c0.size(), Problem::kCanary);
      std::vector<std::atomic<int>> visits(size_t(p.m));
      gemm_rows<float>(ta, tb, p.m, p.n, p.k, p.a.data(), p.lda, p.b.data(), p.ldb, c.data(), p.ldc,
                       [&](int64_t r0, int64_t r1) {
                         for (int64_t i = r0; i < r1; ++i) {
                           visits[size_t(i)]++;
                           std::memcpy(&seen[size_t(i * p.ldc)], &c[size_t(i * p.ldc)],
                                       size_t(p.ldc) * sizeof(float));
                         }
                       });
      const std::string what = describe_gemm_problem(set, p, false);
      for (int64_t i = 0; i < p.m; ++i) {
        ASSERT_EQ(visits[size_t(i)].load(), 1) << what << " row " << i;
      }
      p.check(seen, false, what + " (rows as the callback saw them)");
      if (set != "eigen") {
        EXPECT_TRUE(c == p.run(false, 0)) << what;
      }
    }
  }
}

// Row blocks (an epilogue's) come in a multiple of the thread count where the rows allow it,
// even with fewer rows per block than a panel holds: 32 rows on 2 threads were 3 blocks, one
// thread computing two of them.
TEST(GemmEngineTest, RowBlocksSplitEvenlyOverTheThreads) {
  GemmSettingsGuard guard;
  set_num_threads(2);
  for (const std::string& set : kernel_sets()) {
    if (set == "eigen") continue;  // Eigen's split is fixed by the shape and the machine
    set_gemm_kernels(set);
    for (int64_t m : {32, 56, 100}) {
      const int64_t blocks = gemm_row_blocks<float>(m, 256, 1024);
      EXPECT_GE(blocks, 2) << set << " m=" << m;
      EXPECT_EQ(blocks % 2, 0) << set << " m=" << m << ": " << blocks << " row blocks";
    }
  }
}

// A GEMM called inside tasks of another (nested use of the per-thread packing buffers).
TEST(GemmEngineTest, NestedInsideParallelTasks) {
  GemmSettingsGuard guard;
  set_num_threads(2);
  Problem p(true, true, 300, 200, 300, 9);
  const std::vector<float> want = p.run(false, 0);
  std::vector<std::vector<float>> got(6);
  parallel_tasks(6, [&](int64_t t) { got[size_t(t)] = p.run(false, 0); });
  for (const auto& g : got) EXPECT_TRUE(g == want);
}

// The packing transpose at every size around its 8 x 8 blocks.
TEST(GemmEngineTest, PackingTransposeIsExact) {
  if (kernel_sets().front() == "eigen") GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t rows : {1, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 32, 33})
    for (int64_t cols : {1, 5, 8, 15, 16, 256, 257}) {
      const int64_t src_ld = cols + 3, dst_ld = rows + 2;
      std::vector<float> src(size_t(rows * src_ld)), dst(size_t(cols * dst_ld), -7.0f);
      for (float& x : src) x = u(rng);
      gemm_detail::transpose_avx2(src.data(), src_ld, rows, cols, dst.data(), dst_ld);
      for (int64_t q = 0; q < cols; ++q) {
        for (int64_t i = 0; i < rows; ++i) {
          ASSERT_EQ(dst[size_t(q * dst_ld + i)], src[size_t(i * src_ld + q)])
              << rows << " x " << cols << " at " << i << ", " << q;
        }
        for (int64_t i = rows; i < dst_ld; ++i) {
          ASSERT_EQ(dst[size_t(q * dst_ld + i)], -7.0f) << "wrote past row " << q;
        }
      }
    }
}

TEST(GemmEngineTest, BadKernelNamesThrow) {
  GemmSettingsGuard guard;
  try {
    set_gemm_kernels("sse9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("avx2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::runtime
