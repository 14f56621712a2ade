// The AMX tile kernel, written once over a Tiles policy: gemm_microkernel_amx.cc runs it on the
// AMX unit (TDPBF16PS), gemm_microkernel_amx_emulated.cc on a scalar emulation of the eight tile
// registers (tests of the layout on CPUs without AMX). Internal linkage (an anonymous
// namespace) so each file's copy is compiled for its own ISA (gemm_microkernel.h).
//
// Layout (MicroKernels::pair_layout kTiles): k counts pairs of bf16 of consecutive k, the first
// in the lower half of each 32-bit element (TDPBF16PS multiplies element 2i of a row of A's tile
// with element 2i of B's, then 2i + 1 with 2i + 1); kc is a multiple of 16 pairs (one tile of A
// is 16 rows of 16 pairs). The packed A panel is, per 16 pairs, 32 rows (zero past t.rows) of
// 16 pairs: a + (q / 16) * 512 + i * 16 + q % 16. The packed B panel (nr = 32 columns) is, per 16
// pairs, its two 16-column halves one after the other, each 16 pairs of 16 columns:
// b + (q / 16) * 512 + (j / 16) * 256 + (q % 16) * 16 + j % 16 (every tile load reads 1 KiB
// of consecutive bytes; t.ldb is unused). C's 32 x 32 block is four 16 x 16 float32 tiles
// (tmm0-3), A's two row halves tmm4-5, B's two column halves tmm6-7; a block of at most 16 rows
// or columns computes only the quadrants it has. The caller has configured
// the tiles on this thread (MicroKernels::begin_tiles). Policy `Tiles`: load<T>(p, stride_bytes);
// zero<T>(); dot<C, A, B>(); store<T>(p, stride_bytes).
#pragma once

namespace kiln::runtime::gemm_detail {
namespace {

inline constexpr int kAmxRows = 32, kAmxCols = 32, kAmxChunk = 16, kAmxHalf = int(kAmxTileRows);

// Where A's two tiles of each chunk of 16 pairs lie: in the packed panel (t.lda == 0: 512 floats
// a chunk, the bottom rows 256 floats on, rows 64 bytes apart), or in A itself (t.lda > 0: a
// row-major bf16 A read in place, rows t.lda bf16 apart, t.a at the panel's first row and the k
// block's first pair; every row read holds whole chunks).
struct AmxA {
  const char* base;
  int64_t chunk_bytes, row_bytes, bottom_bytes;
  explicit AmxA(const MicroTile& t)
      : base(reinterpret_cast<const char*>(t.a)),
        chunk_bytes(t.lda > 0 ? 64 : kAmxRows * kAmxChunk * 4),
        row_bytes(t.lda > 0 ? 2 * t.lda : 64),
        bottom_bytes(kAmxHalf * (t.lda > 0 ? 2 * t.lda : 64)) {}
  const float* top(int64_t q) const {
    return reinterpret_cast<const float*>(base + q / kAmxChunk * chunk_bytes);
  }
  const float* bottom(int64_t q) const {
    return reinterpret_cast<const float*>(base + q / kAmxChunk * chunk_bytes + bottom_bytes);
  }
};

// One 16 x 16 quadrant of C's block (rows from 16 R, columns from 16 Q) in accumulator tile
// T = 2 R + Q. A quadrant inside t.rows x t.cols is loaded from and stored to C itself; one cut
// by them goes through its place in `buffer` (32 x 32 floats), only its rows and columns inside
// C copied; a block never reads or writes outside C.
template <class Tiles, int R, int Q>
struct AmxQuadrant {
  static constexpr int kTile = 2 * R + Q;
  static int64_t rows(const MicroTile& t) {
    return t.rows - R * kAmxHalf < kAmxHalf ? t.rows - R * kAmxHalf : kAmxHalf;
  }
  static int64_t cols(const MicroTile& t) {
    return t.cols - Q * kAmxHalf < kAmxHalf ? t.cols - Q * kAmxHalf : kAmxHalf;
  }
  static bool whole(const MicroTile& t) { return rows(t) == kAmxHalf && cols(t) == kAmxHalf; }
  static float* in_c(const MicroTile& t) { return t.c + R * kAmxHalf * t.ldc + Q * kAmxHalf; }
  static float* in_buffer(float* buffer) { return buffer + R * kAmxHalf * kAmxCols + Q * kAmxHalf; }

