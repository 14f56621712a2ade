// Packing bf16 operands (contract: gemm_pack_bf16.h).
#include "kiln/runtime/gemm_pack_bf16.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/gemm_widen.h"
#include "kiln/runtime/scratch.h"

namespace kiln::runtime::gemm_detail {
namespace {

// ---- float32 operands rounded to bf16 as they are packed

// dst[i * cols + j] = src[i * ld + j] rounded to bf16, i < rows, j < cols.
void round_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, uint16_t* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      dst[i * cols + j] = bfloat16::from_float(src[i * ld + j]).bits;
}

// The elements of k a pair packer reads in the k block of pairs [k0, k0 + kc): up to the end of
// k. (Only the pair kernels round through here: the float32 kernels round their packed panels,
// gemm_pack.cc.)
int64_t k_elements_of_block(const SgemmArgs& g, int64_t k0, int64_t kc) {
  KILN_ASSERT(g.k_elements > 0,
              "gemm: a rounded operand reaches the bf16 packers on pair kernels only");
  const int64_t elements = std::clamp<int64_t>(g.k_elements - 2 * k0, 0, 2 * kc);
  KILN_ASSERT(elements > 0, "gemm: a k block past the end of the product's depth");
  return elements;
}

// The block of a float32 operand a packer reads, rounded into the calling thread's scratch: k
// elements [e0, e0 + elements) of `count` rows or columns from `first`, with k along the
// operand's rows (`k_rows`: a B, or a stored A^T) or along its columns; `ld` is the block's
// leading dimension, its k starting at the block.
struct RoundedBlock {
  Scratch buffer;
  const uint16_t* data;
  int64_t ld;
  RoundedBlock(const float* base, int64_t base_ld, bool k_rows, int64_t first, int64_t count,
               int64_t e0, int64_t elements)
      : buffer(ScratchSlot::kGemmRounded, size_t(std::max<int64_t>(1, count * elements)) * 2),
        data(buffer.as<uint16_t>()),
        ld(k_rows ? count : elements) {
    if (k_rows)
      round_rows(base + e0 * base_ld + first, base_ld, elements, count, buffer.as<uint16_t>());
    else
      round_rows(base + first * base_ld + e0, base_ld, count, elements, buffer.as<uint16_t>());
  }
};

// The rows of elements e and e + 1 of a bf16 operand stored with k along its rows (B, or a
// stored A^T), null past the end of k (their pair halves are zeros).
struct PairRows {
  const uint16_t *first, *second;
};
PairRows pair_rows(const uint16_t* base, int64_t ld, int64_t e, int64_t k_elements) {
  return {e < k_elements ? base + e * ld : nullptr,
          e + 1 < k_elements ? base + (e + 1) * ld : nullptr};
}

// dst[j] = the pair of columns col0 + j of `rows`, j < n, in the kernel set's half order.
void interleave_pair_rows(const MicroKernels& mk, PairRows rows, int64_t col0, int64_t n,
                          float* dst) {
  const uint16_t* first = rows.first ? rows.first + col0 : nullptr;
  const uint16_t* second = rows.second ? rows.second + col0 : nullptr;
  if (mk.pair_layout == PairLayout::kDot)
    interleave_bf16_pairs(first, second, n, dst);
  else
    interleave_bf16_pairs(second, first, n, dst);
}

// Row q (a pair of k) of a kTiles B panel (nr = 32) from `rows`' columns [col0, col0 + cols):
// the pairs of columns 0-15 and 16-31 into the panel's two halves (tiles_b_offset), zeros
// past `cols`. A whole panel's halves are interleaved in place; a partial one through a row.
void tiles_b_pair_row(const MicroKernels& mk, PairRows rows, int64_t col0, int64_t cols, int64_t q,
                      float* panel) {
  constexpr int64_t kNr = 32, kHalf = 16;
  if (mk.tiles_b_row && rows.first) {
    mk.tiles_b_row(rows.first + col0, rows.second ? rows.second + col0 : nullptr, cols, 0, q,
                   panel);
    return;
  }
  if (cols == kNr) {
    interleave_pair_rows(mk, rows, col0, kHalf, panel + tiles_b_offset(q, 0));
    interleave_pair_rows(mk, rows, col0 + kHalf, kHalf, panel + tiles_b_offset(q, kHalf));
    return;
  }
  alignas(64) float row[kNr];
  std::fill(row + cols, row + kNr, 0.0f);
  interleave_pair_rows(mk, rows, col0, cols, row);
  std::memcpy(panel + tiles_b_offset(q, 0), row, kHalf * sizeof(float));
  std::memcpy(panel + tiles_b_offset(q, kHalf), row + kHalf, kHalf * sizeof(float));
}

// A bf16 operand stored with k along its columns (a stored B^T, or A), `rows` rows `ld` apart
// from `base`: dst[p * dst_ld + i] = the pair of elements e0 + 2p, e0 + 2p + 1 of row i, for
// p < pairs (zeros past the end of k).
void pair_transpose(const MicroKernels& mk, const uint16_t* base, int64_t ld, int64_t rows,
                    int64_t e0, int64_t k_elements, int64_t pairs, float* dst, int64_t dst_ld) {
  const int64_t elements = std::clamp<int64_t>(k_elements - e0, 0, 2 * pairs);
  if (elements > 0)
    pair_transpose_avx2(base + e0, ld, rows, elements, dst, dst_ld,
                        mk.pair_layout == PairLayout::kDot);
  for (int64_t p = (elements + 1) / 2; p < pairs; ++p)
    std::fill(dst + p * dst_ld, dst + p * dst_ld + rows, 0.0f);
}

// A bf16 operand stored with k along its rows (B, or a stored A^T), columns [col0, col0 + cols)
// of the rows `ld` apart from `base`: dst[p * dst_ld + j] = the pair of elements e0 + 2p,
// e0 + 2p + 1 of column col0 + j, for p < pairs (zeros past the end of k), in the set's half
// order.
void pair_interleave(const MicroKernels& mk, const uint16_t* base, int64_t ld, int64_t col0,
                     int64_t cols, int64_t e0, int64_t k_elements, int64_t pairs, float* dst,
                     int64_t dst_ld) {
  const int64_t elements = std::clamp<int64_t>(k_elements - e0, 0, 2 * pairs);
  if (elements > 0)
    pair_interleave_avx2(base + e0 * ld + col0, ld, cols, elements, dst, dst_ld,
                         mk.pair_layout == PairLayout::kDot);
  for (int64_t p = (elements + 1) / 2; p < pairs; ++p)
    std::fill(dst + p * dst_ld, dst + p * dst_ld + cols, 0.0f);
}

// The AMX panel of rows [r0, r0 + h) of op(A), pairs [e0 / 2, e0 / 2 + pairs) (a multiple of
// 16): per 16 pairs, 32 rows (zeros past h) of 16 pairs, the first element in the lower half
// (gemm_amx_tile.h).
void pack_a_tiles(const MicroKernels& mk, const SgemmArgs& g, int64_t r0, int64_t h, int64_t e0,
                  int64_t pairs, float* out) {
  constexpr int64_t kRows = 32, kChunk = 16;
  const int64_t elements = std::clamp<int64_t>(g.k_elements - e0, 0, 2 * pairs);
  if (!g.ta) {
    // A row's pairs lie in memory as the tile wants them: 64 bytes per 16 pairs, copied whole
    // (a constant size, so the copy is inline); only what no row fills is zeroed.
    constexpr size_t kChunkBytes = 2 * kChunk * sizeof(uint16_t);
    const int64_t whole = elements / (2 * kChunk), part = elements % (2 * kChunk);
    const int64_t chunks = pairs / kChunk;
    for (int64_t i = 0; i < h; ++i) {
      const uint16_t* row = g.a16 + (r0 + i) * g.lda + e0;
      for (int64_t c = 0; c < whole; ++c)
        std::memcpy(out + c * kChunk * kRows + i * kChunk, row + c * 2 * kChunk, kChunkBytes);
      if (part > 0) {
        float* dst = out + whole * kChunk * kRows + i * kChunk;
        std::fill(dst, dst + kChunk, 0.0f);
        std::memcpy(dst, row + whole * 2 * kChunk, size_t(part) * sizeof(uint16_t));
      }
    }
    const int64_t filled = whole + (part > 0 ? 1 : 0);
    if (h < kRows)
      for (int64_t c = 0; c < filled; ++c)
        std::fill(out + c * kChunk * kRows + h * kChunk, out + (c + 1) * kChunk * kRows, 0.0f);
    std::fill(out + filled * kChunk * kRows, out + chunks * kChunk * kRows, 0.0f);
    return;
  }
  if (mk.tiles_a_from_columns)
    return mk.tiles_a_from_columns(g.a16 + e0 * g.lda + r0, g.lda, h, elements, pairs, out);
  std::fill(out, out + pairs * kRows, 0.0f);
  for (int64_t p = 0; 2 * p < elements; ++p) {
    const PairRows rows = pair_rows(g.a16, g.lda, e0 + 2 * p, e0 + elements);
    float* dst = out + (p / kChunk) * kChunk * kRows + p % kChunk;
    for (int64_t i = 0; i < h; ++i)
      dst[i * kChunk] = std::bit_cast<float>(
          uint32_t(rows.first[r0 + i]) | uint32_t(rows.second ? rows.second[r0 + i] : 0u) << 16);
  }
}

// The kTiles B panel (nr = 32) of columns [j0, j0 + cols) of op(B), pairs [e0 / 2, e0 / 2 +
// pairs) (a multiple of 16): per 16 pairs its two 16-column halves (tiles_b_offset), zeros past
// the columns and past the end of k.
void pack_b_tiles(const MicroKernels& mk, const SgemmArgs& g, int64_t j0, int64_t cols, int64_t e0,
                  int64_t pairs, float* dst) {
  constexpr int64_t kHalf = 16;
  if (!g.tb) {
    for (int64_t p = 0; p < pairs; ++p)
      tiles_b_pair_row(mk, pair_rows(g.b16, g.ldb, e0 + 2 * p, g.k_elements), j0, cols, p, dst);
    return;
  }
  // A stored B^T: each half's columns are 16 rows of it, transposed 16 pairs at a time.
  for (int64_t h = 0; h < 2; ++h) {
    const int64_t rows = std::clamp<int64_t>(cols - kHalf * h, 0, kHalf);
    for (int64_t c = 0; c < pairs; c += kHalf) {
      float* out = dst + tiles_b_offset(c, kHalf * h);
      if (rows > 0)
        pair_transpose(mk, g.b16 + (j0 + kHalf * h) * g.ldb, g.ldb, rows, e0 + 2 * c, g.k_elements,
                       kHalf, out, kHalf);
      if (rows < kHalf)
        for (int64_t q = 0; q < kHalf; ++q)
          std::fill(out + q * kHalf + rows, out + (q + 1) * kHalf, 0.0f);
    }
  }
}

}  // namespace

