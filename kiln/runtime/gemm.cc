// GEMM entry points: checks, empty products, and the choice between kiln's float32 engine
// (gemm_engine.h), Eigen's GEMM (float64, or float32 without kiln's kernels) and the exact
// integer loop.
//
// Eigen's split (eigen_plan), measured with f32 on a 2-core AMD EPYC (Zen 3, AVX2) VM:
//  - a cube split in two column halves at 2 threads: 64^3 (0.5 MFLOP, ~10 us) breaks even
//    (48 vs 49 GFLOP/s), 80^3 gains 1.6x, 128^3 1.5x (90 vs 60 GFLOP/s). So products below
//    kGemmParallelMinFlops (2^20, ~2*80^3) stay serial and blocks carry >= kMinBlockFlops (2^19);
//  - C is split along its larger dimension: a block of rows re-packs B, a block of columns
//    re-packs A, so splitting the larger dimension re-packs the smaller operand;
//  - the block count is a power of two (even load on 2, 4, 8... threads), each block at least
//    kMinBlockExtent rows/columns, at most max_blocks(): twice the machine's hardware threads,
//    clamped to [4, 16]. The cap is a property of the machine (like Eigen's cache-size
//    blocking), never of set_num_threads/KILN_NUM_THREADS, so results stay bitwise equal across
//    thread counts. kiln's engine needs no such care: any split gives the same bits.
#include "kiln/runtime/gemm.h"

#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <thread>
#include <type_traits>
#include <vector>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_plan_log.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/gemm_widen.h"
#include "kiln/runtime/loop_invariants.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

// How Eigen's path splits C: `blocks` slabs of `step` rows (by_rows) or columns (the last may
// be shorter). blocks == 1 means one single-threaded GEMM on the calling thread.
struct EigenPlan {
  bool by_rows = true;
  int64_t blocks = 1;
  int64_t step = 0;
};

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

// The fixed split of Eigen's path (sizes and hardware only).
EigenPlan eigen_plan(int64_t m, int64_t n, int64_t k) {
  EigenPlan plan;
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
void eigen_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                const T* b, int64_t ldb, T* c, int64_t ldc, bool acc, bool parallel) {
  EigenPlan plan = parallel ? eigen_plan(m, n, k) : EigenPlan{true, 1, m};
  if (plan.blocks == 1) return eigen_block(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc);
  parallel_tasks(plan.blocks, [&](int64_t i) {
    const int64_t extent = plan.by_rows ? m : n;
    const int64_t s = i * plan.step, len = std::min(extent, s + plan.step) - s;
    if (plan.by_rows) {
      // Rows s.. of op(A): rows of A, or columns of the stored A^T.
      eigen_block(ta, tb, len, n, k, ta ? a + s : a + s * lda, lda, b, ldb, c + s * ldc, ldc, acc);
    } else {
      // Columns s.. of op(B): columns of B, or rows of the stored B^T.
      eigen_block(ta, tb, m, len, k, a, lda, tb ? b + s * ldb : b + s, ldb, c + s, ldc, acc);
    }
  });
}

// kiln's microkernels for float32, if any are active; nullptr otherwise.
template <typename T>
const gemm_detail::MicroKernels* engine_for() {
  if constexpr (std::is_same_v<T, float>)
    return gemm_detail::active_microkernels();
  else
    return nullptr;
}

gemm_detail::SgemmArgs sgemm_args(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                                  int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                                  bool acc) {
  return {ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc};
}

// The loop scope in which B (k x n, n x k stored if tb; float32 or bf16 elements) stays
// unchanged: the calling thread runs a loop that passes B's buffer through
// (runtime/loop_invariants.h); else null.
template <typename E>
LoopInvariantScope* invariant_b(bool tb, int64_t n, int64_t k, const E* b, int64_t ldb) {
  const int64_t rows = tb ? n : k, cols = tb ? k : n;
  return LoopInvariantScope::holding(b, size_t((rows - 1) * ldb + cols) * sizeof(E));
}

