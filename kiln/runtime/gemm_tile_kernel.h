// The microkernel templates shared by the ISA files (gemm_microkernel_avx512.cc, _avx2.cc),
// written once over an ISA traits class; each ISA file includes this after <immintrin.h>,
// <cstdint> and gemm_microkernel.h and defines its traits first. Everything here has internal
// linkage (an anonymous namespace), so each file's copy is compiled for its own ISA and none is
// shared with code compiled for another (gemm_microkernel.h). Contract: gemm_microkernel.h.
//
// Traits `Isa`: Vec; Mask; kLanes; zero(); broadcast(const float*); fma(a, b, c) = a*b+c;
// add(a, b); load(p); store(p, v); mask(cols, v) (the lanes of vector v below column `cols`);
// load(p, mask) (zeros elsewhere, nothing read there); store(p, mask, v) (nothing written
// elsewhere); sum(v) (the lanes added).
#pragma once

namespace kiln::runtime::gemm_detail {
namespace {

// R rows, NV vectors of columns; Masked: the last columns are partial (masked loads and stores
// of C, masked loads of B unless it is padded); PackedA: A is a packed panel (or A^T's rows
// read directly, lda_t), else rows at lda; CopyB: the B rows read are also stored at t.b_copy,
// t.b_copy_ld floats apart; OneLineRows: each B row is one cache line (one prefetch per step).
// Every step of a tile of several vectors prefetches the B row t.b_ahead rows ahead into L1: B
// streams through L1 from L2 (or from memory, one row per 4 KiB page for a wide B read directly,
// where the hardware prefetchers restart), and at two vector FMAs per cycle the hardware
// prefetchers alone leave the FMAs waiting.
// The next tile's C rows (t.c_next) are prefetched at the start, so that their loads (the chain
// continues from C) find them in cache. The k steps of a tile: runs of steps (one of kc unless
// segmented), A jumping after each; unrolled by 4, so that the loop's counter and pointer updates
// take fewer of the issue slots the FMAs and loads need (the order of each element's FMA chain is
// unchanged). Pointers are passed by value so that they stay in registers.
// A tile of one vector of columns issues no prefetches (of B or of the next A panel): each of
// its FMAs needs a load of its own (A's broadcast), so its loads, not its FMAs, set its pace, and
// two prefetches per step take load slots from them; its B rows are one vector each, a stream
// the hardware prefetchers follow. (A direct convolution's input gradient of 16 channels, 12 x 16
// tiles, ran 1.05-1.08x faster without them on a Zen 5 VM: docs/benchmarks.md.)
template <class Isa, int R, int NV, bool MaskedB, bool PackedA, bool CopyB, bool OneLineRows>
__attribute__((always_inline)) inline void k_steps(typename Isa::Vec (&acc)[R][NV],
                                                   const typename Isa::Mask (&mask)[NV],
                                                   const MicroTile& t) {
  using Vec = typename Isa::Vec;
  constexpr int L = Isa::kLanes;
  constexpr bool kPrefetch = NV > 1;
  const float* a = t.a;
  const float* b = t.b;
  float* b_copy = t.b_copy;
  const int64_t ldb = t.ldb, ahead = int64_t(t.b_ahead) * t.ldb;
  // Unpacked A: row i at a + i * lda (a advances along k); packed: a advances by R per step
  // (by lda_t: a stored A^T read directly).
  const int64_t lda = PackedA ? 1 : t.lda, a_step = PackedA ? (t.lda_t > 0 ? t.lda_t : R) : 1;
  // Rows of A read directly: the next panel's rows (R rows on, lda apart, contiguous when
  // lda is the row length) stream in a line per step while this panel's tile runs.
  const float* a_next = PackedA ? nullptr : t.a + R * lda;
  // A tile of one vector with more than kRowGroup rows read directly: rows from kHalf on are
  // read from a pointer of their own, kHalf rows on, so that both halves address their rows with
  // the same offsets i * lda (i < kHalf). With one base pointer the compiler keeps an offset per
  // row, more than the general registers hold from 8 rows on, and moves them in from vector
  // registers in every step (a 14-row tile: 5 such moves per 14 FMAs, whose loads already set
  // its pace). Tiles of several vectors keep one pointer: their prefetch pointers take the
  // registers a second base would free (the loop counter went to a vector register instead).
  constexpr int kRowGroup = 7;
  constexpr int kHalf = !PackedA && NV == 1 && R > kRowGroup ? (R + 1) / 2 : R;
  const float* a_hi = a + kHalf * lda;
  asm("" : "+r"(a_hi));  // its own pointer, not a + an offset the compiler keeps
  int64_t left = t.kc, run = t.seg_len > 0 ? t.seg_first : t.kc;
  while (left > 0) {
    const int64_t n = run < left ? run : left;
#pragma GCC unroll 4
    for (int64_t p = 0; p < n; ++p, a += a_step, a_hi += a_step, b += ldb) {
      if constexpr (!PackedA && kPrefetch) {
        __builtin_prefetch(a_next, 0, 2);
        a_next += 16;
      }
      Vec bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        bv[v] = MaskedB ? Isa::load(b + v * L, mask[v]) : Isa::load(b + v * L);
      if constexpr (kPrefetch) {
#pragma GCC unroll 4
        for (int v = 0; v < NV; v += OneLineRows ? NV : 1) __builtin_prefetch(b + ahead + v * L);
      }
      if constexpr (CopyB) {
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) Isa::store(b_copy + v * L, bv[v]);
        b_copy += t.b_copy_ld;
      }
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) {
        const Vec ai = Isa::broadcast(i < kHalf ? a + i * lda : a_hi + (i - kHalf) * lda);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = Isa::fma(ai, bv[v], acc[i][v]);
      }
    }
    left -= n;
    a += t.seg_jump;
    a_hi += t.seg_jump;
    run = t.seg_len;
  }
}

