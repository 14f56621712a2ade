// GEMM: Eigen's single-threaded GEMM on row-major maps (no copies; transposes are views),
// split into a fixed number of blocks of C that run as tasks on kiln's arena. Integer types use
// an exact i-k-j loop with wrapping arithmetic.
//
// Split policy (plan_gemm), measured with f32 on a 2-core AMD EPYC (Zen 3, AVX2) VM:
//  - a cube split in two column halves at 2 threads: 64^3 (0.5 MFLOP, ~10 us) breaks even
//    (48 vs 49 GFLOP/s), 80^3 gains 1.6x, 128^3 1.5x (90 vs 60 GFLOP/s). So products below
//    kGemmParallelMinFlops (2^20, ~2*80^3) stay serial and blocks carry >= kMinBlockFlops (2^19);
//  - C is split along its larger dimension: a block of rows re-packs B, a block of columns
//    re-packs A, so splitting the larger dimension re-packs the smaller operand;
//  - the block count is a power of two (even load on 2, 4, 8... threads), each block at least
//    kMinBlockExtent rows/columns, at most max_blocks(): twice the machine's hardware threads,
//    clamped to [4, 16]. Each block re-packs an operand, which costs single-thread speed: at 1
//    thread, 4 column blocks of 512x1024x1024 run ~5% slower than one Eigen call, 8 ~9%. The
//    cap is a property of the machine (like Eigen's cache-size blocking), never of
//    set_num_threads/KILN_NUM_THREADS, so results stay bitwise equal across thread counts.
#include "runtime/gemm.h"

#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>
#include <thread>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "runtime/threading.h"

