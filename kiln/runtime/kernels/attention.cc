// Eager kernels of the fused attention ops (ir/ops.def, ir/shape_rules_attention.cc).
//
// attention: out = softmax(scale * q k^T, masked) v per batch entry. A masked score (mask
// false, or j > i when causal) is -1e9, as MultiHeadAttention's `where` sets it, so a row whose
// keys are all masked attends to every key uniformly. Each task owns one block of query rows
// of one batch entry and walks the keys in blocks with an online softmax (running max m,
// running sum l, accumulator O rescaled by exp(m_old - m_new) when the max grows): only a
// [query block, key block] tile of scores exists at a time, never [Tq, Tv]. q is scaled first
// (as q * scale then q k^T in the unfused ops). The products are runtime::gemm_serial calls
// (kiln's GEMM engine for float32), the
// exponentials Eigen's vectorized exp (exact far below the max: exact_exp.h).
//
// Causal skipping: a key block whose keys are all after the block's last query row is not
// visited. Its scores are all -1e9, so its weights exp(-1e9 - m) underflow whenever the row max
// m exceeds -1e9 by more than the exponential's range (+0, as the visited masked keys get:
// exact_exp.h); the kernel checks that for every row (-1e9 - m below exact_exp::kExpZero in the
// computation's type) and visits every key of the block otherwise (a row with no unmasked key,
// or scores near -1e9). Causal attention also takes smaller query blocks (AttentionBlocks,
// attention.h: measured per machine by `kiln tune`), so that less of the masked triangle is
// computed, and within a visited tile the causally masked scores of such a row get their weight
// 0 without an exponential (exp_row).
//
// attention_grad: dq, dk, dv packed as ir/shape_rules_attention.cc describes. Per block of
// query rows the scores of every visited key are computed again (one GEMM, as flash attention
// 2's backward does), normalised with their own row max and sum (so no log-sum-exp has to be
// kept from the forward pass), then dv += P^T dout, dP = dout v^T, dS = P (dP - rowsum(P dP))
// (zero where masked: `where` passes no gradient to a masked score), dq = scale dS k,
// dk += dS^T (scale q). The [query block, Tv] tiles of P and dP are the only scratch. A task is
// one batch entry (its query blocks in order, accumulating into dk and dv); when there are
// few entries, each entry's query rows are split into groups of whole kGroupRows whose partial
// dk, dv are added in group order afterwards.
//
// bfloat16 operands compute in float32 with the via-f32 rule's values (ir/ops.def): each task
// widens the tiles of q, k, v and dout it reads into its scratch (exact) and the forward pass
// rounds each output row once as it writes it, so no pass over memory widens a whole operand;
// the gradient accumulates in a float32 copy of its packed output, rounded once at the end.
// The bits are those of the float32 kernel on the widened operands, rounded.
//
// Determinism: groups and the order of every sum depend on the shapes only, so results are
// bitwise identical for any thread count, and for finite operands for any query block of
// kAttentionQueryBlocks (attention.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kiln/runtime/kernels/attention.h"

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/kernels/exact_exp.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

// Keys per tile (forward); the query blocks are AttentionBlocks (attention.h).
constexpr int64_t kKeyBlock = 128;
// Backward: a batch entry's query rows are split into groups of whole kGroupRows until there
// are at least kMinBackwardTasks tasks (constants, not the thread count or the query block: the
// split must depend on neither). Every query block divides kGroupRows, so a group is whole
// blocks whatever the block.
constexpr int64_t kMinBackwardTasks = 8;
constexpr int64_t kGroupRows = 64;
static_assert([] {
  for (int64_t rows : gemm_detail::kAttentionQueryBlocks)
    if (rows <= 0 || kGroupRows % rows != 0) return false;
  return true;
}());

template <typename T>
using RowArray = Eigen::Array<T, 1, Eigen::Dynamic>;
template <typename T>
using RowMap = Eigen::Map<RowArray<T>>;

// The masked score (Keras' large negative number, as MultiHeadAttention's `where`).
template <typename T>
constexpr T kMasked = T(-1e9);

// The type a kernel of storage type S computes in: S itself, float32 for bfloat16.
template <typename S>
struct ComputeOf {
  using type = S;
};
template <>
struct ComputeOf<bfloat16> {
  using type = float;
};

