// AMX-BF16 GEMM microkernel: the tile kernel of gemm_amx_tile.h on the AMX unit (TDPBF16PS), one
// 32 x 32 block of C per call (layout: gemm_amx_tile.h). This file is compiled with
// -mamx-tile -mamx-bf16 (and AVX-512F/BW for its B packer) and must include nothing but intrinsics
// and the kernel headers; gemm_engine.cc runs it only on a CPU with AMX-BF16 whose kernel granted
// this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM).
#include <immintrin.h>

#include <cstdint>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

// The tile configuration (palette 1): tiles 0-7 all 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// Configures the tiles on this thread (MicroKernels::begin_tiles). Once per task, not per tile:
// another library in the process may configure the tiles differently, but nothing else runs on
// the thread within a task.
void configure_tiles() {
  static const TileConfig config;
  _tile_loadconfig(&config);
}

void release_tiles() { _tile_release(); }

struct AmxTiles {
  // GCC's tile intrinsics paste their tile number into the instruction's text: it must be a
  // literal, so each template picks its literal.
  template <int T>
  static void load(const float* p, int64_t stride) {
    if constexpr (T == 0) _tile_loadd(0, p, stride);
    if constexpr (T == 1) _tile_loadd(1, p, stride);
    if constexpr (T == 2) _tile_loadd(2, p, stride);
    if constexpr (T == 3) _tile_loadd(3, p, stride);
    if constexpr (T == 4) _tile_loadd(4, p, stride);
    if constexpr (T == 5) _tile_loadd(5, p, stride);
    if constexpr (T == 6) _tile_loadd(6, p, stride);
    if constexpr (T == 7) _tile_loadd(7, p, stride);
  }
  template <int T>
  static void zero() {
    if constexpr (T == 0) _tile_zero(0);
    if constexpr (T == 1) _tile_zero(1);
    if constexpr (T == 2) _tile_zero(2);
    if constexpr (T == 3) _tile_zero(3);
  }
  template <int C, int A, int B>
  static void dot() {
    static_assert((C == 0 && A == 4 && B == 6) || (C == 1 && A == 4 && B == 7) ||
                  (C == 2 && A == 5 && B == 6) || (C == 3 && A == 5 && B == 7));
    if constexpr (C == 0) _tile_dpbf16ps(0, 4, 6);
    if constexpr (C == 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (C == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (C == 3) _tile_dpbf16ps(3, 5, 7);
  }
  template <int T>
  static void store(float* p, int64_t stride) {
    if constexpr (T == 0) _tile_stored(0, p, stride);
    if constexpr (T == 1) _tile_stored(1, p, stride);
    if constexpr (T == 2) _tile_stored(2, p, stride);
    if constexpr (T == 3) _tile_stored(3, p, stride);
  }
};

}  // namespace
}  // namespace kiln::runtime::gemm_detail

#include "kiln/runtime/gemm_amx_tile.h"

