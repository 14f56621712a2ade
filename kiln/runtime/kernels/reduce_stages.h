// Internal to the reduction kernel files (reduce.cc, reduce_extrema.cc): the reducers, the
// stages that reduce one [outer, R, inner] problem, the plan that chains them, and the
// reduce_kernel<Red> template each file instantiates for its ops. The contract and the plan
// are described at the top of reduce.cc.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kiln/ir/shape_rules.h"
#include "kiln/runtime/kernels/reduce_util.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime::reduction {

using namespace reduce_util;

// ---------------------------------------------------------------- reducers
// A reducer R<T> defines
//   identity()           the value of an empty reduction
//   row(x, shift)        the reduction of a contiguous Eigen vector x
//   merge(a, b)          combines partial results a (earlier) and b (later)
//   acc(a, x, shift)     a[j] = merge(a[j], f(x[j])) for a vector a (an Eigen Map) and x
//   combine(a, p)        a[j] = merge(a[j], p[j]) for vectors of partial results
// Only ExpSum reads `shift`: it sums exp(x - shift) (shift is per output value).

template <typename T>
struct SumR {
  static T identity() { return T(0); }
  template <typename X, typename S>
  static T row(const X& x, S) {
    return x.sum();
  }
  static T merge(T a, T b) { return T(a + b); }
  template <typename A, typename X, typename S>
  static void acc(A a, const X& x, const S&) {
    a += x;
  }
  template <typename A, typename P>
  static void combine(A a, const P& p) {
    a += p;
  }
};

template <typename T>
struct ProdR {
  static T identity() { return T(1); }
  template <typename X, typename S>
  static T row(const X& x, S) {
    return x.prod();
  }
  static T merge(T a, T b) { return T(a * b); }
  template <typename A, typename X, typename S>
  static void acc(A a, const X& x, const S&) {
    a *= x;
  }
  template <typename A, typename P>
  static void combine(A a, const P& p) {
    a *= p;
  }
};