void pack_bf16_b_panel(const MicroKernels& mk, const SgemmArgs& g, int64_t j0, int64_t cols,
                       int64_t nr, int64_t k0, int64_t kc, float* dst) {
  if (g.b_rounds) {  // the panel's block of B rounded, then packed as a bf16 B from its start
    const int64_t e0 = 2 * k0, elements = k_elements_of_block(g, k0, kc);
    const RoundedBlock r(g.b, g.ldb, !g.tb, j0, cols, e0, elements);
    SgemmArgs block = g;
    block.b = nullptr;
    block.b_rounds = false;
    block.b16 = r.data;
    block.ldb = r.ld;
    block.k_elements = elements;
    return pack_bf16_b_panel(mk, block, 0, cols, nr, 0, kc, dst);
  }
  if (g.k_elements > 0) {  // pairs: elements [2 k0, 2 k0 + 2 kc) of k
    const int64_t e0 = 2 * k0;
    if (mk.pair_layout == PairLayout::kTiles) return pack_b_tiles(mk, g, j0, cols, e0, kc, dst);
    if (!g.tb) {
      pair_interleave(mk, g.b16, g.ldb, j0, cols, e0, g.k_elements, kc, dst, nr);
    } else {
      pair_transpose(mk, g.b16 + j0 * g.ldb, g.ldb, cols, e0, g.k_elements, kc, dst, nr);
    }
  } else if (!g.tb) {
    widen_bf16_rows(g.b16 + k0 * g.ldb + j0, g.ldb, kc, cols, dst, nr);
  } else {
    mk.widen_transpose(g.b16 + j0 * g.ldb + k0, g.ldb, cols, kc, dst, nr);
  }
  if (cols < nr)
    for (int64_t p = 0; p < kc; ++p) std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
}