// n values of src in the compute type T: src itself, or widened into buf (exact).
template <typename T, typename S>
const T* computed(const S* src, int64_t n, T* buf) {
  if constexpr (std::is_same_v<S, T>) {
    return src;
  } else {
    for (int64_t i = 0; i < n; ++i) buf[i] = src[i].to_float();
    return buf;
  }
}

// A computed value as stored: itself, or rounded to bf16 once (nearest even).
template <typename S, typename T>
S stored(T v) {
  if constexpr (std::is_same_v<S, T>)
    return v;
  else
    return S::from_float(v);
}

// Sizes of one call and where each batch entry's mask starts.
struct Problem {
  int64_t entries = 1, tq = 0, tv = 0, d = 0, dv = 0;
  double scale = 1;
  bool causal = false;
  const bool* mask = nullptr;
  std::vector<int64_t> mask_offset;    // per entry
  int64_t mask_row = 0, mask_col = 0;  // strides along Tq and Tv (0 when broadcast)

  int64_t block = 1;  // query rows per block

  Problem(std::span<const Array> in, size_t operands, const Attrs& attrs, const char* op,
          const AttentionBlocks& blocks) {
    const Shape& q = in[0].shape;
    const int r = q.rank();
    for (int i = 0; i < r - 2; ++i) entries *= q[i];
    tq = q[r - 2];
    d = q[r - 1];
    tv = in[1].shape[r - 2];
    dv = in[2].shape[r - 1];
    scale = attrs.get_double("scale", op);
    causal = attrs.get_bool("causal", op);
    block = causal ? blocks.causal : blocks.query;
    if (in.size() <= operands) return;
    const Array& m = in[operands];
    mask = m.data<bool>();
    const Shape& ms = m.shape;
    const int mr = ms.rank();
    // Strides of the mask seen as [..., Tq, Tv] (numpy alignment from the right).
    std::vector<int64_t> stride(size_t(r), 0);
    int64_t acc = 1;
    for (int i = r - 1; i >= 0; --i) {
      int mi = i - (r - mr);
      if (mi < 0) break;
      if (ms[mi] != 1) stride[size_t(i)] = acc;
      acc *= ms[mi];
    }
    mask_row = stride[size_t(r - 2)];
    mask_col = stride[size_t(r - 1)];
    mask_offset.assign(size_t(entries), 0);
    for (int64_t e = 0; e < entries; ++e) {
      int64_t rest = e, off = 0;
      for (int i = r - 3; i >= 0; --i) {
        off += (rest % q[i]) * stride[size_t(i)];
        rest /= q[i];
      }
      mask_offset[size_t(e)] = off;
    }
  }

  int64_t query_block() const { return block; }
  int64_t query_blocks() const { return (tq + query_block() - 1) / query_block(); }
  // Keys a causal block of query rows [r0, r0 + rows) can see: j < r0 + rows.
  int64_t causal_keys(int64_t r0, int64_t rows) const {
    return causal ? std::min(tv, r0 + rows) : tv;
  }
  // Of a tile's keys [c0, c0 + cols), how many lead up to the last one query row `row` may see
  // (all of them without causality; a mask may still hide some of those).
  int64_t live_keys(int64_t row, int64_t c0, int64_t cols) const {
    return causal ? std::clamp<int64_t>(row + 1 - c0, 0, cols) : cols;
  }
};

// Tiles of scores keep their rows 64-byte aligned and padded to a multiple of kLane elements
// (whole packets of every vector width), so that a row's maximum and exponentials
// (row_max, exact_exp::exp_shifted_sum_padded) read and write its last packet whole, masked,
// instead of finishing it element by element.
constexpr int64_t kLane = 16;
inline int64_t padded(int64_t n) { return (n + kLane - 1) / kLane * kLane; }
static_assert(kLane % exact_exp::kExpLanes<float> == 0 &&
              kLane % exact_exp::kExpLanes<double> == 0);

template <typename T>
using AlignedRow = Eigen::Map<RowArray<T>, Eigen::Aligned64>;

