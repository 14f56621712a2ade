// How one float32 product runs on kiln's GEMM engine, decided by one function and printable.
//
// A GemmPlan records every decision the engine follows (runtime/gemm_engine.cc only executes
// it): the microkernel tile shape, whether the product runs as its transpose, the task grid,
// how A and B are read (packed, directly, copied into L2 blocks), the k and column blocking and
// the prefetch distance. make_gemm_plan() derives it from the product's shape and a GemmParams:
// the machine's blocking (cache sizes and FMA throughput: derive_gemm_params), or the tuned
// table's entry for the product's class (runtime/gemm_tuning.h). `kiln gemm-plan M K N`,
// KILN_LOG=debug and the profiler's event arguments print plans with describe().
//
// No plan changes a result: every element of C is one FMA chain over k in k order whatever the
// plan (runtime/gemm_microkernel.h), so plans differ in speed only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime {
struct CpuInfo;
}

namespace kiln::runtime::gemm_detail {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// k blocks of near-equal depth, at most `max_depth` each (rounded up to a multiple of
// `quantum`, as are the blocks' depths when k is one: AMX tiles): block q is
// [q * step, min(k, (q+1) * step)).
struct KBlocks {
  int64_t count, step;
  KBlocks(int64_t k, int64_t max_depth, int64_t quantum = 1)
      : count(0),
        step(ceil_div(ceil_div(k, ceil_div(k, std::max(max_depth, quantum))), quantum) * quantum) {
    count = ceil_div(k, step);
  }
  int64_t begin(int64_t q) const { return q * step; }
  int64_t depth(int64_t q, int64_t k) const { return std::min(k, (q + 1) * step) - q * step; }
};

// Rows [r0, r0 + rows) cut into the fewest panels of at most mr rows, of near-equal heights.
struct APanels {
  int64_t r0, count, base, extra;
  APanels(int64_t r0_, int64_t rows, int64_t mr)
      : r0(r0_), count(ceil_div(rows, mr)), base(rows / count), extra(rows % count) {}
  int64_t height(int64_t i) const { return base + (i < extra ? 1 : 0); }
  int64_t start(int64_t i) const { return i * base + std::min(i, extra); }
};

// The product a plan is made for: C[m, n] (+)= op(A) op(B), A stored k x m if ta, B stored
// n x k if tb; `threads` it may use; `epilogue`: whole row blocks, each handed to a callback
// right after its last product (runtime::gemm_rows); `a_bf16`, `b_bf16`: the operand is stored
// as bfloat16, and is never read in place: widened to float32 as it is packed
// (runtime/gemm_widen.h), or into float32 rows (AMode::kRowsWidened, BMode::kWidened);
// `b_invariant`: B is unchanged for the rest of a loop (runtime/loop_invariants.h), so B is
// packed once and the packed copy reused (BMode::kPrepacked) where the float32 kernels run the
// product (a bf16 B widened as it is packed); `a_rounded`, `b_rounded` (with a_bf16, b_bf16):
// the operand is float32, rounded to bf16 as it is packed (a fused cast): the same plan, printed
// "A f32->bf16".
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int threads = 1;
  bool epilogue = false;
  bool a_bf16 = false, b_bf16 = false;
  bool b_invariant = false;
  bool a_rounded = false, b_rounded = false;

  bool operator==(const GemmShape&) const = default;
  // A hash of every field (for the per-thread memos of plans and their descriptions).
  size_t hash() const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint64_t v :
         {uint64_t(m), uint64_t(n), uint64_t(k), uint64_t(threads),
          uint64_t(ta) | uint64_t(tb) << 1 | uint64_t(epilogue) << 2 | uint64_t(a_bf16) << 3 |
              uint64_t(b_bf16) << 4 | uint64_t(b_invariant) << 5 | uint64_t(a_rounded) << 6 |
              uint64_t(b_rounded) << 7})
      h = (h ^ v) * 0x100000001B3ull;
    return size_t(h ^ (h >> 29));
  }
};

// What a plan takes from the machine, all derived from the CPU's caches, the tile shape and the
// FMA throughput (derive_gemm_params). The blocking fields (kernel, kc, nc, b_ahead) and the
// three plan thresholds (pack_b_min_rows, direct_a_max_cols, min_task_panels) are tunable per
// class of products (runtime/gemm_tuning.h); the rest are shared by all classes. The three
// thresholds' initializers are their values derived for a 12 x 32 tile, 32 KiB L1d and 1 MiB
// L2 per core.
struct GemmParams {
  int32_t kernel = 0;   // index into MicroKernels::shapes
  int64_t kc = 256;     // deepest k block: the A panel (mr x kc) stays in L1
  int64_t nc = 256;     // columns of B per block: the B block (kc x nc) stays in L2
  int32_t b_ahead = 8;  // rows of B a tile prefetches into L1 ahead of the one it reads

