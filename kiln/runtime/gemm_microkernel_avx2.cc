// AVX2 + FMA GEMM microkernels (contract: gemm_microkernel.h). This file is compiled with
// -mavx2 -mfma and must include nothing but intrinsics and that header.
#include <immintrin.h>

#include <cstdint>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

struct Avx2 {
  using Vec = __m256;
  using Mask = __m256i;  // all ones in the lanes to load or store (vmaskmovps)
  static constexpr int kLanes = 8;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Mask mask(int32_t cols, int v) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - v * kLanes), lane);
  }
  static Vec load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, Mask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
  static float sum(Vec v) {
    float lanes[kLanes];
    _mm256_storeu_ps(lanes, v);
    float total = 0;
    for (float lane : lanes) total += lane;
    return total;
  }
};

// Eight consecutive source values as float32: floats loaded, or bf16 bits (uint16_t) widened
// exactly (each becomes the upper half of its float32).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}
// Two bf16 values of consecutive k, in memory order (first, second), moved as one 32-bit
// element with the first in the upper half (the pair layout of gemm_microkernel.h).
struct __attribute__((may_alias)) Bf16Pair {
  uint16_t first, second;
};
inline __m256 load8(const Bf16Pair* p) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(v, 16), _mm256_srli_epi32(v, 16)));
}
inline float value(Bf16Pair pair) {
  float f;
  const uint32_t u = uint32_t(pair.first) << 16 | pair.second;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}