// Scratch of a task: 64-byte aligned. Up to kKeptScratchBytes it is a per-thread buffer
// reused across tasks and calls (tasks do not nest, so one buffer per thread suffices); larger
// requests (very long key sequences in the gradient) get a buffer freed with the task, so a
// thread does not hold on to them.
constexpr size_t kKeptScratchBytes = size_t{4} << 20;

template <typename T>
class TaskScratch {
 public:
  T* get(std::vector<T>& kept, size_t n) {
    constexpr size_t kSlack = 64 / sizeof(T);
    std::vector<T>& buf = n * sizeof(T) <= kKeptScratchBytes ? kept : own_;
    if (buf.size() < n + kSlack) buf.resize(n + kSlack);
    auto addr = reinterpret_cast<uintptr_t>(buf.data());
    return reinterpret_cast<T*>((addr + 63) & ~uintptr_t{63});
  }

 private:
  std::vector<T> own_;
};

// Whether a skipped (fully masked) key may still weigh anything in a row with max m: unless its
// argument kMasked - m (as the tile computes it) lies below exact_exp::kExpZero, where the
// exponential is +0 (true for a NaN m). A comparison, not std::exp: libm's exp of an argument
// that underflows takes a slow path, and this runs per row and tile.
template <typename T>
bool masked_key_counts(T m) {
  return !(kMasked<T> - m < exact_exp::kExpZero<T>);
}

// The largest of x[0, n) (n >= 1; x has room for n rounded up to whole kLane elements, whose
// lanes past n are read and ignored): one maximum per packet lane, then across the lanes.
template <typename T>
EIGEN_ALWAYS_INLINE T row_max(const T* x, int64_t n) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr int64_t kLanes = exact_exp::kExpLanes<T>;
  const P lowest = ei::pset1<P>(-std::numeric_limits<T>::infinity());
  P mx = lowest;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) mx = ei::pmax(mx, ei::ploadu<P>(x + i));
  if (i < n) {
    const P live = exact_exp::first_lanes<P>(n - i);
    mx = ei::pmax(mx, ei::pselect(live, ei::ploadu<P>(x + i), lowest));
  }
  return ei::predux_max(mx);
}

// A row's softmax gradient in place: d <- p (d - sum(p d)) over [0, n) (p and d have room for
// n rounded up to whole kLane elements; the lanes past n are left out of the sum, and d's are
// written with unspecified values).
template <typename T>
EIGEN_ALWAYS_INLINE void softmax_grad_row(const T* p, T* d, int64_t n) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr int64_t kLanes = exact_exp::kExpLanes<T>;
  const P zero = ei::pset1<P>(T(0));
  P dot = zero;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    dot = ei::pmadd(ei::ploadu<P>(p + i), ei::ploadu<P>(d + i), dot);
  if (i < n) {
    const P live = exact_exp::first_lanes<P>(n - i);
    dot = ei::padd(dot,
                   ei::pselect(live, ei::pmul(ei::ploadu<P>(p + i), ei::ploadu<P>(d + i)), zero));
  }
  const P dsum = ei::pset1<P>(ei::predux(dot));
  for (i = 0; i < n; i += kLanes)
    ei::pstoreu(d + i, ei::pmul(ei::ploadu<P>(p + i), ei::psub(ei::ploadu<P>(d + i), dsum)));
}

// x[0, n) *= s (x has room for n rounded up to whole kLane elements, written whole).
template <typename T>
EIGEN_ALWAYS_INLINE void scale_row(T* x, int64_t n, T s) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  const P factor = ei::pset1<P>(s);
  for (int64_t i = 0; i < n; i += exact_exp::kExpLanes<T>)
    ei::pstoreu(x + i, ei::pmul(ei::ploadu<P>(x + i), factor));
}

// Row x (cols scores) <- exp(x - m) (masked scores' weights exactly 0: exact_exp.h); returns
// the sum of the cols exponentials (exact_exp::exp_shifted_sum_padded's order over the live ones).
// `live` (<= cols): the scores from there on are causally masked; where they weigh nothing
// (!masked_key_counts(m)) their weights are set to 0 without exponentiating them (the same +0
// the exponential gives), so a causal tile's masked triangle costs no exp and the rows take the
// vectorized pass without low arguments.
template <typename T>
EIGEN_ALWAYS_INLINE T exp_row(T* x, int64_t cols, T m, int64_t live) {
  if (live < cols && masked_key_counts(m)) live = cols;
  const T sum = exact_exp::exp_shifted_sum_padded(x, x, live, m);
  std::fill(x + live, x + cols, T(0));
  return sum;
}