constexpr size_t kCacheLine = 64;

template <class Isa, int R, int NV, bool Masked, bool PackedA, bool CopyB>
void tile_kernel(const MicroTile& t) {
  using Vec = typename Isa::Vec;
  constexpr int L = Isa::kLanes;
  typename Isa::Mask mask[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) mask[v] = Isa::mask(Masked ? t.cols : NV * L, v);
  if (t.c_next != nullptr) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) __builtin_prefetch(t.c_next + i * t.ldc + v * L, 1);
  }
  // The chain of every element starts from C (accumulate) or zero.
  Vec acc[R][NV];
  if (t.accumulate) {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[i][v] = Masked ? Isa::load(t.c + i * t.ldc + v * L, mask[v])
                           : Isa::load(t.c + i * t.ldc + v * L);
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = Isa::zero();
  }
  // B's rows of one cache line each (a packed B of 16 floats per row, 64-byte aligned): one
  // prefetch per row instead of one per vector.
  constexpr bool kLineRows = NV * L * sizeof(float) == kCacheLine && NV > 1;
  if (Masked && !t.b_padded)
    k_steps<Isa, R, NV, true, PackedA, CopyB, false>(acc, mask, t);
  else if (kLineRows && t.b_padded && t.ldb * sizeof(float) == kCacheLine &&
           reinterpret_cast<uintptr_t>(t.b) % kCacheLine == 0)
    k_steps<Isa, R, NV, false, PackedA, CopyB, kLineRows>(acc, mask, t);
  else
    k_steps<Isa, R, NV, false, PackedA, CopyB, false>(acc, mask, t);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    float* c = t.c + i * t.ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      if (Masked)
        Isa::store(c + v * L, mask[v], acc[i][v]);
      else
        Isa::store(c + v * L, acc[i][v]);
    }
  }
}

template <class Isa, int R, int NV, bool PackedA, bool CopyB>
TileFn pick_masked(bool masked) {
  return masked ? tile_kernel<Isa, R, NV, true, PackedA, CopyB>
                : tile_kernel<Isa, R, NV, false, PackedA, CopyB>;
}

// The kernel for `nv` (1 .. NVMax) vectors of columns.
template <class Isa, int R, int NVMax, bool PackedA, bool CopyB>
TileFn pick_vectors(int nv, bool masked) {
  if (nv == NVMax) return pick_masked<Isa, R, NVMax, PackedA, CopyB>(masked);
  if constexpr (NVMax > 1) return pick_vectors<Isa, R, NVMax - 1, PackedA, CopyB>(nv, masked);
  return nullptr;
}

// The kernel for `rows` (1 .. R) rows.
template <class Isa, int R, int NVMax>
TileFn pick_rows(int rows, int nv, bool masked, bool packed_a, bool copy_b) {
  if (rows == R) {
    if (copy_b)
      return packed_a ? pick_vectors<Isa, R, NVMax, true, true>(nv, masked)
                      : pick_vectors<Isa, R, NVMax, false, true>(nv, masked);
    return packed_a ? pick_vectors<Isa, R, NVMax, true, false>(nv, masked)
                    : pick_vectors<Isa, R, NVMax, false, false>(nv, masked);
  }
  if constexpr (R > 1) return pick_rows<Isa, R - 1, NVMax>(rows, nv, masked, packed_a, copy_b);
  return nullptr;
}

// MicroKernel::select of the MR x (NVMax vectors) shape.
template <class Isa, int MR, int NVMax>
TileFn select(int32_t rows, int32_t cols, bool packed_a, bool copy_b) {
  const int nv = (cols + Isa::kLanes - 1) / Isa::kLanes;
  const bool masked = cols != nv * Isa::kLanes;
  return pick_rows<Isa, MR, NVMax>(rows, nv, masked, packed_a, copy_b);
}

// MicroKernel::tile of the shape: any rows up to MR, any columns up to NVMax vectors.
template <class Isa, int MR, int NVMax>
void tile(const MicroTile& t) {
  if (TileFn fn = select<Isa, MR, NVMax>(t.rows, t.cols, t.lda == 0, t.b_copy != nullptr)) fn(t);
}

template <class Isa, int MR, int NVMax>
constexpr MicroKernel tile_shape(const char* name) {
  return MicroKernel{name, MR, NVMax * Isa::kLanes, tile<Isa, MR, NVMax>, select<Isa, MR, NVMax>};
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
