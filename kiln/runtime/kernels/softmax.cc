// Eager kernels of softmax and log_softmax along one axis (attr axis; float32/float64).
//
// Contract: with m the max along the axis, softmax = exp(x - m) / sum(exp(x - m)) and
// log_softmax = (x - m) - log(sum(exp(x - m))), so large inputs never overflow. As in PyTorch,
// a slice that is all -inf, or holds +inf or NaN, gives NaN. Results are bitwise identical for
// any thread count: long rows are processed in fixed chunks (see reduce_util.h).
#include <fmt/format.h>

#include <vector>

#include "kiln/runtime/kernels/exact_exp.h"
#include "kiln/runtime/kernels/reduce_util.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

using namespace reduce_util;

// Writes exp(x - m) (softmax; far below the max: exact_exp.h) or x - m (log_softmax) into y;
// returns sum(exp(x - m)) (in log_softmax Eigen's clamped tail adds at most 2^-126 per element
// to a sum of at least 1: nothing).
template <bool kLog, typename T>
T shifted_exp(CMap<T> x, MMap<T> y, T m) {
  y = x - m;
  if constexpr (kLog) {
    return y.exp().sum();
  } else {
    exact_exp::exp_values(y.data(), y.data(), y.size());
    return y.sum();
  }
}

template <bool kLog, typename T>
void normalise(MMap<T> y, T s) {
  if constexpr (kLog)
    y -= std::log(s);
  else
    y /= s;
}

// Softmax of each contiguous row of length R.
template <bool kLog, typename T>
void softmax_rows(const T* x, T* y, int64_t outer, int64_t R) {
  if (R <= kChunk) {
    parallel_for(outer, std::max<int64_t>(1, kGrain / R), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        CMap<T> xr(x + o * R, R);
        MMap<T> yr(y + o * R, R);
        T m = xr.template maxCoeff<kNaNMode<T>>();
        normalise<kLog>(yr, shifted_exp<kLog>(xr, yr, m));
      }
    });
    return;
  }
  // Long rows: every pass works on fixed chunks of kChunk elements, in parallel.
  const int64_t chunks = ceil_div(R, kChunk);
  const int64_t tasks = outer * chunks;
  auto chunk = [&](int64_t t, auto&& fn) {
    int64_t o = t / chunks, c = t % chunks;
    int64_t off = o * R + c * kChunk, len = std::min(kChunk, R - c * kChunk);
    fn(o, CMap<T>(x + off, len), MMap<T>(y + off, len));
  };
  std::vector<T> part(tasks), m(outer), s(outer);
  auto merge_rows = [&](auto&& merge, std::vector<T>& to) {
    for (int64_t o = 0; o < outer; ++o) {
      T r = part[o * chunks];
      for (int64_t c = 1; c < chunks; ++c) r = merge(r, part[o * chunks + c]);
      to[o] = r;
    }
  };
  parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      chunk(t,
            [&](int64_t, CMap<T> xc, MMap<T>) { part[t] = xc.template maxCoeff<kNaNMode<T>>(); });
  });
  merge_rows([](T a, T b) { return nan_max(a, b); }, m);
  parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      chunk(t,
            [&](int64_t o, CMap<T> xc, MMap<T> yc) { part[t] = shifted_exp<kLog>(xc, yc, m[o]); });
  });
  merge_rows([](T a, T b) { return a + b; }, s);
  parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      chunk(t, [&](int64_t o, CMap<T>, MMap<T> yc) { normalise<kLog>(yc, s[o]); });
  });
}

// Softmax over the middle axis of [outer, R, inner] (inner > 1): each task owns a block of
// columns of one outer slice, sized so that its R x block window stays in cache when R is
// small and rows are read in runs of at least 64 elements otherwise.
template <bool kLog, typename T>
void softmax_columns(const T* x, T* y, int64_t outer, int64_t R, int64_t inner) {
  const int64_t block = std::min(inner, std::max<int64_t>(64, ceil_div(kChunk / R, 8) * 8));
  const int64_t blocks = ceil_div(inner, block);
  parallel_for(outer * blocks, std::max<int64_t>(1, kGrain / (R * block)),
               [&](int64_t b, int64_t e) {
                 for (int64_t t = b; t < e; ++t) {
                   int64_t o = t / blocks, j = (t % blocks) * block;
                   int64_t len = std::min(block, inner - j);
                   auto xr = [&](int64_t r) { return CMap<T>(x + (o * R + r) * inner + j, len); };
                   auto yr = [&](int64_t r) { return MMap<T>(y + (o * R + r) * inner + j, len); };
                   Vec<T> m = xr(0);
                   for (int64_t r = 1; r < R; ++r) m = cwise_max(m, xr(r));
                   Vec<T> s = Vec<T>::Zero(len);
                   for (int64_t r = 0; r < R; ++r) {
                     if constexpr (kLog) {
                       yr(r) = xr(r) - m;
                       s += yr(r).exp();
                     } else {
                       MMap<T> y = yr(r);
                       y = xr(r) - m;
                       exact_exp::exp_values(y.data(), y.data(), len);
                       s += y;
                     }
                   }
                   if constexpr (kLog) {
                     s = s.log();
                     for (int64_t r = 0; r < R; ++r) yr(r) -= s;
                   } else {
                     for (int64_t r = 0; r < R; ++r) yr(r) /= s;
                   }
                 }
               });
}

template <bool kLog>
void softmax_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const char* name = kLog ? "log_softmax" : "softmax";
  const Array& x = in[0];
  int axis = normalize_axis(attrs.get_int("axis", name), x.shape.rank(), name);
  if (out.size() == 0) return;
  AxisView v = axis_view(x.shape, axis);
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = out.data<T>();
    if (v.inner == 1)
      softmax_rows<kLog>(px, py, v.outer, v.n);
    else
      softmax_columns<kLog>(px, py, v.outer, v.n, v.inner);
  };
  if (x.dtype == DType::f32)
    run(TypeTag<float>{});
  else if (x.dtype == DType::f64)
    run(TypeTag<double>{});
  else
    internal_error(__FILE__, __LINE__,
                   fmt::format("{} of {} reached its kernel", name, dtype_name(x.dtype)));
}

}  // namespace

void register_softmax_kernels(KernelTable& t) {
  t[size_t(OpKind::Softmax)] = softmax_kernel<false>;
  t[size_t(OpKind::LogSoftmax)] = softmax_kernel<true>;
}

}  // namespace kiln::runtime
