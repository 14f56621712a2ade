// AVX2 + FMA GEMM microkernels (contract: gemm_microkernel.h). This file is compiled with
// -mavx2 -mfma and must include nothing but intrinsics and that header.
#include <immintrin.h>

#include <cstdint>

#include "runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

constexpr int kMr = 6;
constexpr int kLanes = 8;
constexpr int kNr = 2 * kLanes;

// Lanes j of vector v with v * 8 + j < cols: all ones (maskload/maskstore use the sign bit).
inline __m256i lane_mask(int32_t cols, int v) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - v * kLanes), lane);
}

template <int R, int NV, bool Masked>
void tile_kernel(const MicroTile& t) {
  __m256 acc[R][NV];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  __m256i mask[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) mask[v] = lane_mask(Masked ? t.cols : kNr, v);
  const bool masked_loads = Masked && !t.b_padded;
  const float* a = t.a;
  const float* b = t.b;
  const int64_t ldb = t.ldb;
  auto step = [&](const __m256* bv) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  };
  if (masked_loads) {
    for (int64_t p = 0; p < t.kc; ++p, a += R, b += ldb) {
      __m256 bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_maskload_ps(b + v * kLanes, mask[v]);
      step(bv);
    }
  } else {
    for (int64_t p = 0; p < t.kc; ++p, a += R, b += ldb) {
      __m256 bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + v * kLanes);
      step(bv);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    float* c = t.c + i * t.ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m256 r = acc[i][v];
      if (Masked) {
        if (t.accumulate) r = _mm256_add_ps(_mm256_maskload_ps(c + v * kLanes, mask[v]), r);
        _mm256_maskstore_ps(c + v * kLanes, mask[v], r);
      } else {
        if (t.accumulate) r = _mm256_add_ps(_mm256_loadu_ps(c + v * kLanes), r);
        _mm256_storeu_ps(c + v * kLanes, r);
      }
    }
  }
}

using TileFn = void (*)(const MicroTile&);

template <int R>
TileFn pick(int nv, bool masked) {
  if (nv == 1) return masked ? tile_kernel<R, 1, true> : tile_kernel<R, 1, false>;
  return masked ? tile_kernel<R, 2, true> : tile_kernel<R, 2, false>;
}

void tile(const MicroTile& t) {
  const int nv = t.cols > kLanes ? 2 : 1;
  const bool masked = t.cols != nv * kLanes;
  TileFn fn = nullptr;
  switch (t.rows) {
    case 1:
      fn = pick<1>(nv, masked);
      break;
    case 2:
      fn = pick<2>(nv, masked);
      break;
    case 3:
      fn = pick<3>(nv, masked);
      break;
    case 4:
      fn = pick<4>(nv, masked);
      break;
    case 5:
      fn = pick<5>(nv, masked);
      break;
    case 6:
      fn = pick<6>(nv, masked);
      break;
    default:
      return;  // the engine never asks for more than kMr rows
  }
  fn(t);
}

// 12 independent FMA chains: enough to cover a 4-cycle latency on two FMA pipes.
constexpr int kPeakChains = 12;
float fma_loop(int64_t iterations) {
  __m256 acc[kPeakChains];
#pragma GCC unroll 12
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_set1_ps(float(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  __m256 s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < kPeakChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float lanes[kLanes];
  _mm256_storeu_ps(lanes, s);
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

}  // namespace

const MicroKernels& avx2_microkernels() {
  static constexpr MicroKernels kernels{"avx2", kMr, kNr, tile, fma_loop, 2 * kLanes * kPeakChains};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
