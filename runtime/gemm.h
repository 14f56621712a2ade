// Row-major GEMM on kiln's thread arena: C = op(A) * op(B) (or C += ...), where op(X) is X or
// its transpose. Floating-point types run Eigen's own GEMM kernel (single-threaded per call,
// EIGEN_DONT_PARALLELIZE); kiln splits C into blocks and runs them as tasks on its TBB arena.
//
// Determinism: the split of C (GemmPlan) depends only on (m, n, k) and the machine's hardware
// thread count, never on kiln's thread setting, and every block is one single-threaded Eigen
// GEMM (whose own blocking depends on the machine's cache sizes). So gemm() returns
// bitwise-identical results on 1 or N threads. gemm_serial() computes C as one block and may
// differ from gemm() in the last bits (different blocking), but is itself deterministic.
// Integer types use a simple exact loop (wrapping arithmetic, like numpy).
#pragma once

#include <cstdint>

namespace kiln::runtime {

// How gemm() splits C: `blocks` slabs of `step` rows (by_rows) or columns (the last may be
// shorter). blocks == 1 means one single-threaded GEMM on the calling thread.
struct GemmPlan {
  bool by_rows = true;
  int64_t blocks = 1;
  int64_t step = 0;
};

// Below this many flops (2*m*n*k) a GEMM is never split (measured: see gemm.cc).
inline constexpr int64_t kGemmParallelMinFlops = int64_t{1} << 20;  // ~ 2 * 80^3

// The fixed split gemm() uses for an m x n x k product (sizes and hardware only).
GemmPlan plan_gemm(int64_t m, int64_t n, int64_t k);

// C[m, n] = op(A) * op(B) (accumulate: C += ...). A is m x k (k x m stored if trans_a) with
// row stride lda; B is k x n (n x k stored if trans_b) with row stride ldb; C has row stride
// ldc. Any of m, n, k may be 0 (k == 0 gives zeros, or leaves C unchanged when accumulating).
// C must not overlap A or B. Throws kiln::Error on negative sizes or too-small strides.
// Instantiated for float, double, int32_t, int64_t and uint8_t.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate = false);

// Same contract, computed as one block on the calling thread (for callers that parallelise
// over many independent products themselves).
template <typename T>
void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate = false);

}  // namespace kiln::runtime