// The same two values moved as they lie in memory (the first in the lower half). (Two 16-bit
// members: a pair may lie at any even element, 2-byte aligned.)
struct __attribute__((may_alias)) Bf16Dword {
  uint16_t first, second;
};
inline __m256 load8(const Bf16Dword* p) {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
inline float value(Bf16Dword d) {
  float f;
  const uint32_t u = uint32_t(d.second) << 16 | d.first;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}
inline float value(float x) { return x; }
inline float value(uint16_t bits) {
  float f;
  const uint32_t u = uint32_t(bits) << 16;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

// dst[q * dst_ld + i] = src[i * src_ld + q] for i < 8, q < 8.
template <class T>
inline void transpose_8x8(const T* src, int64_t src_ld, float* dst, int64_t dst_ld) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = load8(src + i * src_ld);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // t0 = a0 b0 a1 b1 | a4 b4 a5 b5, t1 = a2 b2 a3 b3 | a6 b6 a7 b7, t2/t3 the same of c, d...
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {
    r[h] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r0 = column 0 of rows 0-3 | column 4 of rows 0-3, r4 = the same of rows 4-7, ...
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    _mm256_storeu_ps(dst + q * dst_ld, _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
    _mm256_storeu_ps(dst + (q + 4) * dst_ld, _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
  }
}

// The same for a 4 x 8 block: dst[q * dst_ld + i] = src[i * src_ld + q] for i < 4, q < 8.
template <class T>
inline void transpose_4x8(const T* src, int64_t src_ld, float* dst, int64_t dst_ld) {
  const __m256 a = load8(src), b = load8(src + src_ld), c = load8(src + 2 * src_ld),
               d = load8(src + 3 * src_ld);
  const __m256 ab_lo = _mm256_unpacklo_ps(a, b), ab_hi = _mm256_unpackhi_ps(a, b);
  const __m256 cd_lo = _mm256_unpacklo_ps(c, d), cd_hi = _mm256_unpackhi_ps(c, d);
  // Columns q | q + 4 of the four rows.
  const __m256 col[4] = {_mm256_shuffle_ps(ab_lo, cd_lo, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(ab_lo, cd_lo, _MM_SHUFFLE(3, 2, 3, 2)),
                         _mm256_shuffle_ps(ab_hi, cd_hi, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(ab_hi, cd_hi, _MM_SHUFFLE(3, 2, 3, 2))};
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    _mm_storeu_ps(dst + q * dst_ld, _mm256_castps256_ps128(col[q]));
    _mm_storeu_ps(dst + (q + 4) * dst_ld, _mm256_extractf128_ps(col[q], 1));
  }
}

// Rows in blocks of 8, then blocks of 4, the last one ending at the last row (it may overlap
// rows already written, with the same values); fewer than 4 rows in all, and columns past a
// multiple of 8, one element at a time.
template <class T>
void transpose_rows(const T* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                    int64_t dst_ld) {
  // Row blocks outside, so that a block reads 8 (or 4) source rows at a time: many rows of a
  // large power-of-two stride at once would share cache sets.
  const int64_t cols8 = cols / 8 * 8, rows8 = rows / 8 * 8;
  for (int64_t i = 0; i < rows8; i += 8)
    for (int64_t q = 0; q < cols8; q += 8)
      transpose_8x8(src + i * src_ld + q, src_ld, dst + q * dst_ld + i, dst_ld);
  if (rows8 < rows && rows >= 4) {
    for (int64_t i = rows8; i < rows; i += 4) {
      const int64_t at = i + 4 <= rows ? i : rows - 4;
      for (int64_t q = 0; q < cols8; q += 8)
        transpose_4x8(src + at * src_ld + q, src_ld, dst + q * dst_ld + at, dst_ld);
    }
  } else {
    for (int64_t c = 0; c < cols8; ++c)
      for (int64_t i = rows8; i < rows; ++i) dst[c * dst_ld + i] = value(src[i * src_ld + c]);
  }
  for (int64_t c = cols8; c < cols; ++c)
    for (int64_t i = 0; i < rows; ++i) dst[c * dst_ld + i] = value(src[i * src_ld + c]);
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail

#include "kiln/runtime/gemm_tile_kernel.h"

namespace kiln::runtime::gemm_detail {

void transpose_avx2(const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                    int64_t dst_ld) {
  transpose_rows(src, src_ld, rows, cols, dst, dst_ld);
}

void widen_transpose_avx2(const uint16_t* src, int64_t src_ld, int64_t rows, int64_t cols,
                          float* dst, int64_t dst_ld) {
  transpose_rows(src, src_ld, rows, cols, dst, dst_ld);
}

void pair_transpose_avx2(const uint16_t* src, int64_t src_ld, int64_t rows, int64_t elements,
                         float* dst, int64_t dst_ld, bool first_high) {
  // Whole pairs as 32-bit elements (rows src_ld / 2 pairs apart when src_ld is even; else
  // pair by pair), then the last element alone when there is an odd number. In memory a pair's
  // first element is the lower half: moved as it is, or with its halves swapped.
  const int64_t pairs = elements / 2;
  auto pair = [first_high](uint16_t first, uint16_t second) {
    return first_high ? value(Bf16Pair{first, second}) : value(Bf16Pair{second, first});
  };
  if (src_ld % 2 == 0 && first_high) {
    transpose_rows(reinterpret_cast<const Bf16Pair*>(src), src_ld / 2, rows, pairs, dst, dst_ld);
  } else if (src_ld % 2 == 0) {
    transpose_rows(reinterpret_cast<const Bf16Dword*>(src), src_ld / 2, rows, pairs, dst, dst_ld);
  } else {
    for (int64_t p = 0; p < pairs; ++p)
      for (int64_t i = 0; i < rows; ++i) {
        const uint16_t* at = src + i * src_ld + 2 * p;
        dst[p * dst_ld + i] = pair(at[0], at[1]);
      }
  }
  if (elements % 2 != 0)
    for (int64_t i = 0; i < rows; ++i)
      dst[pairs * dst_ld + i] = pair(src[i * src_ld + 2 * pairs], 0);
}

namespace {

// Columns [0, cols) of one pair row: out[j] = hi[j] in the upper half, lo[j] in the lower
// (kHi / kLo false: that row is past the end of k, zeros). 16 columns at a time (unpacked
// within 128-bit lanes, the lanes then put in order), then 8 and 4, then the last 1-3 through
// 8-byte copies: nothing read or written past column `cols`.
template <bool kHi, bool kLo>
inline void interleave_pair_row(const uint16_t* hi, const uint16_t* lo, int64_t cols, float* out) {
  auto load256 = [](const uint16_t* row, int64_t j) {
    return row ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j))
               : _mm256_setzero_si256();
  };
  auto load128 = [](const uint16_t* row, int64_t j) {
    return row ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j)) : _mm_setzero_si128();
  };
  auto load64 = [](const uint16_t* row, int64_t j) {
    return row ? _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + j)) : _mm_setzero_si128();
  };
  const uint16_t* h = kHi ? hi : nullptr;
  const uint16_t* l = kLo ? lo : nullptr;
  int64_t j = 0;
  for (; j + 16 <= cols; j += 16) {
    const __m256i vh = load256(h, j), vl = load256(l, j);
    const __m256i a = _mm256_unpacklo_epi16(vl, vh), b = _mm256_unpackhi_epi16(vl, vh);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), _mm256_permute2x128_si256(a, b, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j + 8),
                        _mm256_permute2x128_si256(a, b, 0x31));
  }
  if (j + 8 <= cols) {
    const __m128i vh = load128(h, j), vl = load128(l, j);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), _mm_unpacklo_epi16(vl, vh));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j + 4), _mm_unpackhi_epi16(vl, vh));
    j += 8;
  }
  if (j + 4 <= cols) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                     _mm_unpacklo_epi16(load64(l, j), load64(h, j)));
    j += 4;
  }
  if (j < cols) {
    const size_t rest = size_t(cols - j);
    uint64_t vh = 0, vl = 0;
    if (h) __builtin_memcpy(&vh, h + j, rest * sizeof(uint16_t));
    if (l) __builtin_memcpy(&vl, l + j, rest * sizeof(uint16_t));
    alignas(16) float pairs[4];
    _mm_store_si128(
        reinterpret_cast<__m128i*>(pairs),
        _mm_unpacklo_epi16(_mm_cvtsi64_si128(int64_t(vl)), _mm_cvtsi64_si128(int64_t(vh))));
    __builtin_memcpy(out + j, pairs, rest * sizeof(float));
  }
}

}  // namespace