// The plan of `shape` on `mk` with the published blocking: make_gemm_plan's, remembered per
// thread in a table indexed by the shape's hash. A plan is a function of the kernel set, the
// shape and the blocking alone, and published blocking is never changed or freed (a new table
// is a new GemmParams object), so the params' address keys the entry with the other two.
// Small products run thousands of times per op (attention tiles of every length, one image of
// a convolution): planning each anew cost about a quarter of a 16 x 32 x 16 product.
gemm_detail::GemmPlan planned(const gemm_detail::MicroKernels& mk,
                              const gemm_detail::GemmShape& shape) {
  struct Entry {
    const gemm_detail::MicroKernels* mk = nullptr;
    const gemm_detail::GemmParams* params = nullptr;
    gemm_detail::GemmShape shape;
    gemm_detail::GemmPlan plan;
  };
  constexpr size_t kEntries = 64;
  thread_local std::array<Entry, kEntries> memo;
  const gemm_detail::GemmParams& params = gemm_detail::gemm_params(mk, shape);
  Entry& e = memo[shape.hash() % kEntries];
  if (e.mk != &mk || e.params != &params || !(e.shape == shape))
    e = Entry{&mk, &params, shape, gemm_detail::make_gemm_plan(mk, shape, params)};
  return e.plan;
}

// The engine's plan for a float32 product on `threads` threads, and its run (logged and
// profiled: gemm_plan_log.h).
gemm_detail::GemmPlan float_plan(const gemm_detail::MicroKernels& mk, bool ta, bool tb, int64_t m,
                                 int64_t n, int64_t k, int threads, bool epilogue,
                                 bool b_invariant) {
  gemm_detail::GemmShape shape{m, n, k, ta, tb, threads, epilogue};
  shape.b_invariant = b_invariant;
  return planned(mk, shape);
}

// `loop`: where a kPrepacked plan's B is packed once (the scope invariant_b found).
void run_float(const gemm_detail::MicroKernels& mk, const gemm_detail::GemmPlan& plan,
               gemm_detail::SgemmArgs args, const gemm_detail::RowsDone* on_rows,
               LoopInvariantScope* loop = nullptr) {
  gemm_detail::GemmPlanScope scope(plan);
  if (plan.b == gemm_detail::BMode::kPrepacked) {
    KILN_ASSERT(loop != nullptr, "gemm: a plan with B packed once per loop outside a loop");
    const void* b = args.b != nullptr ? static_cast<const void*>(args.b) : args.b16;
    const PackedBKey key{b,       args.ldb,        args.k,  args.n,
                         args.tb, plan.kernel->nr, plan.kc, args.b_rounds};
    args.packed_b =
        loop->packed_b(key, size_t(gemm_detail::packed_b_floats(plan)),
                       [&](float* out) { gemm_detail::pack_b_once(mk, plan, args, out); });
  }
  gemm_detail::run_gemm(mk, plan, args, on_rows);
}

// The task grid a float32 product gets on kiln's threads (before any transposition).
gemm_detail::GemmGrid float_grid(const gemm_detail::MicroKernels& mk, int64_t m, int64_t n,
                                 int64_t k, bool ta, bool tb, bool whole_rows) {
  const int threads = num_threads();
  const gemm_detail::GemmShape shape{m, n, k, ta, tb, threads, whole_rows};
  const gemm_detail::GemmParams& p = gemm_detail::gemm_params(mk, shape);
  return gemm_detail::plan_grid(mk.shapes[p.kernel], p, m, n, k, threads, whole_rows);
}

// Handles empty products; returns true if nothing is left to compute.
template <typename T>
bool trivial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb, T* c,
             int64_t ldc, bool acc) {
  check_args(ta, tb, m, n, k, lda, ldb, ldc);
  if (m == 0 || n == 0) return true;
  if (k == 0) {
    if (!acc)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return true;
  }
  return false;
}