// C (m x n, row stride ldc) = or += op(A) B: one runtime GEMM on this thread (kiln's engine
// for float32). A register-blocked loop of this file's own was 8-14% faster than Eigen's GEMM
// on these head-sized products; measured against the engine it was 0-13% slower
// (bench/attention_bench.cc, Attention_Kernel_*), and is gone.
template <typename T>
void product(bool ta, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
             int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  gemm_serial<T>(ta, false, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

// Sets the masked elements of the tile S [rows, cols] (row stride ld; query rows r0.., keys
// c0..) to `value`; `entry_mask` is the entry's mask (null: none). The mask's stride along the
// keys is 0 (broadcast) or 1.
template <typename T>
void mask_tile(const Problem& p, const bool* entry_mask, T* s, int64_t ld, int64_t r0, int64_t rows,
               int64_t c0, int64_t cols, T value) {
  for (int64_t i = 0; i < rows; ++i) {
    T* row = s + i * ld;
    if (entry_mask) {
      const bool* m = entry_mask + (r0 + i) * p.mask_row + c0 * p.mask_col;
      if (p.mask_col == 0) {
        if (!m[0]) std::fill(row, row + cols, value);
      } else {
        for (int64_t j = 0; j < cols; ++j) row[j] = m[j] ? row[j] : value;
      }
    }
    if (p.causal) {  // keys j > r0 + i
      int64_t first = std::clamp<int64_t>(r0 + i + 1 - c0, 0, cols);
      std::fill(row + first, row + cols, value);
    }
  }
}

// One block of query rows [r0, r0 + rows) of one entry: out rows = softmax(S) v. S: the
// arrays' type (bf16 tiles of k and v are widened into the scratch as they are visited).
template <typename S>
void forward_block(const Problem& p, const S* q, const S* k, const S* v, const bool* entry_mask,
                   S* out, int64_t r0, int64_t rows) {
  using T = typename ComputeOf<S>::type;
  constexpr bool kWiden = !std::is_same_v<S, T>;
  thread_local std::vector<T> kept;
  TaskScratch<T> scratch;
  const int64_t bk = std::min(kKeyBlock, std::max<int64_t>(p.tv, 1)), ld = padded(bk);
  const int64_t tiles = kWiden ? bk * (p.d + p.dv) : 0;                    // widened k and v tiles
  T* s = scratch.get(kept, size_t(rows * (ld + p.d + p.dv + 2) + tiles));  // S: [rows, ld]
  T* qs = s + rows * ld;
  T* acc = qs + rows * p.d;
  T* m = acc + rows * p.dv;
  T* l = m + rows;
  T* k_tile = l + rows;
  T* v_tile = k_tile + bk * p.d;
  const T scale = T(p.scale);
  const T* qb = computed<T>(q + r0 * p.d, rows * p.d, qs);
  for (int64_t i = 0; i < rows * p.d; ++i) qs[i] = qb[i] * scale;

  int64_t kend = p.causal_keys(r0, rows);
  for (;;) {
    for (int64_t c0 = 0; c0 < kend; c0 += bk) {
      const int64_t cols = std::min(bk, kend - c0);
      const T* kt = computed<T>(k + c0 * p.d, cols * p.d, k_tile);
      gemm_serial<T>(false, true, rows, cols, p.d, qs, p.d, kt, p.d, s, ld);
      mask_tile(p, entry_mask, s, ld, r0, rows, c0, cols, kMasked<T>);
      for (int64_t i = 0; i < rows; ++i) {
        T* srow = s + i * ld;
        const T block_max = row_max(srow, cols);
        const T mnew = c0 == 0 ? block_max : std::max(m[i], block_max);
        const T sum = exp_row(srow, cols, mnew, p.live_keys(r0 + i, c0, cols));
        if (c0 == 0) {
          l[i] = sum;
        } else {
          const T alpha = m[i] == mnew ? T(1) : std::exp(m[i] - mnew);
          l[i] = alpha * l[i] + sum;
          if (alpha != T(1)) RowMap<T>(acc + i * p.dv, p.dv) *= alpha;
        }
        m[i] = mnew;
      }
      const T* vt = computed<T>(v + c0 * p.dv, cols * p.dv, v_tile);
      product<T>(false, rows, p.dv, cols, s, ld, vt, p.dv, acc, p.dv, /*accumulate=*/c0 > 0);
    }
    if (kend == p.tv) break;
    bool again = false;
    for (int64_t i = 0; i < rows && !again; ++i) again = masked_key_counts(m[i]);
    if (!again) break;
    kend = p.tv;  // some row still weighs the skipped keys: visit them all
  }
  for (int64_t i = 0; i < rows; ++i) {
    S* o = out + (r0 + i) * p.dv;
    const T* a = acc + i * p.dv;
    for (int64_t c = 0; c < p.dv; ++c) o[c] = stored<S>(a[c] / l[i]);
  }
}

template <typename S>
void attention_typed(std::span<const Array> in, const Attrs& attrs, Array& out,
                     const AttentionBlocks& blocks) {
  const Problem p(in, 3, attrs, "attention", blocks);
  S* po = out.data<S>();
  if (out.size() == 0) return;
  if (p.tv == 0) {  // softmax over no keys, times no values: zeros (as the unfused ops)
    std::fill(po, po + out.size(), S{});
    return;
  }
  const S* pq = in[0].data<S>();
  const S* pk = in[1].data<S>();
  const S* pv = in[2].data<S>();
  const int64_t per_entry = p.query_blocks();
  const double flops =
      2.0 * double(std::min(p.query_block(), p.tq)) * double(p.tv) * double(p.d + p.dv);
  const int64_t grain =
      std::max<int64_t>(1, int64_t(double(kGemmParallelMinFlops) / std::max(flops, 1.0)));
  parallel_for(p.entries * per_entry, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t e = t / per_entry, r0 = (t % per_entry) * p.query_block();
      const bool* em = p.mask ? p.mask + p.mask_offset[size_t(e)] : nullptr;
      forward_block<S>(p, pq + e * p.tq * p.d, pk + e * p.tv * p.d, pv + e * p.tv * p.dv, em,
                       po + e * p.tq * p.dv, r0, std::min(p.query_block(), p.tq - r0));
    }
  });
}

