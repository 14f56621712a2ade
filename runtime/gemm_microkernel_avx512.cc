// AVX-512F GEMM microkernels (contract: gemm_microkernel.h). This file is compiled with
// -mavx512f -mfma and must include nothing but intrinsics and that header.
#include <immintrin.h>

#include <cstdint>

#include "runtime/gemm_microkernel.h"

namespace kiln::runtime::gemm_detail {
namespace {

constexpr int kMr = 12;
constexpr int kLanes = 16;
constexpr int kNr = 2 * kLanes;

inline __mmask16 lane_mask(int32_t cols, int v) {
  const int32_t left = cols - v * kLanes;
  if (left >= kLanes) return __mmask16(0xFFFF);
  return left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1u);
}

// R rows, NV vectors of 16 columns; Masked: the last columns are partial (masked stores, and
// masked loads of B unless it is padded).
template <int R, int NV, bool Masked, bool PackedA>
void tile_kernel(const MicroTile& t) {
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  __mmask16 mask[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) mask[v] = Masked ? lane_mask(t.cols, v) : __mmask16(0xFFFF);
  const bool masked_loads = Masked && !t.b_padded;
  const float* a = t.a;
  const float* b = t.b;
  const int64_t ldb = t.ldb;
  // Unpacked A: row i at a + i * lda (a advances along k); packed: a advances by R per step.
  const int64_t lda = PackedA ? 1 : t.lda, a_step = PackedA ? R : 1;
  auto step = [&](const __m512* bv) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i * lda]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  };
  if (masked_loads) {
    for (int64_t p = 0; p < t.kc; ++p, a += a_step, b += ldb) {
      __m512 bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + v * kLanes);
      step(bv);
    }
  } else {
    for (int64_t p = 0; p < t.kc; ++p, a += a_step, b += ldb) {
      __m512 bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + v * kLanes);
      step(bv);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    float* c = t.c + i * t.ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m512 r = acc[i][v];
      if (Masked) {
        if (t.accumulate) r = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], c + v * kLanes), r);
        _mm512_mask_storeu_ps(c + v * kLanes, mask[v], r);
      } else {
        if (t.accumulate) r = _mm512_add_ps(_mm512_loadu_ps(c + v * kLanes), r);
        _mm512_storeu_ps(c + v * kLanes, r);
      }
    }
  }
}

using TileFn = void (*)(const MicroTile&);

template <int R, bool PackedA>
TileFn pick_nv(int nv, bool masked) {
  if (nv == 1) return masked ? tile_kernel<R, 1, true, PackedA> : tile_kernel<R, 1, false, PackedA>;
  return masked ? tile_kernel<R, 2, true, PackedA> : tile_kernel<R, 2, false, PackedA>;
}

template <int R>
TileFn pick(int nv, bool masked, bool packed_a) {
  return packed_a ? pick_nv<R, true>(nv, masked) : pick_nv<R, false>(nv, masked);
}

void tile(const MicroTile& t) {
  const int nv = t.cols > kLanes ? 2 : 1;
  const bool masked = t.cols != nv * kLanes;
  TileFn fn = nullptr;
  switch (t.rows) {
#define KILN_ROWS_CASE(R)                 \
  case R:                                 \
    fn = pick<R>(nv, masked, t.lda == 0); \
    break;
    KILN_ROWS_CASE(1)
    KILN_ROWS_CASE(2)
    KILN_ROWS_CASE(3)
    KILN_ROWS_CASE(4)
    KILN_ROWS_CASE(5)
    KILN_ROWS_CASE(6)
    KILN_ROWS_CASE(7)
    KILN_ROWS_CASE(8)
    KILN_ROWS_CASE(9)
    KILN_ROWS_CASE(10)
    KILN_ROWS_CASE(11)
    KILN_ROWS_CASE(12)
#undef KILN_ROWS_CASE
    default:
      return;  // the engine never asks for more than kMr rows
  }
  fn(t);
}

// 12 independent FMA chains: enough to cover a 4-cycle latency on two FMA pipes.
constexpr int kPeakChains = 12;
float fma_loop(int64_t iterations) {
  __m512 acc[kPeakChains];
#pragma GCC unroll 12
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < kPeakChains; ++i) s = _mm512_add_ps(s, acc[i]);
  float lanes[kLanes];
  _mm512_storeu_ps(lanes, s);
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

}  // namespace

const MicroKernels& avx512_microkernels() {
  static constexpr MicroKernels kernels{
      "avx512", kMr, kNr, tile, fma_loop, 2 * kLanes * kPeakChains, transpose_avx2};
  return kernels;
}

}  // namespace kiln::runtime::gemm_detail
