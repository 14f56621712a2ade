// AVX512-BF16 GEMM microkernels: the tile template of gemm_tile_kernel.h over bf16 pairs, each
// step one VDPBF16PS per vector of B (contract and pair layout: gemm_microkernel.h). This file
// is compiled with -mavx512f -mavx512bf16 -mfma and must include nothing but intrinsics and the
// kernel headers; gemm_engine.cc runs it only on a CPU with AVX512-BF16.
#include <immintrin.h>

#include <cstdint>

#include "kiln/runtime/gemm_avx512_traits.h"
#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

// Vec holds 16 lanes of float32 accumulators, or of bf16 pairs (A's broadcast, B's vectors).
struct Avx512Bf16 : Avx512 {
  // c + the products of a's and b's pairs, lane by lane (VDPBF16PS).
  static Vec fma(Vec a, Vec b, Vec c) {
    return _mm512_dpbf16_ps(c, reinterpret_cast<__m512bh&>(a), reinterpret_cast<__m512bh&>(b));
  }
};

}  // namespace
}  // namespace kiln::runtime::gemm_detail

#include "kiln/runtime/gemm_tile_kernel.h"

namespace kiln::runtime::gemm_detail {

// The bf16 peak: a VDPBF16PS is 2 products of 16 lanes, twice the flops of a float32 FMA.
const MicroKernels& avx512bf16_microkernels() {
  static constexpr MicroKernels kernels{"avx512bf16",
                                        Avx512Bf16::kLanes,
                                        {tile_shape<Avx512Bf16, 12, 2>("12x32"),
                                         tile_shape<Avx512Bf16, 8, 3>("8x48"),
                                         {nullptr, 0, 0, nullptr, nullptr},
                                         {nullptr, 0, 0, nullptr, nullptr}},
                                        2,
                                        fma_loop<Avx512Bf16>,
                                        2 * fma_loop_flops<Avx512Bf16>(),
                                        transpose_avx2,
                                        widen_transpose_avx2,
                                        2,
                                        PairLayout::kDot};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
