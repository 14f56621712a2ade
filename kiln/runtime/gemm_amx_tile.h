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
// (tmm0-3), A's two row halves tmm4-5, B's two column halves tmm6-7. The caller has configured
// the tiles on this thread (MicroKernels::begin_tiles). Policy `Tiles`: load<T>(p, stride_bytes);
// zero<T>(); dot<C, A, B>(); store<T>(p, stride_bytes).
#pragma once

namespace kiln::runtime::gemm_detail {
namespace {

inline constexpr int kAmxRows = 32, kAmxCols = 32, kAmxChunk = 16;

template <class Tiles>
void amx_tile(const MicroTile& t) {
  // A partial block is computed in a buffer and copied out: nothing outside C is read or written.
  alignas(64) float buffer[kAmxRows * kAmxCols];
  const bool whole = t.rows == kAmxRows && t.cols == kAmxCols;
  float* c = whole ? t.c : buffer;
  const int64_t ldc = whole ? t.ldc : kAmxCols;
  // Row copies of t.cols floats (__builtin_memcpy: no header, and no loop of conditional
  // scalar moves, which took a third of a partial tile's time).
  const size_t row_bytes = size_t(t.cols) * sizeof(float);
  if (!whole) {
    __builtin_memset(buffer, 0, sizeof buffer);
    if (t.accumulate)
      for (int i = 0; i < t.rows; ++i)
        __builtin_memcpy(buffer + i * kAmxCols, t.c + i * t.ldc, row_bytes);
  }
  const int64_t c_stride = ldc * 4;
  if (t.accumulate || !whole) {
    Tiles::template load<0>(c, c_stride);
    Tiles::template load<1>(c + 16, c_stride);
    Tiles::template load<2>(c + 16 * ldc, c_stride);
    Tiles::template load<3>(c + 16 * ldc + 16, c_stride);
  } else {
    Tiles::template zero<0>();
    Tiles::template zero<1>();
    Tiles::template zero<2>();
    Tiles::template zero<3>();
  }
  // Each load comes just before the first product that needs it, so that the next chunk's loads
  // overlap this chunk's last products (the tile registers are not renamed: a load waits for
  // the products still reading its tile). Measured on Emerald Rapids, 32 x 32 x 176 pairs with
  // A in L1: 5% over four loads then four products.
  for (int64_t q = 0; q < t.kc; q += kAmxChunk) {
    const float* a = t.a + q * kAmxRows;
    const float* b = t.b + q * kAmxCols;
    Tiles::template load<4>(a, 64);
    Tiles::template load<6>(b, 64);
    Tiles::template dot<0, 4, 6>();
    Tiles::template load<7>(b + 16 * kAmxChunk, 64);
    Tiles::template dot<1, 4, 7>();
    Tiles::template load<5>(a + 16 * kAmxChunk, 64);
    Tiles::template dot<2, 5, 6>();
    Tiles::template dot<3, 5, 7>();
  }
  Tiles::template store<0>(c, c_stride);
  Tiles::template store<1>(c + 16, c_stride);
  Tiles::template store<2>(c + 16 * ldc, c_stride);
  Tiles::template store<3>(c + 16 * ldc + 16, c_stride);
  if (!whole)
    for (int i = 0; i < t.rows; ++i)
      __builtin_memcpy(t.c + i * t.ldc, buffer + i * kAmxCols, row_bytes);
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
