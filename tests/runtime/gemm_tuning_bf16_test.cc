// The bf16 pair kernel sets (VDPBF16PS, AMX, and their emulations) are tuned like the float32
// ones, on products of bf16 operands, into tables of their own: the products they do not run
// (a side under half of their tile) are left to the float32 kernels' table, the table names the
// set and is read back for its classes, and every candidate blocking the tuner may choose (tile
// shape, k blocks in pairs, column blocks, prefetch, plan thresholds, grids) gives the same bits
// as the derived one. Fixed seeds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuner.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/tuning_cache_dir_guard.h"

namespace kiln::runtime::gemm_detail {
namespace {

// The pair kernel sets this CPU runs: the emulations on AVX-512F (VDPBF16PS layout) and AVX2
// (AMX layout), the real sets where the CPU has AVX512-BF16 or AMX-BF16 (and Linux grants it).
std::vector<const MicroKernels*> pair_sets() {
  std::vector<const MicroKernels*> out;
  const std::string in_use = gemm_bf16_kernels();
  for (const char* name : {"avx512bf16-emulated", "amx-emulated", "avx512bf16", "amx"}) {
    try {
      set_gemm_bf16_kernels(name);
      out.push_back(active_bf16_microkernels());
    } catch (const Error&) {  // this CPU cannot run them
    }
  }
  set_gemm_bf16_kernels(in_use);
  return out;
}

// A product of bf16 operands (padded leading dimensions) run under a blocking and a grid.
struct PairProduct {
  GemmShape shape;
  std::vector<uint16_t> a, b;
  int64_t lda, ldb, ldc;
  PairProduct(int64_t m, int64_t n, int64_t k, bool ta, bool tb, uint64_t seed)
      : shape{m, n, k, ta, tb, 3, false} {
    shape.a_bf16 = shape.b_bf16 = true;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    lda = (ta ? m : k) + 1;
    ldb = (tb ? k : n) + 3;
    ldc = n + 2;
    a.resize(size_t((ta ? k : m) * lda));
    b.resize(size_t((tb ? n : k) * ldb));
    for (uint16_t& x : a) x = uint16_t(std::bit_cast<uint32_t>(u(rng)) >> 16);
    for (uint16_t& x : b) x = uint16_t(std::bit_cast<uint32_t>(u(rng)) >> 16);
  }
  // Under `grid` ({0, 0}: the grid `p` plans for 3 threads).
  std::vector<float> run(const MicroKernels& mk, const GemmParams& p, GemmGrid grid) const {
    std::vector<float> c(size_t(shape.m * ldc), -5.0f);
    const GemmPlan plan =
        grid.row_blocks > 0 ? make_gemm_plan(mk, shape, p, grid) : make_gemm_plan(mk, shape, p);
    SgemmArgs g{shape.ta, shape.tb, shape.m, shape.n,  shape.k, nullptr,
                lda,      nullptr,  ldb,     c.data(), ldc,     false};
    g.a16 = a.data();
    g.b16 = b.data();
    run_gemm(mk, plan, g);
    return c;
  }
};

TEST(GemmTuningBf16Test, PairSetsAreTunedOnBf16ProductsIntoTablesOfTheirOwn) {
  const std::vector<const MicroKernels*> sets = pair_sets();
  if (sets.empty()) GTEST_SKIP() << "this CPU runs no bf16 pair kernels (they need AVX2)";
  TuningCacheDirGuard guard("bf16", sets);
  // Two classes, and a product with 4 columns: under half of every pair set's tile.
  const GemmShape wide{48, 70, 64, false, false}, transposed{40, 30, 48, true, false},
      thin{300, 4, 64, false, false};
  for (const MicroKernels* mk : sets) {
    SCOPED_TRACE(mk->isa);
    ASSERT_TRUE(pair_tiles_fill(*mk, wide.m, wide.n, wide.k));
    ASSERT_FALSE(pair_tiles_fill(*mk, thin.m, thin.n, thin.k));
    TuneOptions o;
    o.shapes = {wide, transposed, thin};
    o.slice_seconds = 0.0005;
    o.rounds = 1;
    o.threads = 1;
    const TuneResult r = tune_gemm(*mk, o);
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_EQ(r.skipped[0].n, thin.n);
    ASSERT_EQ(r.classes.size(), 2u);
    EXPECT_GT(r.core_gflops, 0);
    EXPECT_EQ(r.table.isa, mk->isa);
    for (const TunedClassReport& c : r.classes)
      for (const GemmShape& s : c.shapes) EXPECT_TRUE(s.a_bf16 && s.b_bf16) << c.name;
    const std::string path = tuned_table_path(mk->isa);
    save_tuned_table(r.table, path);
    EXPECT_NE(reload_gemm_tuning(*mk).find("tuned table " + path + " (2 classes)"),
              std::string::npos);
    for (const GemmShape& s : {wide, transposed})
      EXPECT_EQ(std::string(gemm_params(*mk, s).source), "tuned " + gemm_class(s));
    // The float32 sets' tables are not written by a pair set's tuning.
    for (const char* isa : {"avx512", "avx2"})
      EXPECT_FALSE(std::filesystem::exists(tuned_table_path(isa))) << isa;
    // Whatever was chosen gives the derived blocking's bits.
    const PairProduct pr(wide.m, wide.n, wide.k, false, false, 11);
    EXPECT_EQ(pr.run(*mk, gemm_params(*mk, wide), GemmGrid{1, 1}),
              pr.run(*mk, derived_gemm_params(*mk, 0), GemmGrid{2, 1}));
  }
}

// Every blocking the tuner's stages may choose on a pair set computes the same bits: each
// element is one chain over k in pair order whatever the plan (k blocks are whole pairs, on AMX
// whole tiles of 16 pairs).
TEST(GemmTuningBf16Test, EveryCandidateBlockingOfAPairSetGivesTheSameBits) {
  const std::vector<const MicroKernels*> sets = pair_sets();
  if (sets.empty()) GTEST_SKIP() << "this CPU runs no bf16 pair kernels (they need AVX2)";
  const int saved = num_threads();
  set_num_threads(3);
  // Deep k (several k blocks), odd k (a half pair), a stored A^T and B^T, edge tiles.
  const std::vector<PairProduct> products = {
      PairProduct(37, 70, 301, false, false, 1), PairProduct(29, 131, 201, true, false, 2),
      PairProduct(40, 50, 90, false, true, 3), PairProduct(64, 40, 1200, true, true, 4)};
  for (const MicroKernels* mk : sets)
    for (const PairProduct& pr : products) {
      const std::vector<float> want = pr.run(*mk, derived_gemm_params(*mk, 0), GemmGrid{1, 1});
      for (int32_t kernel = 0; kernel < mk->shape_count; ++kernel) {
        const GemmParams base = derived_gemm_params(*mk, kernel);
        std::vector<GemmParams> candidates = threshold_candidates(base);
        for (int64_t kc : {int64_t(16), int64_t(48), base.kc, int64_t(1000)})
          for (int32_t ahead : {0, 32}) {
            GemmParams p = base;
            p.kc = kc;
            p.nc = 2 * mk->shapes[kernel].nr;
            p.b_ahead = ahead;
            candidates.push_back(p);
          }
        for (const GemmParams& p : candidates)
          for (GemmGrid grid : {GemmGrid{1, 1}, GemmGrid{3, 2}, GemmGrid{0, 0}}) {
            EXPECT_TRUE(pr.run(*mk, p, grid) == want) << fmt::format(
                "{} {} {}x{}x{} ta={} tb={} kc {} nc {} ahead {} pack_b_min_rows {} "
                "direct_a_max_cols {} min_task_panels {} grid {}x{}",
                mk->isa, mk->shapes[kernel].name, pr.shape.m, pr.shape.k, pr.shape.n, pr.shape.ta,
                pr.shape.tb, p.kc, p.nc, p.b_ahead, p.pack_b_min_rows, p.direct_a_max_cols,
                p.min_task_panels, grid.row_blocks, grid.col_blocks);
            if (HasFailure()) {
              set_num_threads(saved);
              return;
            }
          }
      }
    }
  set_num_threads(saved);
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