namespace kiln::runtime {
namespace {

int64_t max_blocks() {
  static const int64_t cap =
      std::clamp<int64_t>(2 * int64_t(std::thread::hardware_concurrency()), 4, 16);
  return cap;
}
constexpr int64_t kMinBlockFlops = int64_t{1} << 19;
constexpr int64_t kMinBlockExtent = 32;
constexpr int64_t kBlockQuantum = 16;  // block starts stay 64-byte aligned for f32 rows of C

void check_args(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                int64_t ldb, int64_t ldc) {
  auto fail = [&](const char* what) {
    throw Error(
        fmt::format("gemm: {} (trans_a={}, trans_b={}, m={}, n={}, k={}, lda={}, ldb={}, "
                    "ldc={})",
                    what, trans_a, trans_b, m, n, k, lda, ldb, ldc));
  };
  if (m < 0 || n < 0 || k < 0) fail("sizes must be >= 0");
  int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  if (lda < a_cols) fail("lda is smaller than a row of A");
  if (ldb < b_cols) fail("ldb is smaller than a row of B");
  if (ldc < n) fail("ldc is smaller than a row of C");
}

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using MutMap = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// One single-threaded Eigen GEMM. op(A) is a map of the stored matrix or its transpose view.
template <typename T>
void eigen_block(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                 const T* b, int64_t ldb, T* c, int64_t ldc, bool acc) {
  MutMap<T> cm(c, m, n, Eigen::OuterStride<>(ldc));
  auto run = [&](const auto& am, const auto& bm) {
    if (acc)
      cm.noalias() += am * bm;
    else
      cm.noalias() = am * bm;
  };
  auto with_b = [&](const auto& am) {
    if (tb)
      run(am, ConstMap<T>(b, n, k, Eigen::OuterStride<>(ldb)).transpose());
    else
      run(am, ConstMap<T>(b, k, n, Eigen::OuterStride<>(ldb)));
  };
  if (ta)
    with_b(ConstMap<T>(a, k, m, Eigen::OuterStride<>(lda)).transpose());
  else
    with_b(ConstMap<T>(a, m, k, Eigen::OuterStride<>(lda)));
}

// Exact integer product of rows [r0, r1) of C, wrapping on overflow (computed unsigned).
// `bt` is B as a k x n row-major matrix with row stride ldbt (B^T is copied there first).
template <typename T>
void int_rows(bool ta, int64_t r0, int64_t r1, int64_t n, int64_t k, const T* a, int64_t lda,
              const T* bt, int64_t ldbt, T* c, int64_t ldc, bool acc) {
  using U = std::make_unsigned_t<T>;
  for (int64_t i = r0; i < r1; ++i) {
    T* row = c + i * ldc;
    if (!acc) std::fill(row, row + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      const U av = U(ta ? a[p * lda + i] : a[i * lda + p]);
      const T* brow = bt + p * ldbt;
      for (int64_t j = 0; j < n; ++j) row[j] = T(U(U(row[j]) + U(av * U(brow[j]))));
    }
  }
}

template <typename T>
void int_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
              const T* b, int64_t ldb, T* c, int64_t ldc, bool acc, bool parallel) {
  std::vector<T> tmp;
  const T* bk = b;
  int64_t ldbk = ldb;
  if (tb) {  // make the inner loop contiguous
    tmp.resize(size_t(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) tmp[size_t(p * n + j)] = b[j * ldb + p];
    bk = tmp.data();
    ldbk = n;
  }
  auto rows = [&](int64_t r0, int64_t r1) {
    int_rows(ta, r0, r1, n, k, a, lda, bk, ldbk, c, ldc, acc);
  };
  if (!parallel) return rows(0, m);
  // Integer sums are exact, so any split gives the same result.
  int64_t row_work = std::max<int64_t>(n * k, 1);
  parallel_for(m, std::max<int64_t>(1, kMinBlockFlops / 2 / row_work), rows);
}

template <typename T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc, bool acc, bool parallel) {
  check_args(ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!acc)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  if constexpr (std::is_integral_v<T>) {
    int_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc, parallel);
  } else {
    GemmPlan plan = parallel ? plan_gemm(m, n, k) : GemmPlan{true, 1, m};
    if (plan.blocks == 1) return eigen_block(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
    parallel_tasks(plan.blocks, [&](int64_t i) {
      const int64_t extent = plan.by_rows ? m : n;
      const int64_t s = i * plan.step, len = std::min(extent, s + plan.step) - s;
      if (plan.by_rows) {
        // Rows s.. of op(A): rows of A, or columns of the stored A^T.
        eigen_block(ta, tb, len, n, k, ta ? a + s : a + s * lda, lda, b, ldb, c + s * ldc, ldc,
                    acc);
      } else {
        // Columns s.. of op(B): columns of B, or rows of the stored B^T.
        eigen_block(ta, tb, m, len, k, a, lda, tb ? b + s * ldb : b + s, ldb, c + s, ldc, acc);
      }
    });
  }
}

}  // namespace

GemmPlan plan_gemm(int64_t m, int64_t n, int64_t k) {
  GemmPlan plan;
  plan.by_rows = m >= n;
  const int64_t extent = plan.by_rows ? m : n;
  plan.step = extent;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  if (flops < double(kGemmParallelMinFlops)) return plan;
  int64_t blocks = std::min<int64_t>(max_blocks(), int64_t(flops / double(kMinBlockFlops)));
  blocks = std::min(blocks, extent / kMinBlockExtent);
  if (blocks < 2) return plan;
  while (blocks & (blocks - 1)) blocks &= blocks - 1;  // round down to a power of two
  int64_t step = (extent + blocks - 1) / blocks;
  step = (step + kBlockQuantum - 1) / kBlockQuantum * kBlockQuantum;
  plan.step = step;
  plan.blocks = (extent + step - 1) / step;
  return plan;
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  gemm_impl(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate, true);
}

template <typename T>
void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  gemm_impl(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate, false);
}

#define KILN_GEMM_INSTANTIATE(T)                                                                   \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*,        \
                        int64_t, T*, int64_t, bool);                                               \
  template void gemm_serial<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*, \
                               int64_t, T*, int64_t, bool);
KILN_GEMM_INSTANTIATE(float)
KILN_GEMM_INSTANTIATE(double)
KILN_GEMM_INSTANTIATE(int32_t)
KILN_GEMM_INSTANTIATE(int64_t)
KILN_GEMM_INSTANTIATE(uint8_t)
#undef KILN_GEMM_INSTANTIATE

}  // namespace kiln::runtime