// Where one task writes: dq rows (stride ld), dk and dv rows (stride 2 ld, interleaved).
template <typename T>
struct GradOut {
  T* dq;
  T* dk;
  T* dv;
  int64_t ld;
};

// The gradient of query rows [r0, r0 + rows) of one entry: writes dq rows, adds to dk and dv
// (in the compute type T; bf16 k, v and dout rows are widened into the scratch).
template <typename S, typename T = typename ComputeOf<S>::type>
void backward_block(const Problem& p, const S* q, const S* k_in, const S* v_in, const S* dout,
                    const bool* entry_mask, GradOut<T> g, int64_t r0, int64_t rows) {
  constexpr bool kWiden = !std::is_same_v<S, T>;
  thread_local std::vector<T> kept;
  TaskScratch<T> scratch;
  const int64_t tv = p.tv, ld = padded(tv);
  const int64_t widened = kWiden ? tv * (p.d + p.dv) + rows * p.dv : 0;
  T* pm = scratch.get(kept, size_t(rows * (2 * ld + p.d) + widened));  // P [rows, ld]
  T* dp = pm + rows * ld;                                              // dP, then dS [rows, ld]
  T* qs = dp + rows * ld;
  T* k_wide = qs + rows * p.d;
  T* v_wide = k_wide + tv * p.d;
  T* dout_wide = v_wide + tv * p.dv;
  const T scale = T(p.scale);
  const T* qb = computed<T>(q + r0 * p.d, rows * p.d, qs);
  for (int64_t i = 0; i < rows * p.d; ++i) qs[i] = qb[i] * scale;
  const T* k = computed<T>(k_in, tv * p.d, k_wide);
  const T* v = computed<T>(v_in, tv * p.dv, v_wide);
  const T* dob = computed<T>(dout + r0 * p.dv, rows * p.dv, dout_wide);

  int64_t kend = p.causal_keys(r0, rows);
  for (;;) {
    gemm_serial<T>(false, true, rows, kend, p.d, qs, p.d, k, p.d, pm, ld);
    mask_tile(p, entry_mask, pm, ld, r0, rows, 0, kend, kMasked<T>);
    bool again = false;
    for (int64_t i = 0; i < rows; ++i) {
      T* prow = pm + i * ld;
      const T mx = row_max(prow, kend);
      if (kend < tv && masked_key_counts(mx)) {
        again = true;
        break;
      }
      scale_row(prow, kend, T(1) / exp_row(prow, kend, mx, p.live_keys(r0 + i, 0, kend)));
    }
    if (!again) break;
    kend = tv;
  }
  // dv[0:kend] += P^T dout
  product<T>(true, kend, p.dv, rows, pm, ld, dob, p.dv, g.dv, 2 * g.ld, true);
  // dP = dout v^T; dS = P (dP - rowsum(P dP)), zero where masked
  gemm_serial<T>(false, true, rows, kend, p.dv, dob, p.dv, v, p.dv, dp, ld);
  for (int64_t i = 0; i < rows; ++i) softmax_grad_row(pm + i * ld, dp + i * ld, kend);
  if (entry_mask || p.causal) mask_tile(p, entry_mask, dp, ld, r0, rows, 0, kend, T(0));
  // dq = scale * dS k
  product<T>(false, rows, p.d, kend, dp, ld, k, p.d, g.dq + r0 * g.ld, g.ld, false);
  for (int64_t i = 0; i < rows; ++i) RowMap<T>(g.dq + (r0 + i) * g.ld, p.d) *= scale;
  // dk[0:kend] += dS^T (scale q)
  product<T>(true, kend, p.d, rows, dp, ld, qs, p.d, g.dk, 2 * g.ld, true);
}