template <typename T>
void gemm_impl(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc, bool acc, bool parallel) {
  if (trivial(ta, tb, m, n, k, lda, ldb, c, ldc, acc)) return;
  if constexpr (std::is_integral_v<T>) {
    int_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc, parallel);
  } else {
    if constexpr (std::is_same_v<T, float>) {
      if (const gemm_detail::MicroKernels* mk = engine_for<T>()) {
        LoopInvariantScope* loop = invariant_b(tb, n, k, b, ldb);
        const gemm_detail::GemmPlan plan =
            float_plan(*mk, ta, tb, m, n, k, parallel ? num_threads() : 1, false, loop != nullptr);
        return run_float(*mk, plan, sgemm_args(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc),
                         nullptr, loop);
      }
    }
    eigen_gemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, acc, parallel);
  }
}

}  // namespace

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

template <typename T>
int64_t gemm_tasks(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  if (std::is_integral_v<T>) {
    const int64_t row_work = std::max<int64_t>(n * k, 1);
    return std::max<int64_t>(1, m / std::max<int64_t>(1, kMinBlockFlops / 2 / row_work));
  }
  if (const gemm_detail::MicroKernels* mk = engine_for<T>()) {
    const gemm_detail::GemmGrid g = float_grid(*mk, m, n, k, ta, tb, false);
    return g.row_blocks * g.col_blocks;
  }
  return eigen_plan(m, n, k).blocks;
}

template <typename T>
int64_t gemm_row_blocks(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  if (const gemm_detail::MicroKernels* mk = engine_for<T>())
    return float_grid(*mk, m, n, k, ta, tb, true).row_blocks;
  const EigenPlan plan = eigen_plan(m, n, k);
  return plan.by_rows ? plan.blocks : 1;
}

bool gemm_packs_b_by_columns(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  const gemm_detail::MicroKernels* mk = engine_for<float>();
  if (mk == nullptr || m <= 0 || n <= 0 || k <= 0) return false;
  const gemm_detail::GemmPlan plan = float_plan(*mk, ta, tb, m, n, k, num_threads(), false, false);
  return plan.b == gemm_detail::BMode::kPackedBlocks && plan.tasks() > 1;
}

