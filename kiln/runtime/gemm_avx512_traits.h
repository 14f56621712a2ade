// The AVX-512F traits of the tile template (gemm_tile_kernel.h), shared by the files compiled
// for AVX-512 (gemm_microkernel_avx512.cc, gemm_microkernel_avx512bf16.cc), each after
// <immintrin.h>. Internal linkage (an anonymous namespace): each file's copy is compiled for
// its own flags (gemm_microkernel.h).
#pragma once

#include <cstdint>

namespace kiln::runtime::gemm_detail {
namespace {

struct Avx512 {
  using Vec = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
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
