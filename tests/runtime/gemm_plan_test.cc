// GEMM plans (runtime/gemm_plan.h) per shape, on a fixed machine: a kernel table with the
// AVX-512 tile shapes (no kernel runs here, so the test holds on any CPU) and fixed caches. Each
// expectation follows from the rules in gemm_plan.cc, worked out by hand in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/gemm_plan.h"

namespace kiln::runtime::gemm_detail {
namespace {

// The AVX-512 shapes' sizes; no kernel is ever called.
const MicroKernels& fake_kernels() {
  static const MicroKernels mk{"avx512",
                               16,
                               {{"12x32", 12, 32, nullptr, nullptr},
                                {"14x32", 14, 32, nullptr, nullptr},
                                {"8x48", 8, 48, nullptr, nullptr},
                                {"6x64", 6, 64, nullptr, nullptr}},
                               4,
                               nullptr,
                               0,
                               nullptr,
                               nullptr};
  return mk;
}

// 32 KiB 8-way L1d, 1 MiB L2 (Zen 4, Cascade Lake), 100 GFLOP/s per core.
CpuInfo fixed_cpu() {
  CpuInfo cpu;
  cpu.l1d = {32 << 10, 8, 1};
  cpu.l2 = {1 << 20, 16, 1};
  cpu.l3 = {32 << 20, 16, 8};
  return cpu;
}

GemmParams params(int32_t kernel = 0) {
  return derive_gemm_params(fake_kernels(), kernel, fixed_cpu(), 100.0);
}

GemmPlan plan(int64_t m, int64_t k, int64_t n, bool ta, bool tb, int threads, bool epilogue = false,
              int32_t kernel = 0) {
  return make_gemm_plan(fake_kernels(), GemmShape{m, n, k, ta, tb, threads, epilogue},
                        params(kernel));
}

TEST(GemmPlanTest, BlockingIsDerivedFromTheCaches) {
  const GemmParams p = params(0);
  // A panel of 12 rows in half of L1: 32768 / 2 / 48 = 341 -> 336 (a multiple of 16).
  EXPECT_EQ(p.kc, 336);
  // B block in half of L2: 524288 / (4 * 336) = 390 -> 384 (a multiple of 32).
  EXPECT_EQ(p.nc, 384);
  EXPECT_EQ(p.b_ahead, 8);    // 1 KiB ahead: 1024 / 128 bytes per row
  EXPECT_EQ(p.mr_direct, 8);  // L1's ways
  EXPECT_EQ(p.large_b_bytes, 4 << 20);
  EXPECT_EQ(p.epilogue_block_bytes, 256 << 10);
  EXPECT_DOUBLE_EQ(p.min_task_flops, 100e9 * 4e-6);
  // The plan thresholds: B packed from 16 panels of 12 rows; A read directly by tasks of at
  // most 4 tiles of 32 (8 rows of 336 floats take 10.5 KiB, under half of L1); tasks of 4
  // panels (a quarter of L2 holds 262144 / (4 * 12 * 336) = 16 panels of A).
  EXPECT_EQ(p.pack_b_min_rows, 192);
  EXPECT_EQ(p.direct_a_max_cols, 128);
  EXPECT_EQ(p.min_task_panels, 4);
  // 8 x 48: 32768 / 2 / 32 = 512; nc = 524288 / 2048 = 256 -> 240 (multiple of 48).
  const GemmParams q = params(2);
  EXPECT_EQ(q.kc, 512);
  EXPECT_EQ(q.nc, 240);
  EXPECT_EQ(q.b_ahead, 5);              // 1024 / 192
  EXPECT_EQ(q.pack_b_min_rows, 128);    // 16 panels of 8 rows
  EXPECT_EQ(q.direct_a_max_cols, 192);  // 4 tiles of 48; 8 rows of 512 floats: half of L1
  // A small L2 (256 KiB) with a 6 x 16 tile: kc 32768 / 2 / 24 = 682 -> 672 would leave a B
  // block of 131072 / (4 * 672) = 48 columns, under 4 tiles; kc is cut so that 4 tiles fit:
  // 131072 / (4 * 4 * 16) = 512, and the block is 131072 / (4 * 512) = 64 columns.
  CpuInfo small = fixed_cpu();
  small.l2 = {256 << 10, 8, 1};
  const MicroKernels avx2{"avx2",  8,      {{"6x16", 6, 16, nullptr, nullptr}}, 1, nullptr, 0,
                          nullptr, nullptr};
  const GemmParams r = derive_gemm_params(avx2, 0, small, 50.0);
  EXPECT_EQ(r.kc, 512);
  EXPECT_EQ(r.nc, 64);
  EXPECT_EQ(r.pack_b_min_rows, 96);
  EXPECT_EQ(r.direct_a_max_cols, 64);
  // A quarter of the 256 KiB L2 holds 65536 / (4 * 6 * 512) = 5 panels: still 4.
  EXPECT_EQ(r.min_task_panels, 4);
}

// The plan thresholds are positive and follow the caches: a larger L2 never lowers them; the
// task's panels are bounded by what a quarter of L2 holds of A.
TEST(GemmPlanTest, PlanThresholdsFollowTheCaches) {
  const MicroKernels& mk = fake_kernels();
  for (int32_t kernel = 0; kernel < mk.shape_count; ++kernel) {
    const GemmParams base = derive_gemm_params(mk, kernel, fixed_cpu(), 100.0);
    EXPECT_GT(base.pack_b_min_rows, 0);
    EXPECT_GT(base.direct_a_max_cols, 0);
    EXPECT_GT(base.min_task_panels, 0);
    for (int64_t l2 : {int64_t(2) << 20, int64_t(4) << 20}) {
      CpuInfo big = fixed_cpu();
      big.l2.bytes = l2;
      const GemmParams p = derive_gemm_params(mk, kernel, big, 100.0);
      EXPECT_GE(p.pack_b_min_rows, base.pack_b_min_rows) << mk.shapes[kernel].name;
      EXPECT_GE(p.direct_a_max_cols, base.direct_a_max_cols) << mk.shapes[kernel].name;
      EXPECT_GE(p.min_task_panels, base.min_task_panels) << mk.shapes[kernel].name;
    }
  }
  // A 16 x 16 tile with a 64 KiB L1d and a 256 KiB L2: kc 65536 / 2 / 64 = 512, a B block of
  // 131072 / 2048 = 64 columns (4 tiles); a quarter of L2 holds 65536 / (4 * 16 * 512) = 2
  // panels of A. With twice the L2, 4.
  const MicroKernels tall{"avx2",  8,      {{"16x16", 16, 16, nullptr, nullptr}}, 1, nullptr, 0,
                          nullptr, nullptr};
  CpuInfo cpu = fixed_cpu();
  cpu.l1d = {64 << 10, 8, 1};
  cpu.l2 = {256 << 10, 8, 1};
  const GemmParams small = derive_gemm_params(tall, 0, cpu, 100.0);
  EXPECT_EQ(small.kc, 512);
  EXPECT_EQ(small.nc, 64);
  EXPECT_EQ(small.min_task_panels, 2);
  EXPECT_EQ(small.pack_b_min_rows, 256);
  EXPECT_EQ(small.direct_a_max_cols, 64);  // 8 rows of 512 floats: 16 KiB, a quarter of L1
  cpu.l2.bytes *= 2;
  EXPECT_EQ(derive_gemm_params(tall, 0, cpu, 100.0).min_task_panels, 4);
}

TEST(GemmPlanTest, LargeSquareProductPacksBothOperands) {
  const GemmPlan p = plan(1024, 1024, 1024, false, false, 1);
  EXPECT_EQ(p.back, BackTranspose::kNone);
  EXPECT_EQ(p.tasks(), 1);
  EXPECT_EQ(p.b, BMode::kPacked);  // 1024 rows >= 192 reuse each panel
  // k = 1024 in blocks of at most 336: 4 blocks of 256; the B block keeps its bytes:
  // 384 * 336 / 256 = 504 -> 480 columns, so 1024 columns are several blocks: A packed whole.
  EXPECT_EQ(p.kc, 256);
  EXPECT_EQ(p.k_blocks, 4);
  EXPECT_EQ(p.nc, 480);
  EXPECT_EQ(p.a, AMode::kPackedAll);
  EXPECT_EQ(p.panel_rows, 12);
  const std::string text = p.describe();
  EXPECT_NE(text.find("1024x1024x1024 nn, 1 thread: avx512 12x32"), std::string::npos) << text;
  EXPECT_NE(text.find("A packed, B packed, kc 256 x 4 blocks, nc 480"), std::string::npos) << text;
  EXPECT_NE(text.find("(derived)"), std::string::npos) << text;
}

TEST(GemmPlanTest, GridsFollowTheThreadsAndTheEpilogue) {
  // 2 threads: at most 8 tasks; 86 panels of rows: 8 row blocks.
  EXPECT_EQ(plan(1024, 1024, 1024, false, false, 2).row_blocks, 8);
  // An epilogue's row blocks hold at most 256 KiB of C: 1024 x 1024 floats = 16 blocks.
  const GemmPlan e = plan(1024, 1024, 1024, false, false, 2, true);
  EXPECT_EQ(e.row_blocks, 16);
  EXPECT_EQ(e.col_blocks, 1);
  // 32 rows with an epilogue on 2 threads: 3 panels of rows, fewer than 4 per thread, and no
  // column split (whole rows): one block per thread, as each block reads all of B.
  EXPECT_EQ(plan(32, 1024, 256, false, false, 2, true).row_blocks, 2);
  // The same with tasks of 8 panels (a tuned table): 64 x 2048 x 1024 ta, 6 panels of rows,
  // and an epilogue: 2 blocks of 32 rows, not 6 of one panel each reading the 8 MB B.
  GemmParams fat = params();
  fat.min_task_panels = 8;
  const GemmPlan w =
      make_gemm_plan(fake_kernels(), GemmShape{64, 1024, 2048, true, false, 2, true}, fat);
  EXPECT_EQ(w.row_blocks, 2) << w.describe();
  EXPECT_EQ(w.col_blocks, 1) << w.describe();
  // 16 threads: one block per panel, as many as there are.
  EXPECT_EQ(plan(32, 1024, 256, false, false, 16, true).row_blocks, 3);
  // A small product is one task.
  EXPECT_EQ(plan(16, 16, 16, false, false, 2).tasks(), 1);
}

// Where every row block gets at least 4 panels, every block but the last holds whole panels,
// the blocks cover the rows in order, and their panel counts differ by at most one: only the
// last block runs a short tile. Thinner blocks keep equal heights.
TEST(GemmPlanTest, RowBlocksHoldWholePanels) {
  // 1024 rows of 12-row panels (85 whole and one of 4 rows) in 8 blocks: 10 or 11 panels each
  // (120 or 132 rows), 124 rows in the last; blocks of 128 rows would run 11 tiles each, one
  // of them 8 rows high (88 tiles instead of 86).
  const GemmPlan p = plan(1024, 1024, 1024, false, false, 2);
  ASSERT_EQ(p.row_blocks, 8);
  ASSERT_EQ(p.panel_rows, 12);
  EXPECT_EQ(p.row_start(0), 0);
  EXPECT_EQ(p.row_start(1), 120);
  EXPECT_EQ(p.row_start(2), 252);
  EXPECT_EQ(p.row_start(8), 1024);
  // 32 rows with an epilogue on 2 threads: 2 blocks of 16 rows (3 panels of 12 would leave
  // one thread two 12-row tiles and the other one of 8).
  const GemmPlan thin = plan(32, 1024, 256, false, false, 2, true);
  ASSERT_EQ(thin.row_blocks, 2);
  for (int64_t rb = 0; rb <= 2; ++rb) EXPECT_EQ(thin.row_start(rb), 16 * rb);
  for (const GemmShape& s :
       {GemmShape{1024, 1024, 1024, false, false, 2},
        GemmShape{1000, 512, 128, false, false, 2, true},
        GemmShape{4096, 128, 384, false, false, 16}, GemmShape{2048, 256, 1024, false, false, 8}}) {
    const GemmPlan q = make_gemm_plan(fake_kernels(), s, params());
    const std::string what = q.describe();
    ASSERT_GE(q.m, 4 * q.panel_rows * q.row_blocks) << what;
    int64_t fewest = q.m, most = 0;
    for (int64_t rb = 0; rb < q.row_blocks; ++rb) {
      const int64_t r0 = q.row_start(rb), r1 = q.row_start(rb + 1);
      ASSERT_LE(r0, r1) << what;
      if (rb + 1 < q.row_blocks) {
        EXPECT_EQ((r1 - r0) % q.panel_rows, 0) << what << " block " << rb;
      }
      const int64_t panels = (r1 - r0 + q.panel_rows - 1) / q.panel_rows;
      fewest = std::min(fewest, panels);
      most = std::max(most, panels);
    }
    EXPECT_EQ(q.row_start(0), 0) << what;
    EXPECT_EQ(q.row_start(q.row_blocks), q.m) << what;
    EXPECT_LE(most - fewest, 1) << what;
  }
}

TEST(GemmPlanTest, ManyThreadsGetTasksOfSeveralPanelsAndSplitTheColumns) {
  // 512 rows of 12 = 43 panels on 8 threads (at most 32 tasks): rather than 32 row blocks of
  // one or two panels, each streaming all of B, 8 row blocks (a multiple of the threads) of at
  // least 4 panels, and the columns split to occupy the threads.
  const GemmPlan p = plan(512, 1024, 1024, false, false, 8);
  EXPECT_EQ(p.row_blocks, 8);
  EXPECT_EQ(p.col_blocks, 4);
  EXPECT_GE(p.m / p.row_blocks, 4 * 12);
  EXPECT_GT(p.col_blocks, 1);
  EXPECT_EQ(p.tasks() % 8, 0);
  // With min_task_panels 1 the rows are cut as thin as the task count allows.
  GemmParams thin = params();
  thin.min_task_panels = 1;
  const GemmPlan t =
      make_gemm_plan(fake_kernels(), GemmShape{512, 1024, 1024, false, false, 8}, thin);
  EXPECT_EQ(t.row_blocks, 32);
  EXPECT_EQ(t.col_blocks, 1);
  // Rows too few to give every thread 4 panels (64 rows: 6 panels on 2 threads), against more
  // columns: the columns are split instead, one block per thread, so that each task reads its
  // own half of B; with min_task_panels 1 the 6 panels are enough for row blocks again.
  const GemmPlan few = plan(64, 1024, 1024, false, false, 2);
  EXPECT_EQ(few.row_blocks, 1);
  EXPECT_EQ(few.col_blocks, 2);
  EXPECT_EQ(
      make_gemm_plan(fake_kernels(), GemmShape{64, 1024, 1024, false, false, 2}, thin).col_blocks,
      1);
  // On 16 threads a thin product of 4.2 Mflop has work for 10 tasks of at least 400 kflop
  // (core_gflops 100: 4 us each): 10 column blocks, not one per thread.
  const GemmPlan small = plan(32, 64, 1024, false, false, 16);
  EXPECT_EQ(small.row_blocks, 1);
  EXPECT_EQ(small.col_blocks, 10);
  // Fewer columns than rows, or an epilogue (whole rows), keep the row blocks.
  EXPECT_EQ(plan(64, 1024, 32, false, false, 2).col_blocks, 1);
  EXPECT_EQ(plan(64, 1024, 1024, false, false, 2, true).col_blocks, 1);
}

TEST(GemmPlanTest, ABf16OperandSplitsTheColumnsOnlyToOccupyTheThreads) {
  // 128 x 1024 x 128 ta on 2 threads: 11 panels, tasks of at least 4 panels, so 2 row blocks.
  // A float32 A (read directly by 128-column tasks) splits the columns too, to up to two tasks
  // a thread: 2 x 4.
  const GemmPlan f32 = plan(128, 1024, 128, true, false, 2);
  EXPECT_EQ(f32.row_blocks, 2);
  EXPECT_EQ(f32.col_blocks, 4);
  // A bf16 A is packed by every task, again in each column block: the 2 row blocks already
  // occupy the 2 threads, so no column split.
  const GemmPlan bf16 = make_gemm_plan(
      fake_kernels(), GemmShape{128, 128, 1024, true, false, 2, false, true, true}, params());
  EXPECT_EQ(bf16.row_blocks, 2);
  EXPECT_EQ(bf16.col_blocks, 1) << bf16.describe();
  // Fewer row blocks than threads: the columns split to one task a thread. 96 x 4096 x 96 ta on
  // 16 threads: 8 panels, 8 row blocks (as many as the panels); a bf16 A gets 2 column blocks
  // (16 tasks), a float32 one all 3 column panels (up to two tasks a thread: 24 tasks).
  const GemmPlan wide = make_gemm_plan(
      fake_kernels(), GemmShape{96, 96, 4096, true, false, 16, false, true, true}, params());
  EXPECT_EQ(wide.row_blocks, 8);
  EXPECT_EQ(wide.col_blocks, 2) << wide.describe();
  const GemmPlan wide_f32 = plan(96, 4096, 96, true, false, 16);
  EXPECT_EQ(wide_f32.row_blocks, 8);
  EXPECT_EQ(wide_f32.col_blocks, 3) << wide_f32.describe();
}

TEST(GemmPlanTest, NarrowTasksReadADirectly) {
  // 1024 x 512 x 128: one column block of 128 columns: A's rows read directly, 8 rows per tile.
  const GemmPlan p = plan(1024, 512, 128, false, false, 1);
  EXPECT_EQ(p.a, AMode::kRowsDirect);
  EXPECT_EQ(p.panel_rows, 8);
  // The same with A stored transposed: its rows read directly, whole panels.
  const GemmPlan t = plan(1024, 512, 128, true, false, 1);
  EXPECT_EQ(t.a, AMode::kColumnsDirect);
  EXPECT_EQ(t.panel_rows, 12);
  // 64 x 784 x 256: few rows, B read directly, each A panel packed before its tiles.
  const GemmPlan f = plan(64, 784, 256, false, false, 1);
  EXPECT_EQ(f.b, BMode::kDirect);
  EXPECT_EQ(f.a, AMode::kPackedPerPanel);
}

TEST(GemmPlanTest, FewRowsAgainstATransposedBRunAsTheTranspose) {
  // 32 x 1024 x 256 tb (an RNN step's input gradient): C^T = 256 x 1024 x 32 with A' = B's
  // stored rows (read directly) and B' = A (k x m stored, so transposed: packed; by its one
  // task a k block at a time, 256 x 32 floats each), C^T's rows back per task.
  const GemmPlan p = plan(32, 1024, 256, false, true, 1);
  EXPECT_EQ(p.back, BackTranspose::kPerTask);
  EXPECT_EQ(p.m, 256);
  EXPECT_EQ(p.n, 32);
  EXPECT_FALSE(p.ta);
  EXPECT_TRUE(p.tb);
  EXPECT_EQ(p.a, AMode::kRowsDirect);
  EXPECT_EQ(p.b, BMode::kPackedPerKBlock);
  EXPECT_NE(p.describe().find("as C^T = 256x1024x32 nt (back-transposed per-task)"),
            std::string::npos)
      << p.describe();
  // Inside a loop that holds B (an RNN's recurrent kernel) B is packed once per loop and reused:
  // the product stays as it is (transposed, B would be read per product: a bf16 B widened per
  // product), with or without an epilogue, bf16 operands too.
  for (const bool epilogue : {false, true})
    for (const bool bf16 : {false, true}) {
      const GemmPlan in_loop = make_gemm_plan(
          fake_kernels(), GemmShape{32, 256, 1024, false, true, 2, epilogue, bf16, bf16, true},
          params());
      EXPECT_EQ(in_loop.back, BackTranspose::kNone) << in_loop.describe();
      EXPECT_EQ(in_loop.m, 32);
      EXPECT_EQ(in_loop.b, BMode::kPrepacked) << in_loop.describe();
    }
  // A narrow C = A^T B (10 classes): C^T = 10 x 64 x 6272, transposed back after.
  const GemmPlan q = plan(6272, 64, 10, true, false, 2);
  EXPECT_EQ(q.back, BackTranspose::kAfter);
  EXPECT_EQ(q.m, 10);
  EXPECT_EQ(q.n, 6272);
  EXPECT_EQ(q.back_blocks, 8);  // the 8 tasks of the product's grid on 2 threads
}

// The AVX2 shapes' sizes (6x16, 4x24); no kernel is ever called.
const MicroKernels& fake_avx2_kernels() {
  static const MicroKernels mk{
      "avx2",  8,       {{"6x16", 6, 16, nullptr, nullptr}, {"4x24", 4, 24, nullptr, nullptr}},
      2,       nullptr, 0,
      nullptr, nullptr};
  return mk;
}

TEST(GemmPlanTest, NarrowATransposedBRunsTransposedWhereRowsFillTilesBetter) {
  const auto avx2_plan = [](int64_t n, int32_t kernel) {
    return make_gemm_plan(fake_avx2_kernels(), GemmShape{6272, n, 64, true, false, 2},
                          derive_gemm_params(fake_avx2_kernels(), kernel, fixed_cpu(), 100.0));
  };
  // 6x16 tiles, 10 classes: 10 of 16 columns per column tile, 10 of 12 rows in two row tiles.
  const GemmPlan ten = avx2_plan(10, 0);
  EXPECT_EQ(ten.back, BackTranspose::kAfter);
  EXPECT_EQ(ten.m, 10);
  EXPECT_EQ(ten.n, 6272);
  // 12 columns: two whole row tiles (12 of 12) against 12 of 16 columns.
  EXPECT_EQ(avx2_plan(12, 0).m, 12);
  // 13 columns would need three row tiles (13 of 18): more than two row panels stay as they are.
  EXPECT_EQ(avx2_plan(13, 0).back, BackTranspose::kNone);
  // 16 columns fill a column tile.
  EXPECT_EQ(avx2_plan(16, 0).back, BackTranspose::kNone);
  // 4x24 tiles: 8 columns fill two row tiles of 4 (8 of 8 against 8 of 24); 10 would need three.
  EXPECT_EQ(avx2_plan(8, 1).m, 8);
  EXPECT_EQ(avx2_plan(10, 1).back, BackTranspose::kNone);
  // With 12x32 tiles the same rule transposes up to 24 columns (two row tiles of 12).
  EXPECT_EQ(plan(6272, 64, 24, true, false, 2).m, 24);
  EXPECT_EQ(plan(6272, 64, 25, true, false, 2).back, BackTranspose::kNone);
}

// An AMX-like set (pair tiles of 32 x 32, kTiles): a product of two k-major operands (ta) runs
// transposed where its A side transposes more elements than C has: (m - n) k > m n.
const MicroKernels& fake_tile_kernels() {
  static const MicroKernels mk{"amx",
                               16,
                               {{"32x32", 32, 32, nullptr, nullptr}},
                               1,
                               nullptr,
                               0,
                               nullptr,
                               nullptr,
                               2,
                               PairLayout::kTiles};
  return mk;
}

TEST(GemmPlanTest, TilePairsTransposeTheNarrowerSideOfKMajorOperands) {
  const auto tile_plan = [](int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
    return make_gemm_plan(fake_tile_kernels(), GemmShape{m, n, k, ta, tb, 1, false, true, true},
                          derive_gemm_params(fake_tile_kernels(), 0, fixed_cpu(), 100.0));
  };
  // A convolution's filter gradient: (144 - 32) x 1568 = 175,616 > 144 x 32 = 4,608.
  const GemmPlan filter = tile_plan(144, 1568, 32, true, false);
  EXPECT_EQ(filter.back, BackTranspose::kAfter);
  EXPECT_EQ(filter.m, 32);
  EXPECT_EQ(filter.n, 144);
  EXPECT_EQ(filter.k, 784);  // pairs
  // 784 x 64 x 256: (784 - 256) x 64 = 33,792 < 200,704 elements of C to transpose back.
  EXPECT_EQ(tile_plan(784, 64, 256, true, false).back, BackTranspose::kNone);
  // n >= m, a B^T operand, or A not transposed: as it is.
  EXPECT_EQ(tile_plan(32, 1568, 144, true, false).back, BackTranspose::kNone);
  EXPECT_EQ(tile_plan(144, 1568, 32, true, true).back, BackTranspose::kNone);
  EXPECT_EQ(tile_plan(144, 1568, 32, false, false).back, BackTranspose::kNone);
  // The float32 kernels keep their own rules: the same product is not transposed there.
  EXPECT_EQ(plan(144, 1568, 32, true, false, 1).back, BackTranspose::kNone);
}

TEST(GemmPlanTest, OneTaskPacksBAKBlockAtATimeWhereTheBlockFitsL2) {
  // 1024 x 1024 x 1024 on one thread: kc at most 336, so 4 k blocks of 256; a block of all 32
  // panels is 256 x 1024 floats, 1 MiB, over half of the 1 MiB L2: packed before the tiles.
  EXPECT_EQ(plan(1024, 1024, 1024, false, false, 1).b, BMode::kPacked);
  // 1024 x 1024 x 256: a block of 256 x 256 floats (256 KiB) fits half of L2.
  const GemmPlan narrow = plan(1024, 1024, 256, false, false, 1);
  EXPECT_EQ(narrow.b, BMode::kPackedPerKBlock);
  EXPECT_NE(narrow.describe().find("B packed-per-k-block"), std::string::npos) << narrow.describe();
  // One k block: nothing to interleave. Several tasks share the packed B: packed before them.
  EXPECT_EQ(plan(1024, 256, 256, false, false, 1).b, BMode::kPacked);
  EXPECT_EQ(plan(1024, 1024, 256, false, false, 2).b, BMode::kPacked);
}

TEST(GemmPlanTest, ALargeBUnderFewerRowsIsPackedInBlocksByColumnTasks) {
  // 256 x 2048 x 1024 ta (an LSTM's weight gradient): B, 8 MiB, outgrows the 1 MiB L2 under
  // 256 rows (>= 192: packed). On 2 threads one task per thread splits the columns, each
  // packing its kc x nc blocks right before their tiles; A is packed by both, 256 rows fewer
  // than the 1024 columns.
  const GemmPlan p = plan(256, 2048, 1024, true, false, 2);
  EXPECT_EQ(p.b, BMode::kPackedBlocks) << p.describe();
  EXPECT_EQ(p.row_blocks, 1);
  EXPECT_EQ(p.col_blocks, 2);
  EXPECT_NE(p.describe().find("B packed-in-blocks"), std::string::npos) << p.describe();
  // One task: B, over 4 x L2 under a single row block, is copied in blocks by the tiles
  // (LargeBOfFewRowsIsCopiedInBlocks); within 4 x L2 (a 512-column half), packed in blocks.
  EXPECT_EQ(plan(256, 2048, 1024, true, false, 1).b, BMode::kCopiedBlocks);
  EXPECT_EQ(plan(256, 2048, 512, true, false, 1).b, BMode::kPackedBlocks);
  // Row blocks finished by an epilogue would each pack all of B: packed before them.
  const GemmPlan e = plan(256, 2048, 1024, true, false, 2, true);
  EXPECT_EQ(e.b, BMode::kPacked) << e.describe();
  EXPECT_GT(e.row_blocks, 1);
  // As many rows as columns, a transposed B, or 8 column tasks each packing all of A (7 x 256
  // rows over 1024 columns): packed before the tasks.
  EXPECT_EQ(plan(1024, 512, 1024, true, false, 2).b, BMode::kPacked);
  EXPECT_EQ(plan(256, 2048, 1024, false, true, 2).b, BMode::kPacked);
  EXPECT_NE(plan(256, 2048, 1024, true, false, 8).b, BMode::kPackedBlocks);
  // A B within L2 stays as it was (512 x 256 floats, 512 KiB).
  EXPECT_NE(plan(256, 512, 256, true, false, 2).b, BMode::kPackedBlocks);
  // task_b_blocks off (a tuned choice): packed before the tasks, which split the rows.
  GemmParams before = params(0);
  before.task_b_blocks = false;
  const GemmPlan b =
      make_gemm_plan(fake_kernels(), GemmShape{256, 1024, 2048, true, false, 2}, before);
  EXPECT_EQ(b.b, BMode::kPacked) << b.describe();
  EXPECT_EQ(b.col_blocks, 1) << b.describe();
}

TEST(GemmPlanTest, LargeBOfFewRowsIsCopiedInBlocks) {
  // 64 x 2048 x 1024 ta: B (2048 x 1024, 8 MiB) over 4 x L2, 64 rows < 192: copied block by
  // block by the first panel's tiles, half-width blocks.
  const GemmPlan p = plan(64, 2048, 1024, true, false, 1);
  EXPECT_EQ(p.b, BMode::kCopiedBlocks);
  EXPECT_EQ(p.kc, 293);  // 2048 in 7 blocks of at most 336
  // B block budget 384 * 336 / 293 = 440 columns, halved: 220 -> 192.
  EXPECT_EQ(p.nc, 192);
}

// A 512 KiB 8-way L2 (1024 sets of 64-byte lines; Zen 3), with fixed_cpu's L1.
GemmParams small_l2_params() {
  CpuInfo cpu = fixed_cpu();
  cpu.l2 = {512 << 10, 8, 1};
  return derive_gemm_params(fake_kernels(), 0, cpu, 100.0);
}

TEST(GemmPlanTest, DirectBRowsMustSpreadOverTheL2Sets) {
  const GemmParams p = small_l2_params();
  EXPECT_EQ(p.l2_sets, 1024);
  EXPECT_EQ(p.l2_ways, 8);
  // Rows of 1024 floats are 64 lines apart: 256 rows start in 1024 / 64 = 16 sets, and a row
  // of 240 columns (16 lines with a misaligned start) never reaches the next start: 256 / 16 =
  // 16 lines per set, over 8 ways.
  EXPECT_FALSE(b_rows_fit_l2(p, 1024, 256, 240));
  EXPECT_TRUE(b_rows_fit_l2(p, 1024, 128, 240));  // 8 per set
  // 512 floats: 32 starts, 8 lines per set.
  EXPECT_TRUE(b_rows_fit_l2(p, 512, 256, 240));
  // 1040 floats (65 lines): consecutive rows' starts walk through every set.
  EXPECT_TRUE(b_rows_fit_l2(p, 1040, 256, 240));
  // Rows a fraction of a line apart spread too; an unknown geometry never asks for packing.
  EXPECT_TRUE(b_rows_fit_l2(p, 1028, 256, 240));
  GemmParams unknown = p;
  unknown.l2_sets = 0;
  EXPECT_TRUE(b_rows_fit_l2(unknown, 1024, 1024, 240));
  // A 2 MiB 16-way L2 (2048 sets) holds the 4 KiB rows: 32 starts, 8 lines per set.
  CpuInfo big = fixed_cpu();
  big.l2 = {2 << 20, 16, 1};
  EXPECT_TRUE(b_rows_fit_l2(derive_gemm_params(fake_kernels(), 0, big, 100.0), 1024, 256, 240));
}

TEST(GemmPlanTest, OneTaskPacksABWhoseRowsCrowdL2) {
  const GemmParams p = small_l2_params();
  const auto small_plan = [&](int64_t n, int threads, bool epilogue) {
    return make_gemm_plan(fake_kernels(), GemmShape{32, n, 256, false, false, threads, epilogue},
                          p);
  };
  // An RNN step's recurrent product h U, 32 x 256 x 1024 (U's rows 4 KiB apart), at one
  // thread: one task packs B, then reads it from L2; with an epilogue too (one row block).
  EXPECT_EQ(small_plan(1024, 1, false).b, BMode::kPacked);
  EXPECT_EQ(small_plan(1024, 1, true).b, BMode::kPacked);
  // Two threads split the columns (32 rows are too few for row blocks of 4 panels each): each
  // task packs its own columns of B.
  const GemmPlan two = small_plan(1024, 2, false);
  EXPECT_EQ(two.row_blocks, 1);
  EXPECT_EQ(two.col_blocks, 2);
  EXPECT_EQ(two.b, BMode::kPackedPerTask);
  // Row blocks (an epilogue's) would each read all of B: they read it where it lies, without a
  // packing phase of its own.
  const GemmPlan rows = small_plan(1024, 2, true);
  EXPECT_GT(rows.row_blocks, 1);
  EXPECT_EQ(rows.b, BMode::kDirect);
  // Rows 2 KiB apart fit: direct.
  EXPECT_EQ(small_plan(512, 1, false).b, BMode::kDirect);
  // The fixed 1 MiB 16-way L2 holds the 4 KiB rows as well.
  EXPECT_EQ(plan(32, 256, 1024, false, false, 1).b, BMode::kDirect);
  // A large B of several row panels is still copied in blocks (its first panel reads it once).
  EXPECT_EQ(make_gemm_plan(fake_kernels(), GemmShape{64, 1024, 2048, false, false, 1}, p).b,
            BMode::kCopiedBlocks);
}

TEST(GemmPlanTest, TheTileShapeComesFromTheParams) {
  const GemmPlan p = plan(1024, 512, 128, false, false, 1, false, 2);
  EXPECT_STREQ(p.kernel->name, "8x48");
  EXPECT_EQ(p.panel_rows, 8);
  EXPECT_EQ(p.kc, 512);
  EXPECT_EQ(p.b_ahead, 5);
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
