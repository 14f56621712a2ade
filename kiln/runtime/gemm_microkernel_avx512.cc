// AVX-512F GEMM microkernels (contract: gemm_microkernel.h). This file is compiled with
// -mavx512f -mfma and must include nothing but intrinsics and the kernel headers.
#include <immintrin.h>

#include <cstdint>

#include "kiln/runtime/gemm_avx512_traits.h"
#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

// VDPBF16PS emulated on AVX-512F (gemm_microkernel.h): Vec lanes of bf16 pairs in a and b; the
// upper halves' product is added first, then the lower halves'. The products of two bf16 are
// exact in float32, so each FMA is the instruction's add of a product, rounded to nearest
// even; the instruction's flushing of denormal inputs and results is not emulated.
struct Avx512Bf16Emulated : Avx512 {
  static Vec fma(Vec a, Vec b, Vec c) {
    const __m512i upper = _mm512_set1_epi32(int32_t(0xFFFF0000u));
    const __m512i ai = _mm512_castps_si512(a), bi = _mm512_castps_si512(b);
    const Vec a_hi = _mm512_castsi512_ps(_mm512_and_si512(ai, upper));
    const Vec b_hi = _mm512_castsi512_ps(_mm512_and_si512(bi, upper));
    // (maskz: the unmasked shift's undefined source trips GCC 12's -Wmaybe-uninitialized.)
    const Vec a_lo = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, ai, 16));
    const Vec b_lo = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, bi, 16));
    return _mm512_fmadd_ps(a_lo, b_lo, _mm512_fmadd_ps(a_hi, b_hi, c));
  }
};

}  // namespace
}  // namespace kiln::runtime::gemm_detail

#include "kiln/runtime/gemm_tile_kernel.h"

namespace kiln::runtime::gemm_detail {

// Of the 32 zmm registers, the accumulators take 24 (12 x 2 vectors, 8 x 3, 6 x 4) or 28
// (14 x 2), the rest hold B's vectors and the broadcast of A.
const MicroKernels& avx512_microkernels() {
  static constexpr MicroKernels kernels{
      "avx512",
      Avx512::kLanes,
      {tile_shape<Avx512, 12, 2>("12x32"), tile_shape<Avx512, 14, 2>("14x32"),
       tile_shape<Avx512, 8, 3>("8x48"), tile_shape<Avx512, 6, 4>("6x64")},
      4,
      fma_loop<Avx512>,
      fma_loop_flops<Avx512>(),
      transpose_avx2,
      widen_transpose_avx2};
  return kernels;
}

// One tile shape: a test vehicle for the pair layout, not a fast path.
const MicroKernels& avx512bf16_emulated_microkernels() {
  static constexpr MicroKernels kernels{"avx512bf16-emulated",
                                        Avx512::kLanes,
                                        {tile_shape<Avx512Bf16Emulated, 12, 2>("12x32"),
                                         {nullptr, 0, 0, nullptr, nullptr},
                                         {nullptr, 0, 0, nullptr, nullptr},
                                         {nullptr, 0, 0, nullptr, nullptr}},
                                        1,
                                        fma_loop<Avx512Bf16Emulated>,
                                        2 * fma_loop_flops<Avx512Bf16Emulated>(),
                                        transpose_avx2,
                                        widen_transpose_avx2,
                                        2,
                                        PairLayout::kDot};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