void pair_interleave_avx2(const uint16_t* src, int64_t src_ld, int64_t cols, int64_t elements,
                          float* dst, int64_t dst_ld, bool first_high) {
  // Whole pairs (both rows), then the last element alone when there is an odd number.
  const int64_t whole = elements / 2;
  for (int64_t p = 0; p < whole; ++p) {
    const uint16_t* first = src + 2 * p * src_ld;
    const uint16_t* second = first + src_ld;
    if (first_high)
      interleave_pair_row<true, true>(first, second, cols, dst + p * dst_ld);
    else
      interleave_pair_row<true, true>(second, first, cols, dst + p * dst_ld);
  }
  if (elements % 2 != 0) {
    const uint16_t* last = src + 2 * whole * src_ld;
    if (first_high)
      interleave_pair_row<true, false>(last, nullptr, cols, dst + whole * dst_ld);
    else
      interleave_pair_row<false, true>(nullptr, last, cols, dst + whole * dst_ld);
  }
}

// Of the 16 ymm registers, the accumulators take 12 (6 x 2 vectors, 4 x 3), the rest hold B's
// vectors and the broadcast of A.
const MicroKernels& avx2_microkernels() {
  static constexpr MicroKernels kernels{"avx2",
                                        Avx2::kLanes,
                                        {tile_shape<Avx2, 6, 2>("6x16"),
                                         tile_shape<Avx2, 4, 3>("4x24"),
                                         {nullptr, 0, 0, nullptr, nullptr},
                                         {nullptr, 0, 0, nullptr, nullptr}},
                                        2,
                                        fma_loop<Avx2>,
                                        fma_loop_flops<Avx2>(),
                                        transpose_avx2,
                                        widen_transpose_avx2};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