  int32_t mr_direct = 8;            // most rows of a tile reading A's rows directly (L1 ways)
  int64_t pack_b_min_rows = 192;    // B packed when at least this many rows of C reuse it
  int64_t direct_a_max_cols = 128;  // tasks at most this wide read A directly (0: never)
  int64_t large_b_bytes = 4 << 20;  // B read directly beyond this is copied into L2 blocks
  int64_t l2_bytes = 1 << 20;       // L2 per core
  // L2's geometry (per core: sets of `l2_ways` 64-byte lines; 0: unknown): a B read directly
  // must not pile its block's rows into fewer sets than it needs (b_rows_fit_l2).
  int64_t l2_sets = 0;
  int32_t l2_ways = 0;
  int64_t epilogue_block_bytes = 256 << 10;     // row blocks of an epilogue hold at most this of C
  double parallel_min_flops = double(1 << 20);  // smaller products run as one task
  double min_task_flops = double(1 << 19);      // tasks carry at least this much work
  int64_t min_rounded_rows = 4;  // fewest rows a row block gets to even out the threads
  // Row panels a task holds when the rows are enough for every thread to get this many: each
  // task reads its B blocks from L3 once per k block and reuses them from L2 across its panels
  // (1: as many row blocks as max_tasks allows, however thin).
  int64_t min_task_panels = 4;
  // Kernel sets with a row function (MicroKernels::tile_row): a row panel's whole tiles run in
  // one call, each tile's first products overlapping the previous one's stores of C (on AMX: a
  // few percent either way by product, so a tunable, on by default).
  bool row_calls = true;
  // A packed B that outgrows L2 under fewer rows than columns is packed by the tasks, each
  // kc x nc block of their own columns right before its tiles (BMode::kPackedBlocks, where
  // gemm_plan.cc's traffic rule allows); false: packed as the other rules say (before the
  // tasks, BMode::kPacked, or each task its own panels). Which is faster depends on whether the
  // machine's last-level cache keeps a packed B between its write and its reads: a tunable, on
  // by default.
  bool task_b_blocks = true;

  // "derived", or "tuned CLASS" (a string that outlives every plan: a literal, or owned by the
  // tuning, which is never freed)
  const char* source = "derived";
};

// The machine's GemmParams for tile shape `kernel` of `mk`: kc so that the A panel takes half
// of L1d, nc so that the B block takes half of L2 (a multiple of nr), mr_direct = L1d's
// ways, the large-B and epilogue thresholds from L2, the task sizes from the FMA throughput of
// one core (`core_gflops`: the smallest task lasts about 4 us, as a oneTBB task costs about a
// microsecond). The prefetch distance covers the L2 latency. The plan thresholds weigh a
// packing pass against the traffic it saves: B packed from 16 row panels, A read directly by
// tasks of at most 4 tiles (when its rows fit half of L1), tasks of at least 4 row panels (as
// many as a quarter of L2 holds, if fewer); the reasoning is in gemm_plan.cc.
GemmParams derive_gemm_params(const MicroKernels& mk, int32_t kernel, const CpuInfo& cpu,
                              double core_gflops);

// Whether a kc x nc block of a B read directly, its rows `row_floats` apart, stays in L2: rows a
// multiple of many lines apart fall into few of L2's sets (a row of 1024 floats, 4 KiB, puts
// every row of a 256-row block into 1 of each 64 sets), and the block fits only where no set
// receives more of its lines than it has ways. Unknown geometry (l2_sets 0): true.
bool b_rows_fit_l2(const GemmParams& p, int64_t row_floats, int64_t kc, int64_t nc);

// How A (the broadcast operand) and B (the vector operand) reach the microkernels.
enum class AMode {
  kPackedAll,       // every row panel of a k block packed at the block's start (col blocks)
  kPackedPerPanel,  // each panel packed right before its tiles into one panel's buffer (L1)
  kRowsDirect,      // A's rows read directly (tiles of at most mr_direct rows)
  kColumnsDirect,   // a stored A^T's rows read directly (one k's values are contiguous)
  kRowsWidened,     // a bf16 A's rows widened a panel at a time into a buffer of kc-float rows
                    // that the tiles read as kRowsDirect reads A (no transposing pack)
};
enum class BMode {
  kPacked,           // op(B) packed into nr-column panels before the tasks, in parallel
  kPackedPerTask,    // each task packs its own column panels (few rows, no packing phase)
  kPackedPerKBlock,  // one task: each k block of op(B) packed right before its tiles, which
                     // read it from L2 (no packing phase writing all of B out to memory first)
  kDirect,           // B's rows read directly
  kCopiedBlocks,     // read directly by the first row panel's tiles, which copy each kc x nc/2
                     // block into an L2 buffer for the later panels
  kPackedBlocks,     // each task packs each kc x nc block of its columns into an L2 buffer
                     // right before the block's tiles (no packing phase; B never written whole)
  kPrepacked,        // packed as kPacked once per loop, by the first product that reads it
                     // (a loop-invariant B: SgemmArgs::packed_b, runtime/loop_invariants.h)
  kWidened,          // a bf16 B stored k x n, widened before the tasks into float32 rows
                     // (n floats apart) that its tiles read as kDirect reads B
};
// A product computed as its transpose C^T = op(B)^T op(A)^T, then C = (C^T)^T:
enum class BackTranspose {
  kNone,     // computed as it is, not transposed
  kPerTask,  // each task transposes its rows of C^T into C right after computing them
  kAfter,    // in a phase of its own after the product (back_blocks tasks)
};