namespace {

// Row p of a packed block of B (every panel) from `rows`: B's row k0 + p, or its rows of pair
// k0 + p (a null second row past the end of k).
void pack_b_row_from(const MicroKernels& mk, const SgemmArgs& g, PairRows rows, int64_t nr,
                     int64_t p, int64_t kc, float* block) {
  if (mk.pair_layout == PairLayout::kTiles) {  // nr 32: the row's two halves (tiles_b_offset)
    if (mk.tiles_b_row && rows.first)
      return mk.tiles_b_row(rows.first, rows.second, g.n, kc * nr, p, block);
    for (int64_t panel = 0; panel * nr < g.n; ++panel)
      tiles_b_pair_row(mk, rows, panel * nr, std::min(nr, g.n - panel * nr), p,
                       block + panel * kc * nr);
    return;
  }
  for (int64_t panel = 0; panel * nr < g.n; ++panel) {
    const int64_t cols = std::min(nr, g.n - panel * nr);
    float* dst = block + panel * kc * nr + p * nr;
    if (g.k_elements > 0)
      interleave_pair_rows(mk, rows, panel * nr, cols, dst);
    else
      widen_bf16(rows.first + panel * nr, cols, dst);
    std::fill(dst + cols, dst + nr, 0.0f);
  }
}

}  // namespace