template <typename S>
void attention_grad_typed(std::span<const Array> in, const Attrs& attrs, Array& out,
                          const AttentionBlocks& blocks) {
  using T = typename ComputeOf<S>::type;
  constexpr bool kWiden = !std::is_same_v<S, T>;
  const Problem p(in, 4, attrs, "attention_grad", blocks);
  if (out.size() == 0) return;
  if (p.tv == 0 || p.tq == 0) {
    std::fill(out.data<S>(), out.data<S>() + out.size(), S{});
    return;
  }
  // bf16: the packed gradient accumulates in float32 scratch, rounded into `out` at the end.
  Scratch wide_out(ScratchSlot::kBf16Result, kWiden ? size_t(out.size()) * sizeof(T) : 0);
  T* po = kWiden ? wide_out.as<T>() : reinterpret_cast<T*>(out.data<S>());
  const S* pq = in[0].data<S>();
  const S* pk = in[1].data<S>();
  const S* pv = in[2].data<S>();
  const S* pd = in[3].data<S>();
  const int64_t ld = std::max(p.d, p.dv);
  const int64_t rows_per_entry = p.tq + 2 * p.tv;
  const int64_t units = (p.tq + kGroupRows - 1) / kGroupRows;
  const int64_t groups =
      std::min(units, std::max<int64_t>(1, (kMinBackwardTasks + p.entries - 1) / p.entries));
  const int64_t group_rows = (units + groups - 1) / groups * kGroupRows;
  // Partial dk, dv of groups after the first (the first adds into the output).
  std::vector<T> partial(groups > 1 ? size_t(p.entries * (groups - 1) * 2 * p.tv * ld) : 0);
  auto task = [&](int64_t t) {
    const int64_t e = t / groups, grp = t % groups;
    const bool* em = p.mask ? p.mask + p.mask_offset[size_t(e)] : nullptr;
    T* oe = po + e * rows_per_entry * ld;
    GradOut<T> g{oe, oe + p.tq * ld, oe + (p.tq + 1) * ld, ld};
    if (grp > 0) {
      T* part = partial.data() + ((e * (groups - 1)) + grp - 1) * 2 * p.tv * ld;
      g.dk = part;
      g.dv = part + ld;
    } else {  // dk and dv accumulate; the padding columns are zero
      std::fill(g.dk, g.dk + 2 * p.tv * ld, T(0));
    }
    const int64_t end = std::min(p.tq, (grp + 1) * group_rows);
    for (int64_t r0 = grp * group_rows; r0 < end; r0 += p.query_block()) {
      if (ld > p.d)
        for (int64_t i = r0; i < std::min(p.tq, r0 + p.query_block()); ++i)
          std::fill(g.dq + i * ld + p.d, g.dq + (i + 1) * ld, T(0));
      backward_block<S>(p, pq + e * p.tq * p.d, pk + e * p.tv * p.d, pv + e * p.tv * p.dv,
                        pd + e * p.tq * p.dv, em, g, r0, std::min(p.query_block(), end - r0));
    }
  };
  parallel_tasks(p.entries * groups, task);
  // Entries' partial dk, dv added in group order; bf16: each entry rounded once.
  if (groups == 1 && !kWiden) return;
  parallel_for(p.entries, 1, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      T* kv = po + (e * rows_per_entry + p.tq) * ld;
      for (int64_t grp = 1; grp < groups; ++grp) {
        const T* part = partial.data() + ((e * (groups - 1)) + grp - 1) * 2 * p.tv * ld;
        for (int64_t i = 0; i < 2 * p.tv * ld; ++i) kv[i] += part[i];
      }
      if constexpr (kWiden) {
        S* dst = out.data<S>() + e * rows_per_entry * ld;
        const T* src = po + e * rows_per_entry * ld;
        for (int64_t i = 0; i < rows_per_entry * ld; ++i) dst[i] = stored<S>(src[i]);
      }
    }
  });
}

