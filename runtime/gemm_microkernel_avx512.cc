// AVX-512F GEMM microkernels (contract: gemm_microkernel.h). This file is compiled with
// -mavx512f -mfma and must include nothing but intrinsics and that header.
#include <immintrin.h>

#include <cstdint>

#include "kiln/runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

struct Avx512 {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kMr = 12;  // 12 x 2 accumulators of the 32 zmm registers
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Mask mask(int32_t cols, int v) {
    const int32_t left = cols - v * kLanes;
    if (left >= kLanes) return Mask(0xFFFF);
    return left <= 0 ? Mask(0) : Mask((1u << left) - 1u);
  }
  static Vec load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
  static float sum(Vec v) {
    float lanes[kLanes];
    _mm512_storeu_ps(lanes, v);
    float total = 0;
    for (float lane : lanes) total += lane;
    return total;
  }
};

}  // namespace
}  // namespace kiln::runtime::gemm_detail

#include "kiln/runtime/gemm_tile_kernel.h"

namespace kiln::runtime::gemm_detail {

const MicroKernels& avx512_microkernels() {
  static constexpr MicroKernels kernels{
      "avx512",     Avx512::kMr,      2 * Avx512::kLanes,       8,
      tile<Avx512>, fma_loop<Avx512>, fma_loop_flops<Avx512>(), transpose_avx2};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