  static void begin(const MicroTile& t, float* buffer) {
    if (!t.accumulate) {
      Tiles::template zero<kTile>();
    } else if (whole(t)) {
      Tiles::template load<kTile>(in_c(t), t.ldc * 4);
    } else {
      // Row copies of the quadrant's columns (__builtin_memcpy: no header), zeros beyond them.
      float* q = in_buffer(buffer);
      const int64_t r = rows(t), n = cols(t);
      for (int64_t i = 0; i < kAmxHalf; ++i) {
        __builtin_memset(q + i * kAmxCols, 0, kAmxHalf * sizeof(float));
        if (i < r)
          __builtin_memcpy(q + i * kAmxCols, in_c(t) + i * t.ldc, size_t(n) * sizeof(float));
      }
      Tiles::template load<kTile>(q, kAmxCols * 4);
    }
  }
  static void end(const MicroTile& t, float* buffer) {
    if (whole(t)) {
      Tiles::template store<kTile>(in_c(t), t.ldc * 4);
      return;
    }
    float* q = in_buffer(buffer);
    Tiles::template store<kTile>(q, kAmxCols * 4);
    const int64_t r = rows(t), n = cols(t);
    for (int64_t i = 0; i < r; ++i)
      __builtin_memcpy(in_c(t) + i * t.ldc, q + i * kAmxCols, size_t(n) * sizeof(float));
  }
};

// A block of C whose columns past 16 (kRight) and rows past 16 (kBottom) are those present:
// the products of an absent quadrant, and the loads only it reads, are left out.
template <class Tiles, bool kRight, bool kBottom>
void amx_block(const MicroTile& t) {
  alignas(64) float buffer[kAmxRows * kAmxCols];  // cut quadrants only
  using Q00 = AmxQuadrant<Tiles, 0, 0>;
  using Q01 = AmxQuadrant<Tiles, 0, 1>;
  using Q10 = AmxQuadrant<Tiles, 1, 0>;
  using Q11 = AmxQuadrant<Tiles, 1, 1>;
  Q00::begin(t, buffer);
  if constexpr (kRight) Q01::begin(t, buffer);
  if constexpr (kBottom) Q10::begin(t, buffer);
  if constexpr (kRight && kBottom) Q11::begin(t, buffer);
  // Each load comes just before the first product that needs it, so that the next chunk's loads
  // overlap this chunk's last products (the tile registers are not renamed: a load waits for
  // the products still reading its tile). Measured on Emerald Rapids, 32 x 32 x 176 pairs with
  // A in L1: 5% over four loads then four products.
  const AmxA a(t);
  for (int64_t q = 0; q < t.kc; q += kAmxChunk) {
    const float* b = t.b + q * kAmxCols;
    Tiles::template load<4>(a.top(q), a.row_bytes);
    Tiles::template load<6>(b, 64);
    Tiles::template dot<0, 4, 6>();
    if constexpr (kRight) {
      Tiles::template load<7>(b + kAmxHalf * kAmxChunk, 64);
      Tiles::template dot<1, 4, 7>();
    }
    if constexpr (kBottom) {
      Tiles::template load<5>(a.bottom(q), a.row_bytes);
      Tiles::template dot<2, 5, 6>();
      if constexpr (kRight) Tiles::template dot<3, 5, 7>();
    }
  }
  Q00::end(t, buffer);
  if constexpr (kRight) Q01::end(t, buffer);
  if constexpr (kBottom) Q10::end(t, buffer);
  if constexpr (kRight && kBottom) Q11::end(t, buffer);
}

// Accumulator T started for a block whose quadrant is at c: C's values, or zeros.
template <class Tiles, int T>
void amx_start(const MicroTile& t, const float* c) {
  if (t.accumulate)
    Tiles::template load<T>(c, t.ldc * 4);
  else
    Tiles::template zero<T>();
}

// MicroKernels::tile_row: `count` whole 32 x 32 blocks of one A panel side by side, block j's
// C at t.c + 32 j and its packed B panel at t.b + j * b_step. Between two blocks each
// accumulator is stored, then started for the next block right before that block's first
// product into it, so that the next block's first chunk runs while this one's other quadrants
// are stored (per block, amx_block's stores, then its loads before the first product, took
// about a fifth of a 176-pair block on the Xeon VM). Every element gets amx_block's products in
// its order.
template <class Tiles>
void amx_row(const MicroTile& t, int64_t count, int64_t b_step) {
  const int64_t ldc = t.ldc, stride = ldc * 4, half = kAmxHalf * kAmxChunk;
  const AmxA a(t);
  float* c = t.c;
  const float* b = t.b;
  amx_start<Tiles, 0>(t, c);
  amx_start<Tiles, 1>(t, c + kAmxHalf);
  amx_start<Tiles, 2>(t, c + kAmxHalf * ldc);
  amx_start<Tiles, 3>(t, c + kAmxHalf * ldc + kAmxHalf);
  for (int64_t j = 0; j < count; ++j) {
    // The first chunk of block 0 here; of the others in the hand-over below.
    for (int64_t q = j == 0 ? 0 : kAmxChunk; q < t.kc; q += kAmxChunk) {
      const float* bq = b + q * kAmxCols;
      Tiles::template load<4>(a.top(q), a.row_bytes);
      Tiles::template load<6>(bq, 64);
      Tiles::template dot<0, 4, 6>();
      Tiles::template load<7>(bq + half, 64);
      Tiles::template dot<1, 4, 7>();
      Tiles::template load<5>(a.bottom(q), a.row_bytes);
      Tiles::template dot<2, 5, 6>();
      Tiles::template dot<3, 5, 7>();
    }
    const bool next = j + 1 < count;
    float* cn = c + kAmxCols;
    const float* bn = b + b_step;
    Tiles::template store<0>(c, stride);
    if (next) {
      amx_start<Tiles, 0>(t, cn);
      Tiles::template load<4>(a.top(0), a.row_bytes);
      Tiles::template load<6>(bn, 64);
      Tiles::template dot<0, 4, 6>();
    }
    Tiles::template store<1>(c + kAmxHalf, stride);
    if (next) {
      amx_start<Tiles, 1>(t, cn + kAmxHalf);
      Tiles::template load<7>(bn + half, 64);
      Tiles::template dot<1, 4, 7>();
    }
    Tiles::template store<2>(c + kAmxHalf * ldc, stride);
    if (next) {
      amx_start<Tiles, 2>(t, cn + kAmxHalf * ldc);
      Tiles::template load<5>(a.bottom(0), a.row_bytes);
      Tiles::template dot<2, 5, 6>();
    }
    Tiles::template store<3>(c + kAmxHalf * ldc + kAmxHalf, stride);
    if (next) {
      amx_start<Tiles, 3>(t, cn + kAmxHalf * ldc + kAmxHalf);
      Tiles::template dot<3, 5, 7>();
    }
    c = cn;
    b = bn;
  }
}

// The block function for tiles of `rows` x `cols` (MicroKernel::select).
template <class Tiles>
TileFn amx_block_for(int32_t rows, int32_t cols) {
  if (cols > kAmxHalf)
    return rows > kAmxHalf ? amx_block<Tiles, true, true> : amx_block<Tiles, true, false>;
  return rows > kAmxHalf ? amx_block<Tiles, false, true> : amx_block<Tiles, false, false>;
}

// Any tile (MicroKernel::tile).
template <class Tiles>
void amx_tile(const MicroTile& t) {
  amx_block_for<Tiles>(t.rows, t.cols)(t);
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