template <typename T>
struct MaxR {
  static T identity() {
    if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  template <typename X, typename S>
  static T row(const X& x, S) {
    return x.template maxCoeff<kNaNMode<T>>();
  }
  static T merge(T a, T b) { return nan_max(a, b); }
  template <typename A, typename X, typename S>
  static void acc(A a, const X& x, const S&) {
    a = cwise_max(a, x);
  }
  template <typename A, typename P>
  static void combine(A a, const P& p) {
    a = cwise_max(a, p);
  }
};

template <typename T>
struct MinR {
  static T identity() {
    if constexpr (std::is_floating_point_v<T>)
      return std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::max();
  }
  template <typename X, typename S>
  static T row(const X& x, S) {
    return x.template minCoeff<kNaNMode<T>>();
  }
  static T merge(T a, T b) { return nan_min(a, b); }
  template <typename A, typename X, typename S>
  static void acc(A a, const X& x, const S&) {
    a = cwise_min(a, x);
  }
  template <typename A, typename P>
  static void combine(A a, const P& p) {
    a = cwise_min(a, p);
  }
};

// Sum of exp(x - shift): the second pass of logsumexp.
template <typename T>
struct ExpSumR {
  static T identity() { return T(0); }
  template <typename X>
  static T row(const X& x, T shift) {
    return (x - shift).exp().sum();
  }
  static T merge(T a, T b) { return a + b; }
  template <typename A, typename X, typename S>
  static void acc(A a, const X& x, const S& shift) {
    a += (x - shift).exp();
  }
  template <typename A, typename P>
  static void combine(A a, const P& p) {
    a += p;
  }
};

// ---------------------------------------------------------------- one stage

// Below this row length a row reduction walks columns (strided) instead of rows.
inline constexpr int64_t kShortRow = 16;
inline constexpr int64_t kShortRowBlock = 256;  // rows per pass, so that the strided passes hit L1
// Column reductions at least this wide walk all R rows per block of columns; narrower ones
// split R into chunks of about kChunk elements and merge the partials.
inline constexpr int64_t kWideInner = 1024;
inline constexpr int64_t kColumnBlock = 2048;
// Narrow column reductions accumulate groups of rows as one row of about this many elements.
inline constexpr int64_t kWideRow = 256;

// Shift values (ExpSum) for outputs [off, off + n); an empty map for the other reducers.
template <typename T>
CMap<T> shift_map(const T* shift, int64_t off, int64_t n) {
  return shift ? CMap<T>(shift + off, n) : CMap<T>(nullptr, 0);
}

// y[o] = reduce(x[o, 0:R]) for o < outer.
template <template <typename> class Op, typename T>
void reduce_rows(const T* x, T* y, int64_t outer, int64_t R, const T* shift) {
  using R_ = Op<T>;
  if (R < kShortRow) {
    using Strided = Eigen::Map<const Vec<T>, 0, Eigen::InnerStride<>>;
    // Blocks of kShortRowBlock rows (fixed, whatever the thread count), one strided pass per
    // column of the block.
    const int64_t blocks = ceil_div(outer, kShortRowBlock);
    parallel_for(blocks, std::max<int64_t>(1, kGrain / (R * kShortRowBlock)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b * kShortRowBlock; o < std::min(outer, e * kShortRowBlock);
                        o += kShortRowBlock) {
                     const int64_t n = std::min(kShortRowBlock, outer - o);
                     MMap<T> a(y + o, n);
                     a.setConstant(R_::identity());
                     for (int64_t r = 0; r < R; ++r)
                       R_::acc(a, Strided(x + o * R + r, n, Eigen::InnerStride<>(R)),
                               shift_map(shift, o, n));
                   }
                 });
    return;
  }
  auto shift_of = [&](int64_t o) { return shift ? shift[o] : T(0); };
  if (R <= kChunk) {
    parallel_for(outer, std::max<int64_t>(1, kGrain / R), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) y[o] = R_::row(CMap<T>(x + o * R, R), shift_of(o));
    });
    return;
  }
  const int64_t chunks = ceil_div(R, kChunk);
  Vec<T> part(outer * chunks);
  parallel_for(outer * chunks, kGrain / kChunk, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / chunks, c = t % chunks;
      int64_t len = std::min(kChunk, R - c * kChunk);
      part[t] = R_::row(CMap<T>(x + o * R + c * kChunk, len), shift_of(o));
    }
  });
  for (int64_t o = 0; o < outer; ++o) {
    T r = part[o * chunks];
    for (int64_t c = 1; c < chunks; ++c) r = R_::merge(r, part[o * chunks + c]);
    y[o] = r;
  }
}

// y[o, j] = reduce(x[o, 0:R, j]) for o < outer, j < inner (inner > 1).
template <template <typename> class Op, typename T>
void reduce_columns(const T* x, T* y, int64_t outer, int64_t R, int64_t inner, const T* shift) {
  using R_ = Op<T>;
  if (inner >= kWideInner) {
    // Wide rows: each task owns one block of columns of one outer slice and walks all R rows.
    const int64_t block = std::min(inner, kColumnBlock);
    const int64_t blocks = ceil_div(inner, block);
    parallel_for(outer * blocks, std::max<int64_t>(1, kGrain / (R * block)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t t = b; t < e; ++t) {
                     int64_t o = t / blocks, j = (t % blocks) * block;
                     int64_t len = std::min(block, inner - j);
                     MMap<T> a(y + o * inner + j, len);
                     a.setConstant(R_::identity());
                     auto sh = shift_map(shift, o * inner + j, len);
                     for (int64_t r = 0; r < R; ++r)
                       R_::acc(a, CMap<T>(x + (o * R + r) * inner + j, len), sh);
                   }
                 });
    return;
  }
  // Narrow rows: each [R, inner] slice is cut into chunks of `rows` rows whose partial results
  // are merged in order. Inside a chunk, k consecutive rows form one wide row of k * inner
  // elements, accumulated with long vector operations and folded back to `inner` at the end.
  const int64_t k = std::max<int64_t>(1, kWideRow / inner);
  const int64_t wide = k * inner;
  const int64_t rows = ceil_div(ceil_div(kChunk, inner), k) * k;
  const int64_t chunks = ceil_div(R, rows);
  Vec<T> part(chunks > 1 ? outer * chunks * inner : 0);
  T* dst = chunks > 1 ? part.data() : y;
  const int64_t task_work = std::min(rows, R) * inner;
  parallel_for(outer * chunks, std::max<int64_t>(1, kGrain / task_work), [&](int64_t b, int64_t e) {
    Vec<T> acc(wide), tiled;
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / chunks, r0 = (t % chunks) * rows, r1 = std::min(R, r0 + rows);
      const T* p = x + (o * R + r0) * inner;
      const int64_t full = (r1 - r0) / k;
      if (full > 0) {
        if (shift) tiled = CMap<T>(shift + o * inner, inner).replicate(k, 1);
        CMap<T> wide_shift(shift ? tiled.data() : nullptr, shift ? wide : 0);
        acc.setConstant(R_::identity());
        for (int64_t w = 0; w < full; ++w)
          R_::acc(MMap<T>(acc.data(), wide), CMap<T>(p + w * wide, wide), wide_shift);
      }
      MMap<T> a(dst + t * inner, inner);
      if (full > 0) {
        a = acc.head(inner);
        for (int64_t i = 1; i < k; ++i) R_::combine(a, acc.segment(i * inner, inner));
      } else {
        a.setConstant(R_::identity());
      }
      auto sh = shift_map(shift, o * inner, inner);
      for (int64_t r = r0 + full * k; r < r1; ++r)
        R_::acc(a, CMap<T>(x + (o * R + r) * inner, inner), sh);
    }
  });
  if (chunks == 1) return;
  parallel_for(outer, std::max<int64_t>(1, kGrain / (chunks * inner)), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      MMap<T> a(y + o * inner, inner);
      a = CMap<T>(part.data() + o * chunks * inner, inner);
      for (int64_t c = 1; c < chunks; ++c)
        R_::combine(a, CMap<T>(part.data() + (o * chunks + c) * inner, inner));
    }
  });
}

