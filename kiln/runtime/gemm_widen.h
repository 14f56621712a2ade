// Packing bfloat16 GEMM operands into the engine's float32 panels: a bf16 value widens to
// float32 exactly (its 16 bits become the upper half of the float32), so a product of bf16
// operands packed this way is, bit for bit, the float32 product of the widened matrices
// (runtime/gemm_engine.h), without a separate pass that widens whole operands in memory.
// Operands are the bfloat16 bits (uint16_t), so the engine needs nothing from ir/. The
// transposing copy is the kernel set's (MicroKernels::widen_transpose); the row copies here are
// inline, for the packers' short rows: AVX-512 and AVX2 where the including file is built for
// them (KILN_NATIVE), else SSE2 (every x86-64 CPU has it).
#pragma once

#include <bit>
#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kiln::runtime::gemm_detail {

// dst[i] = widen(src[i]) for i < n.
inline void widen_bf16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
#if defined(__AVX512F__)
  // Where the file is built for a CPU with them (KILN_NATIVE): 16 and 8 values at a time, each
  // zero-extended to 32 bits and moved to the upper half.
  for (; i + 16 <= n; i += 16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    // (The zero-masked forms: GCC 12 warns of the unmasked ones' undefined source operand.)
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(__mmask16(0xFFFF), v);
    _mm512_storeu_si512(dst + i, _mm512_maskz_slli_epi32(__mmask16(0xFFFF), wide, 16));
  }
#endif
#if defined(__AVX2__)
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
#endif
#if defined(__SSE2__)
  // Interleaving zeros below each 16-bit value gives the float32 whose upper half it is.
  const __m128i zero = _mm_setzero_si128();
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_unpacklo_epi16(zero, v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4), _mm_unpackhi_epi16(zero, v));
  }
#endif
  for (; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t(src[i]) << 16);
}

// dst[i * dst_ld + p] = widen(src[i * src_ld + p]) for i < rows, p < cols.
inline void widen_bf16_rows(const uint16_t* src, int64_t src_ld, int64_t rows, int64_t cols,
                            float* dst, int64_t dst_ld) {
  for (int64_t i = 0; i < rows; ++i) widen_bf16(src + i * src_ld, cols, dst + i * dst_ld);
}

// x[i] = x[i] rounded to the nearest bf16 (ties to even, NaN kept quiet with its sign, as
// bfloat16::from_float), as a float32, for i < n: a packed panel of a float32 operand read as
// bf16 by the float32 kernels, rounded in place while it is in cache.
inline void round_to_bf16_in_place(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(x[i]);
    const uint32_t nan = u | 0x00400000u, rounded = u + 0x7FFFu + ((u >> 16) & 1u);
    x[i] = std::bit_cast<float>(((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded) & 0xFFFF0000u);
  }
}

// Pairs of bf16 for the pair kernels (gemm_microkernel.h): dst[j] = upper[j] in the upper half
// and lower[j] in the lower half, j < n; a null row gives zeros (past the end of k).
inline void interleave_bf16_pairs(const uint16_t* upper, const uint16_t* lower, int64_t n,
                                  float* dst) {
  int64_t j = 0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (; j + 8 <= n; j += 8) {
    const __m128i u = upper ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(upper + j)) : zero;
    const __m128i l = lower ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(lower + j)) : zero;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), _mm_unpacklo_epi16(l, u));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j + 4), _mm_unpackhi_epi16(l, u));
  }
#endif
  for (; j < n; ++j)
    dst[j] = std::bit_cast<float>(uint32_t(upper ? upper[j] : 0u) << 16 | (lower ? lower[j] : 0u));
}

}  // namespace kiln::runtime::gemm_detail