template <typename T>
void gemm_rows(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc,
               const std::function<void(int64_t, int64_t)>& on_rows) {
  if (trivial(ta, tb, m, n, k, lda, ldb, c, ldc, false)) {
    if (m > 0) on_rows(0, m);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (const gemm_detail::MicroKernels* mk = engine_for<T>()) {
      LoopInvariantScope* loop = invariant_b(tb, n, k, b, ldb);
      const gemm_detail::GemmPlan plan =
          float_plan(*mk, ta, tb, m, n, k, num_threads(), true, loop != nullptr);
      return run_float(*mk, plan, sgemm_args(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, false),
                       &on_rows, loop);
    }
  }
  // Eigen: its fixed row split (one block when it would split columns).
  const EigenPlan plan = eigen_plan(m, n, k);
  const int64_t blocks = plan.by_rows ? plan.blocks : 1;
  const int64_t step = blocks == 1 ? m : plan.step;
  parallel_tasks(blocks, [&](int64_t blk) {
    const int64_t r0 = blk * step, r1 = std::min(m, r0 + step);
    if (r0 >= r1) return;
    eigen_block(ta, tb, r1 - r0, n, k, ta ? a + r0 : a + r0 * lda, lda, b, ldb, c + r0 * ldc, ldc,
                false);
    on_rows(r0, r1);
  });
}

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, Bf16Operand a, int64_t lda,
               Bf16Operand b, int64_t ldb, float* c, int64_t ldc, bool parallel,
               const std::function<void(int64_t, int64_t)>* on_rows, bool accumulate) {
  KILN_ASSERT(parallel || on_rows == nullptr, "gemm_bf16: row callbacks need the parallel form");
  KILN_ASSERT(!(accumulate && on_rows), "gemm_bf16: row callbacks see whole products only");
  if (trivial(ta, tb, m, n, k, lda, ldb, c, ldc, accumulate)) {
    if (on_rows && m > 0) (*on_rows)(0, m);
    return;
  }
  static_assert(sizeof(bfloat16) == sizeof(uint16_t));
  const gemm_detail::MicroKernels* pairs = gemm_detail::bf16_kernels_for(m, n, k);
  if (const gemm_detail::MicroKernels* mk = pairs ? pairs : engine_for<float>()) {
    gemm_detail::SgemmArgs args =
        sgemm_args(ta, tb, m, n, k, nullptr, lda, nullptr, ldb, c, ldc, accumulate);
    auto set = [](Bf16Operand x, const float*& f32, const uint16_t*& b16, bool& rounds) {
      rounds = x.rounds_float32;
      if (rounds)
        f32 = static_cast<const float*>(x.data);
      else
        b16 = static_cast<const uint16_t*>(x.data);
    };
    set(a, args.a, args.a16, args.a_rounds);
    set(b, args.b, args.b16, args.b_rounds);
    // (The pair kernels pack B per product: loop is null for them.)
    LoopInvariantScope* loop = nullptr;
    if (mk->k_per_step == 1)
      loop =
          args.b_rounds ? invariant_b(tb, n, k, args.b, ldb) : invariant_b(tb, n, k, args.b16, ldb);
    gemm_detail::GemmShape shape{m, n, k, ta, tb, parallel ? num_threads() : 1, on_rows != nullptr};
    shape.a_bf16 = shape.b_bf16 = true;
    shape.b_invariant = loop != nullptr;
    shape.a_rounded = args.a_rounds;
    shape.b_rounded = args.b_rounds;
    return run_float(*mk, planned(*mk, shape), args, on_rows, loop);
  }
  // Eigen: the operands widened (or rounded) first, then gemm<float>'s own split (the same bits).
  auto widened = [](Bf16Operand x, int64_t rows, int64_t cols, int64_t ld) {
    std::vector<float> w(size_t(rows * cols));
    if (!x.rounds_float32) {
      gemm_detail::widen_bf16_rows(static_cast<const uint16_t*>(x.data), ld, rows, cols, w.data(),
                                   cols);
      return w;
    }
    const auto* f = static_cast<const float*>(x.data);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        w[size_t(i * cols + j)] = bfloat16::from_float(f[i * ld + j]).to_float();
    return w;
  };
  const std::vector<float> wa = ta ? widened(a, k, m, lda) : widened(a, m, k, lda);
  const std::vector<float> wb = tb ? widened(b, n, k, ldb) : widened(b, k, n, ldb);
  const int64_t wlda = ta ? m : k, wldb = tb ? k : n;
  eigen_gemm(ta, tb, m, n, k, wa.data(), wlda, wb.data(), wldb, c, ldc, accumulate, parallel);
  if (on_rows) (*on_rows)(0, m);
}

#define KILN_GEMM_INSTANTIATE(T)                                                                   \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*,        \
                        int64_t, T*, int64_t, bool);                                               \
  template void gemm_serial<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*, \
                               int64_t, T*, int64_t, bool);                                        \
  template int64_t gemm_tasks<T>(int64_t, int64_t, int64_t, bool, bool);
KILN_GEMM_INSTANTIATE(float)
KILN_GEMM_INSTANTIATE(double)
KILN_GEMM_INSTANTIATE(int32_t)
KILN_GEMM_INSTANTIATE(int64_t)
KILN_GEMM_INSTANTIATE(uint8_t)
#undef KILN_GEMM_INSTANTIATE

#define KILN_GEMM_ROWS_INSTANTIATE(T)                                                             \
  template void gemm_rows<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t, const T*,  \
                             int64_t, T*, int64_t, const std::function<void(int64_t, int64_t)>&); \
  template int64_t gemm_row_blocks<T>(int64_t, int64_t, int64_t, bool, bool);
KILN_GEMM_ROWS_INSTANTIATE(float)
KILN_GEMM_ROWS_INSTANTIATE(double)
#undef KILN_GEMM_ROWS_INSTANTIATE

}  // namespace kiln::runtime