template <template <typename> class Op, typename T>
void reduce_stage(const T* x, T* y, int64_t outer, int64_t R, int64_t inner,
                  const T* shift = nullptr) {
  if (inner == 1)
    reduce_rows<Op>(x, y, outer, R, shift);
  else
    reduce_columns<Op>(x, y, outer, R, inner, shift);
}

// logsumexp of one stage: max, then sum(exp(x - max)) with non-finite maxima replaced by 0
// (so all -inf gives log(0) = -inf and +inf gives +inf, never inf - inf).
template <typename T>
T finite_or_zero(T m) {
  return std::isfinite(m) ? m : T(0);
}

template <typename T>
void logsumexp_stage(const T* x, T* y, int64_t outer, int64_t R, int64_t inner) {
  const int64_t n = outer * inner;
  if (inner == 1 && R >= kShortRow && R <= kChunk) {
    // One row at a time while it is in cache (the same operations as the general path).
    parallel_for(outer, std::max<int64_t>(1, kGrain / R), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        CMap<T> row(x + o * R, R);
        T m = MaxR<T>::row(row, 0);
        y[o] = m + std::log(ExpSumR<T>::row(row, finite_or_zero(m)));
      }
    });
    return;
  }
  reduce_stage<MaxR>(x, y, outer, R, inner);
  CMap<T> m(y, n);
  Vec<T> shift = m.unaryExpr([](T v) { return finite_or_zero(v); });
  Vec<T> s(n);
  reduce_stage<ExpSumR>(x, s.data(), outer, R, inner, shift.data());
  // Scalar std::log: the same result whatever the split.
  parallel_for(n, kGrain / 8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = y[i] + std::log(s[i]);
  });
}

// ---------------------------------------------------------------- planning

struct Group {
  int64_t size;
  bool reduced;
};

// Dims of `s` without size-1 dims, neighbours of the same kind merged.
inline std::vector<Group> group_dims(const Shape& s, const std::vector<int>& axes) {
  std::vector<Group> g;
  for (int i = 0; i < s.rank(); ++i) {
    if (s[i] == 1) continue;
    bool red = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!g.empty() && g.back().reduced == red)
      g.back().size *= s[i];
    else
      g.push_back({s[i], red});
  }
  return g;
}