using TypedKernel = void (*)(std::span<const Array>, const Attrs&, Array&, const AttentionBlocks&);

template <TypedKernel F32, TypedKernel F64, TypedKernel BF16>
void dispatch(std::span<const Array> in, const Attrs& attrs, Array& out,
              const AttentionBlocks& blocks, const char* op) {
  if (out.dtype == DType::f32)
    F32(in, attrs, out, blocks);
  else if (out.dtype == DType::f64)
    F64(in, attrs, out, blocks);
  else if (out.dtype == DType::bf16)
    BF16(in, attrs, out, blocks);
  else
    internal_error(__FILE__, __LINE__,
                   fmt::format("{} of {} reached its kernel", op, dtype_name(out.dtype)));
}

void attention_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  attention_with_blocks(in, attrs, out, attention_blocks());
}

void attention_grad_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  attention_grad_with_blocks(in, attrs, out, attention_blocks());
}

// The blocks a call of `op` on `dtype` runs with: `blocks` (each of which must divide
// kGroupRows) where its products run on kiln's GEMM engine (float32, and bf16 computed in
// float32), whose FMA chains make every block give the same bits; the defaults where they run
// on Eigen's GEMM (float64, or KILN_GEMM=eigen), whose sums depend on the products' sizes.
AttentionBlocks blocks_for(const char* op, DType dtype, const AttentionBlocks& blocks) {
  for (int64_t rows : {blocks.query, blocks.causal})
    if (rows <= 0 || kGroupRows % rows != 0)
      throw Error(fmt::format("{}: query block {} does not divide {} rows (use one of {})", op,
                              rows, kGroupRows,
                              fmt::join(gemm_detail::kAttentionQueryBlocks, ", ")));
  if (dtype == DType::f64 || gemm_detail::active_microkernels() == nullptr) return {};
  return blocks;
}

}  // namespace

void attention_with_blocks(std::span<const Array> in, const Attrs& attrs, Array& out,
                           const AttentionBlocks& blocks) {
  dispatch<attention_typed<float>, attention_typed<double>, attention_typed<bfloat16>>(
      in, attrs, out, blocks_for("attention", out.dtype, blocks), "attention");
}

void attention_grad_with_blocks(std::span<const Array> in, const Attrs& attrs, Array& out,
                                const AttentionBlocks& blocks) {
  dispatch<attention_grad_typed<float>, attention_grad_typed<double>,
           attention_grad_typed<bfloat16>>(
      in, attrs, out, blocks_for("attention_grad", out.dtype, blocks), "attention_grad");
}

void register_attention_kernels(KernelTable& t) {
  t[size_t(OpKind::Attention)] = attention_kernel;
  t[size_t(OpKind::AttentionGrad)] = attention_grad_kernel;
}

void register_attention_bf16_kernels(KernelTable& t) { register_attention_kernels(t); }

}  // namespace kiln::runtime