const char* name(AMode mode);
const char* name(BMode mode);
const char* name(BackTranspose mode);

struct GemmPlan {
  GemmShape shape;  // the product asked for
  const char* isa = "";
  const MicroKernel* kernel = nullptr;
  BackTranspose back = BackTranspose::kNone;
  int64_t back_blocks = 1;  // kAfter: tasks transposing C^T back
  // The product the tasks compute: the one asked for, or its transpose (back != kNone); k in
  // steps of the tiles (bf16 pairs with k_per_step 2).
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  bool a_bf16 = false, b_bf16 = false;     // its operands stored as bf16 (widened as packed)
  int64_t row_blocks = 1, col_blocks = 1;  // tasks: row blocks x column blocks of C
  AMode a = AMode::kPackedPerPanel;
  BMode b = BMode::kDirect;
  int64_t kc = 0, k_blocks = 1;  // k blocks of kc (the last may be shorter)
  int32_t k_per_step = 1;        // 2: bf16 pair kernels; k, kc and k blocks count pairs
  int64_t k_quantum = 1;         // k blocks are multiples of this many steps (AMX: 16)
  int64_t nc = 0;                // columns of B per block in a task
  int32_t panel_rows = 0;        // rows per tile
  int32_t b_ahead = 0;
  const char* source = "";  // where the blocking came from (GemmParams::source)
  // A panel's whole tiles in one call of the set's row function (MicroKernels::tile_row;
  // GemmParams::row_calls, and both operands packed).
  bool row_calls = false;

  int64_t tasks() const { return row_blocks * col_blocks; }
  // The first row of row block rb (rb == row_blocks: m). Where every block gets at least 4
  // panels of panel_rows rows, blocks hold whole panels, as evenly as the panels split, and the
  // last one the short panel: no other block runs a short tile (1024 rows in 8 blocks of 6-row
  // panels: 126 or 132 rows each and 130 in the last, where blocks of 128 rows would run 22
  // tiles each, 4 of them 5 rows high). Thinner blocks keep equal heights (m * rb / row_blocks).
  int64_t row_start(int64_t rb) const;
  bool transposed() const { return back != BackTranspose::kNone; }
  // One line: "1024x1024x1024 nn 1 thread: avx512 12x32, grid 1x1, A packed-per-panel, B
  // packed, kc 336 x 4 blocks, nc 448, 12 rows per tile, prefetch 8 rows (derived)"; a bf16
  // operand shows as "A bf16 packed-per-panel" (widened as it is packed), a float32 one rounded
  // to bf16 as "A f32->bf16 packed-per-panel".
  std::string describe() const;

  // Field by field (the kernel, ISA name and source by address: each names one object for the
  // life of the process).
  bool operator==(const GemmPlan&) const = default;
};

// The task grid of an m x n x k product on `threads` threads (C cut into row blocks of whole
// panels and column blocks of whole nr tiles). Any grid gives the same result. `a_bf16`: A is
// stored as bf16, so every task packs (or widens) its panels of A (never read in place), and
// every column block packs them again: its columns are split into one task a thread at most
// (a float32 A's into up to two).
struct GemmGrid {
  int64_t row_blocks = 1, col_blocks = 1;
};
GemmGrid plan_grid(const MicroKernel& kernel, const GemmParams& p, int64_t m, int64_t n, int64_t k,
                   int threads, bool whole_rows, bool a_bf16 = false);

// The plan of `shape` on kernel set `mk` with blocking `p`. Sizes must be > 0.
GemmPlan make_gemm_plan(const MicroKernels& mk, const GemmShape& shape, const GemmParams& p);

// The same with the grid given (tests and the tuner run one product under several grids):
// the operand modes follow from it as they would from the planned grid.
GemmPlan make_gemm_plan(const MicroKernels& mk, const GemmShape& shape, const GemmParams& p,
                        GemmGrid grid);

}  // namespace kiln::runtime::gemm_detail