// Reduces group after group (outermost first) from x into y; stage(x, y, outer, R, inner).
template <typename T, typename Stage>
void run_stages(const T* x, T* y, std::vector<Group> g, Stage&& stage) {
  Vec<T> buf[2];
  const T* src = x;
  for (int which = 0;; which ^= 1) {
    size_t k = 0;
    while (!g[k].reduced) ++k;
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < g.size(); ++i) {
      if (i < k) outer *= g[i].size;
      if (i > k) inner *= g[i].size;
    }
    int64_t R = g[k].size;
    g.erase(g.begin() + k);
    bool last = std::none_of(g.begin(), g.end(), [](const Group& d) { return d.reduced; });
    T* dst = y;
    if (!last) {
      buf[which].resize(outer * inner);
      dst = buf[which].data();
    }
    stage(src, dst, outer, R, inner);
    if (last) return;
    src = dst;
  }
}

enum class Red { Sum, Mean, Max, Min, Prod, LogSumExp };

constexpr OpKind op_of(Red r) {
  switch (r) {
    case Red::Sum:
      return OpKind::Sum;
    case Red::Mean:
      return OpKind::Mean;
    case Red::Max:
      return OpKind::Max;
    case Red::Min:
      return OpKind::Min;
    case Red::Prod:
      return OpKind::Prod;
    case Red::LogSumExp:
      return OpKind::LogSumExp;
  }
  return OpKind::Sum;
}

// The type the kernel computes in: signed sums and products wrap in the unsigned type.
template <typename T, Red K, bool = (K == Red::Sum || K == Red::Prod) && std::is_integral_v<T>>
struct Compute {
  using type = T;
};
template <typename T, Red K>
struct Compute<T, K, true> {
  using type = std::make_unsigned_t<T>;
};

template <Red K, typename T>
void reduce_typed(const Array& x, const std::vector<Group>& groups, Array& out) {
  using C = typename Compute<T, K>::type;
  const C* px = static_cast<const C*>(x.raw());
  C* py = static_cast<C*>(out.raw());
  const int64_t n_out = out.size();
  if (x.size() == 0) {  // a reduced dimension is 0: the identity
    C v = K == Red::Prod ? C(1) : C(0);
    if constexpr (std::is_floating_point_v<C>) {
      if (K == Red::Mean) v = std::numeric_limits<C>::quiet_NaN();
      if (K == Red::LogSumExp) v = -std::numeric_limits<C>::infinity();
    }
    std::fill(py, py + n_out, v);
    return;
  }
  if (std::none_of(groups.begin(), groups.end(), [](const Group& g) { return g.reduced; })) {
    std::memcpy(py, px, x.nbytes());  // only size-1 axes reduced: every op is the identity map
    return;
  }
  auto stage = [](const C* s, C* d, int64_t o, int64_t r, int64_t i) {
    if constexpr (K == Red::Sum || K == Red::Mean)
      reduce_stage<SumR>(s, d, o, r, i);
    else if constexpr (K == Red::Prod)
      reduce_stage<ProdR>(s, d, o, r, i);
    else if constexpr (K == Red::Max)
      reduce_stage<MaxR>(s, d, o, r, i);
    else if constexpr (K == Red::Min)
      reduce_stage<MinR>(s, d, o, r, i);
    else if constexpr (std::is_floating_point_v<C>)
      logsumexp_stage(s, d, o, r, i);
  };
  run_stages(px, py, groups, stage);
  if constexpr (K == Red::Mean) {
    const C count = C(x.size() / n_out);
    parallel_for(n_out, kGrain, [&](int64_t b, int64_t e) { MMap<C>(py + b, e - b) /= count; });
  }
}

template <Red K>
void reduce_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const char* name = op_name(op_of(K));
  const Array& x = in[0];
  std::vector<int> axes = rules::reduction_axes(attrs.get_ints("axes", name), x.shape.rank(), name);
  if (out.size() == 0) return;
  std::vector<Group> groups = group_dims(x.shape, axes);
  visit_dtype(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr bool float_only = K == Red::Mean || K == Red::LogSumExp;
    if constexpr (std::is_same_v<T, bool> || (float_only && !std::is_floating_point_v<T>)) {
      internal_error(__FILE__, __LINE__,
                     fmt::format("{} of {} reached its kernel", name, dtype_name(x.dtype)));
    } else {
      reduce_typed<K, T>(x, groups, out);
    }
  });
}

}  // namespace kiln::runtime::reduction
