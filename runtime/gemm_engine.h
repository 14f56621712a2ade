// kiln's float32 GEMM engine (internal to runtime/; users call runtime/gemm.h): packing and
// blocking around the register-blocked microkernels of gemm_microkernel.h, split into tasks on
// kiln's arena.
//
// Blocking (BLIS, transposed so that vectors run along C's rows):
//   k is cut into blocks of at most kKc (sizes from k alone);
//   B (k x n) is packed into panels of nr columns, [k block][panel][kc][nr], zero-padded,
//     when it is transposed (its rows are then C's columns) or tall enough for the reuse to pay;
//     otherwise the microkernels read its rows in place, or, when B is larger than the cache
//     (over 4 MiB) and a task has several row panels, from each kc x kNc/2 block of it copied
//     into an L2 buffer by the first row panel's tiles as they read it (rows ahead
//     prefetched; the next block's rows prefetched while the current block's tiles run; also
//     instead of packing all of a large B for one row block);
//   a product of at most nr rows against a transposed B of many columns, and a narrow
//     C = A^T B (at most nr/2 columns, a classifier's kernel gradient), run as their transpose
//     (B's rows, or A's, are then an operand read in place);
//   a task at most 128 columns wide reads A in place, its panel's rows staying in L1 across the
//     tiles (a transposed A too: its values for one k are contiguous, as in a packed panel);
//   each task owns a block of C (rows x columns) and, per k block, packs its rows of A into
//     panels of at most mr rows ([kc][rows]) and runs every panel against every nr-column
//     tile of B, kNc columns at a time (the B block stays in L2, the A panel in L1).
// Every C element is the microkernel's FMA chain per k block, added to C block by block in k
// order, so results are bitwise identical for any split, thread count or microkernel ISA.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {

inline constexpr int64_t kKc = 512;  // deepest k block (tuned: docs/benchmarks.md)
inline constexpr int64_t kNc = 256;  // columns of B per L2 block (a multiple of every nr)

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// k blocks of near-equal depth, at most kKc each: block q is [q * step, min(k, (q+1) * step)).
// Every product of depth k (and every direct convolution of window K = k, conv_direct.h) uses
// these blocks, which fixes its elements' FMA chains.
struct KBlocks {
  int64_t count, step;
  explicit KBlocks(int64_t k) : count(ceil_div(k, kKc)), step(ceil_div(k, ceil_div(k, kKc))) {}
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

// C[m, n] (+)= op(A) op(B), row-major with leading dimensions; A is k x m stored if ta, B is
// n x k stored if tb. Sizes are > 0 (gemm.cc handles empty products).
struct SgemmArgs {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
};

// How C is cut into tasks: row_blocks x col_blocks blocks of whole mr-row panels and nr-column
// tiles. Any grid gives the same result; this one depends on the shape and `threads`.
struct SgemmGrid {
  int64_t row_blocks = 1;
  int64_t col_blocks = 1;
};
SgemmGrid plan_sgemm(const MicroKernels& mk, int64_t m, int64_t n, int64_t k, int threads,
                     bool whole_rows);

// Runs the product with the given grid on kiln's arena (one task: on the calling thread). If
// on_rows is set, the grid must have one column block, and on_rows(r0, r1) runs on the thread
// that computed rows [r0, r1), right after their last product.
void sgemm(const MicroKernels& mk, const SgemmArgs& args, SgemmGrid grid,
           const std::function<void(int64_t, int64_t)>* on_rows = nullptr);

// The microkernels float GEMMs use: the best the CPU runs (AVX-512F, else AVX2 + FMA), or
// KILN_GEMM / set_gemm_kernels; nullptr means Eigen's GEMM (gemm.cc).
const MicroKernels* active_microkernels();

}  // namespace kiln::runtime::gemm_detail
