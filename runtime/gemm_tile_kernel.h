// The microkernel templates shared by the ISA files (gemm_microkernel_avx512.cc, _avx2.cc),
// written once over an ISA traits class; each ISA file includes this after <immintrin.h>,
// <cstdint> and gemm_microkernel.h and defines its traits first. Everything here has internal
// linkage (an anonymous namespace), so each file's copy is compiled for its own ISA and none is
// shared with code compiled for another (gemm_microkernel.h). Contract: gemm_microkernel.h.
//
// Traits `Isa`: Vec; Mask; kLanes; kMr; zero(); broadcast(const float*); fma(a, b, c) = a*b+c;
// add(a, b); load(p); store(p, v); mask(cols, v) (the lanes of vector v below column `cols`);
// load(p, mask) (zeros elsewhere, nothing read there); store(p, mask, v) (nothing written
// elsewhere); sum(v) (the lanes added).
#pragma once

namespace kiln::runtime::gemm_detail {
namespace {

// R rows, NV vectors of columns; Masked: the last columns are partial (masked stores, and
// masked loads of B unless it is padded); PackedA: A is a packed panel (or A^T's rows read in
// place, lda_t), else rows at lda; CopyB: the B rows read are also stored at t.b_copy, 2 vectors
// (nr floats) apart.
//
// B rows a copying tile prefetches ahead of the one it reads: its B is in place, one row per
// 4 KiB page for the wide B it copies, where the hardware prefetchers restart (measured:
// docs/benchmarks.md, "GEMM engine").
constexpr int64_t kCopyAhead = 16;

template <class Isa, int R, int NV, bool Masked, bool PackedA, bool CopyB>
void tile_kernel(const MicroTile& t) {
  using Vec = typename Isa::Vec;
  constexpr int L = Isa::kLanes;
  Vec acc[R][NV];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = Isa::zero();
  typename Isa::Mask mask[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) mask[v] = Isa::mask(Masked ? t.cols : NV * L, v);
  const bool masked_loads = Masked && !t.b_padded;
  const float* a = t.a;
  const float* b = t.b;
  const int64_t ldb = t.ldb;
  float* b_copy = t.b_copy;
  // Unpacked A: row i at a + i * lda (a advances along k); packed: a advances by R per step
  // (by lda_t: a stored A^T read in place).
  const int64_t lda = PackedA ? 1 : t.lda, a_step = PackedA ? (t.lda_t > 0 ? t.lda_t : R) : 1;
  auto step = [&](const Vec* bv) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const Vec ai = Isa::broadcast(a + i * lda);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = Isa::fma(ai, bv[v], acc[i][v]);
    }
  };
  // Runs of k steps (one of kc unless segmented), A jumping after each.
  auto steps = [&]<bool MaskedB>() {
    int64_t left = t.kc, run = t.seg_len > 0 ? t.seg_first : t.kc;
    while (left > 0) {
      const int64_t n = run < left ? run : left;
      for (int64_t p = 0; p < n; ++p, a += a_step, b += ldb) {
        Vec bv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v)
          bv[v] = MaskedB ? Isa::load(b + v * L, mask[v]) : Isa::load(b + v * L);
        if constexpr (CopyB) {
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) {
            Isa::store(b_copy + v * L, bv[v]);
            __builtin_prefetch(b + kCopyAhead * ldb + v * L);
          }
          b_copy += 2 * L;
        }
        step(bv);
      }
      left -= n;
      a += t.seg_jump;
      run = t.seg_len;
    }
  };
  if (masked_loads)
    steps.template operator()<true>();
  else
    steps.template operator()<false>();
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    float* c = t.c + i * t.ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      Vec r = acc[i][v];
      if (Masked) {
        if (t.accumulate) r = Isa::add(Isa::load(c + v * L, mask[v]), r);
        Isa::store(c + v * L, mask[v], r);
      } else {
        if (t.accumulate) r = Isa::add(Isa::load(c + v * L), r);
        Isa::store(c + v * L, r);
      }
    }
  }
}

using TileFn = void (*)(const MicroTile&);

template <class Isa, int R, bool PackedA, bool CopyB>
TileFn pick_vectors(int nv, bool masked) {
  if (nv == 1)
    return masked ? tile_kernel<Isa, R, 1, true, PackedA, CopyB>
                  : tile_kernel<Isa, R, 1, false, PackedA, CopyB>;
  return masked ? tile_kernel<Isa, R, 2, true, PackedA, CopyB>
                : tile_kernel<Isa, R, 2, false, PackedA, CopyB>;
}

// The kernel for `rows` (1 .. R) rows.
template <class Isa, int R>
TileFn pick_rows(int rows, int nv, bool masked, bool packed_a, bool copy_b) {
  if (rows == R) {
    if (copy_b)
      return packed_a ? pick_vectors<Isa, R, true, true>(nv, masked)
                      : pick_vectors<Isa, R, false, true>(nv, masked);
    return packed_a ? pick_vectors<Isa, R, true, false>(nv, masked)
                    : pick_vectors<Isa, R, false, false>(nv, masked);
  }
  if constexpr (R > 1) return pick_rows<Isa, R - 1>(rows, nv, masked, packed_a, copy_b);
  return nullptr;
}

// MicroKernels::tile: one or two vectors of columns, any rows up to kMr.
template <class Isa>
void tile(const MicroTile& t) {
  const int nv = t.cols > Isa::kLanes ? 2 : 1;
  const bool masked = t.cols != nv * Isa::kLanes;
  if (TileFn fn = pick_rows<Isa, Isa::kMr>(t.rows, nv, masked, t.lda == 0, t.b_copy != nullptr))
    fn(t);
}

// MicroKernels::fma_loop: 12 independent FMA chains, enough to cover a 4-cycle latency on two
// FMA pipes.
constexpr int kPeakChains = 12;
template <class Isa>
float fma_loop(int64_t iterations) {
  using Vec = typename Isa::Vec;
  const float one = 0.999999f, tiny = 1e-7f;
  // Distinct starting values: equal chains would be merged into one by the compiler.
  Vec acc[kPeakChains];
#pragma GCC unroll 12
  for (int i = 0; i < kPeakChains; ++i) {
    const float start = float(i);
    acc[i] = Isa::broadcast(&start);
  }
  const Vec x = Isa::broadcast(&one), y = Isa::broadcast(&tiny);
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kPeakChains; ++i) acc[i] = Isa::fma(acc[i], x, y);
  }
  Vec s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < kPeakChains; ++i) s = Isa::add(s, acc[i]);
  return Isa::sum(s);
}

template <class Isa>
constexpr int32_t fma_loop_flops() {
  return 2 * Isa::kLanes * kPeakChains;
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