void pack_bf16_b_row(const MicroKernels& mk, const SgemmArgs& g, int64_t nr, int64_t k0, int64_t p,
                     int64_t kc, float* block) {
  // Pairs: row pair p is elements 2 (k0 + p) and the next.
  const int64_t e = g.k_elements > 0 ? 2 * (k0 + p) : k0 + p;
  const int64_t count = g.k_elements > 0 ? std::clamp<int64_t>(g.k_elements - e, 0, 2) : 1;
  if (count == 0) return pack_b_row_from(mk, g, {nullptr, nullptr}, nr, p, kc, block);
  if (g.b_rounds) {
    const RoundedBlock r(g.b, g.ldb, true, 0, g.n, e, count);
    return pack_b_row_from(mk, g, {r.data, count == 2 ? r.data + r.ld : nullptr}, nr, p, kc, block);
  }
  pack_b_row_from(mk, g, {g.b16 + e * g.ldb, count == 2 ? g.b16 + (e + 1) * g.ldb : nullptr}, nr, p,
                  kc, block);
}

void pack_bf16_a_panel(const MicroKernels& mk, const SgemmArgs& g, int64_t r0, int64_t h,
                       int64_t k0, int64_t kc, float* out) {
  if (g.a_rounds) {  // the panel's block of A rounded, then packed as a bf16 A from its start
    const int64_t e0 = 2 * k0, elements = k_elements_of_block(g, k0, kc);
    const RoundedBlock r(g.a, g.lda, g.ta, r0, h, e0, elements);
    SgemmArgs block = g;
    block.a = nullptr;
    block.a_rounds = false;
    block.a16 = r.data;
    block.lda = r.ld;
    block.k_elements = elements;
    return pack_bf16_a_panel(mk, block, 0, h, 0, kc, out);
  }
  if (g.k_elements > 0) {  // pairs: elements [2 k0, 2 k0 + 2 kc) of k
    const int64_t e0 = 2 * k0;
    if (mk.pair_layout == PairLayout::kTiles) return pack_a_tiles(mk, g, r0, h, e0, kc, out);
    if (g.ta)
      pair_interleave(mk, g.a16, g.lda, r0, h, e0, g.k_elements, kc, out, h);
    else
      pair_transpose(mk, g.a16 + r0 * g.lda, g.lda, h, e0, g.k_elements, kc, out, h);
  } else if (g.ta) {
    widen_bf16_rows(g.a16 + k0 * g.lda + r0, g.lda, kc, h, out, h);
  } else {
    mk.widen_transpose(g.a16 + r0 * g.lda + k0, g.lda, h, kc, out, h);
  }
}

}  // namespace kiln::runtime::gemm_detail