namespace kiln::runtime::gemm_detail {
namespace {

TileFn amx_select(int32_t rows, int32_t cols, bool, bool) {
  return amx_block_for<AmxTiles>(rows, cols);
}

// MicroKernels::tiles_b_row with AVX-512BW (every CPU with AMX has it): per panel, the 32
// columns of both rows in two vectors, each half's 16 pairs gathered by one two-source word
// permute (the pair's first element, word 2j, from `first`; word 2j + 1 from `second`).
// The word indices of _mm512_permutex2var_epi16 that pair columns [first_column, first_column
// + 16) of two 32-word rows: word 2j from the first row, 2j + 1 from the second.
__m512i pair_words(int first_column) {
  alignas(64) uint16_t words[32];
  for (int w = 0; w < 32; ++w) words[w] = uint16_t((w % 2 == 0 ? 0 : 32) + first_column + w / 2);
  return _mm512_load_si512(words);
}

void tiles_b_row(const uint16_t* first, const uint16_t* second, int64_t cols, int64_t panel_floats,
                 int64_t q, float* block) {
  const __m512i low = pair_words(0), high = pair_words(16);
  const int64_t low_at = tiles_b_offset(q, 0), high_at = tiles_b_offset(q, 16);
  for (int64_t panel = 0; panel * 32 < cols; ++panel) {
    // The last panel's columns past `cols` are neither read nor packed (zeros).
    const int64_t left = cols - panel * 32;
    const __mmask32 read = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
    const __m512i a = _mm512_maskz_loadu_epi16(read, first + 32 * panel);
    const __m512i b =
        second ? _mm512_maskz_loadu_epi16(read, second + 32 * panel) : _mm512_setzero_si512();
    float* dst = block + panel * panel_floats;
    _mm512_storeu_si512(dst + low_at, _mm512_permutex2var_epi16(a, low, b));
    _mm512_storeu_si512(dst + high_at, _mm512_permutex2var_epi16(a, high, b));
  }
}

// The bf16 peak: four independent TDPBF16PS of 16 x 16 x 16 pairs (16 K flops each) per round,
// each into its own accumulator tile, on operand tiles of nonzero values as a product's are (on
// zero tiles the unit runs about an eighth faster than on any real operands, which would make
// every measured fraction of the peak too low).
float tdp_loop(int64_t iterations) {
  // Pairs of bf16 in (-2, -1] and [1, 2) (signs and mantissas varying by element): sums of
  // products stay far from overflow for any iteration count a peak measurement uses.
  struct alignas(64) Operands {
    uint32_t bits[4 * 256];
    Operands() {
      uint32_t state = 0x9E3779B9u;
      for (uint32_t& pair : bits) {
        uint32_t halves[2];
        for (uint32_t& half : halves) {
          state = state * 1664525u + 1013904223u;
          half = ((state >> 31) << 15) | 0x3F80u | ((state >> 16) & 0x7Fu);
        }
        pair = halves[0] | (halves[1] << 16);
      }
    }
  };
  static const Operands operands;
  configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operands.bits, 64);
  _tile_loadd(5, operands.bits + 256, 64);
  _tile_loadd(6, operands.bits + 512, 64);
  _tile_loadd(7, operands.bits + 768, 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

// r[q] = r[q][i] for q, i < 16 becomes r[i][q] (32-bit elements): pairs within 128-bit lanes,
// then quads, then the lanes themselves.
void transpose_16x16(__m512i (&r)[16]) {
  __m512i t[16], u[16];
  for (int j = 0; j < 16; j += 2) {
    t[j] = _mm512_unpacklo_epi32(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_epi32(r[j], r[j + 1]);
  }
  // u[4j + c], lane L: column 4L + c of rows 4j .. 4j + 3.
  for (int j = 0; j < 16; j += 4) {
    u[j] = _mm512_unpacklo_epi64(t[j], t[j + 2]);
    u[j + 1] = _mm512_unpackhi_epi64(t[j], t[j + 2]);
    u[j + 2] = _mm512_unpacklo_epi64(t[j + 1], t[j + 3]);
    u[j + 3] = _mm512_unpackhi_epi64(t[j + 1], t[j + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i low01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i low23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i high01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i high23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(low01, low23, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(low01, low23, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(high01, high23, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(high01, high23, 0xDD);
  }
}

// MicroKernels::tiles_a_from_columns: per 16 pairs, the pairs of the 32 rows (two 16-row
// halves, a word permute each), then each half transposed from (pair, row) to (row, pair).
void tiles_a_from_columns(const uint16_t* at, int64_t ld, int64_t rows, int64_t elements,
                          int64_t pairs, float* out) {
  const __m512i low = pair_words(0), high = pair_words(16);
  const __mmask32 columns = rows >= 32 ? ~__mmask32(0) : (__mmask32(1) << rows) - 1;
  auto row = [&](int64_t e) {
    return e < elements ? _mm512_maskz_loadu_epi16(columns, at + e * ld) : _mm512_setzero_si512();
  };
  for (int64_t c = 0; c < pairs; c += 16) {
    __m512i top[16], bottom[16];
    for (int q = 0; q < 16; ++q) {
      const int64_t e = 2 * (c + q);
      const __m512i first = row(e), second = row(e + 1);
      top[q] = _mm512_permutex2var_epi16(first, low, second);
      bottom[q] = _mm512_permutex2var_epi16(first, high, second);
    }
    transpose_16x16(top);
    transpose_16x16(bottom);
    float* chunk = out + c * 32;
    for (int i = 0; i < 16; ++i) {
      _mm512_storeu_si512(chunk + i * 16, top[i]);
      _mm512_storeu_si512(chunk + (16 + i) * 16, bottom[i]);
    }
  }
}

}  // namespace

const MicroKernels& amx_microkernels() {
  static constexpr MicroKernels kernels{
      "amx",
      16,
      {{"32x32", kAmxRows, kAmxCols, amx_tile<AmxTiles>, amx_select},
       {nullptr, 0, 0, nullptr, nullptr},
       {nullptr, 0, 0, nullptr, nullptr},
       {nullptr, 0, 0, nullptr, nullptr}},
      1,
      tdp_loop,
      4 * 2 * 16 * 16 * 32,
      transpose_avx2,
      widen_transpose_avx2,
      2,
      PairLayout::kTiles,
      configure_tiles,
      release_tiles,
      tiles_b_row,
      tiles_a_from_columns,
      amx_row<AmxTiles>};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
