// Eager kernels of the extremum reductions: max and min over any set of axes (the plan of
// reduce_stages.h) and argmax / argmin along one axis (first NaN, else first extreme value; int64
// out). The contract is at the top of reduce.cc.
#include "kiln/runtime/kernels/reduce_stages.h"

namespace kiln::runtime {
namespace {

using namespace reduction;

// ---------------------------------------------------------------- argmax / argmin

// True if v replaces best: strictly more extreme, or the first NaN (numpy: NaN wins).
template <bool kMax, typename T>
bool better(T v, T best) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(v)) return !std::isnan(best);
  return kMax ? v > best : v < best;
}

template <bool kMax, typename T>
void arg_reduce_typed(const T* x, int64_t* y, const AxisView& v) {
  const int64_t R = v.n;
  if (v.inner == 1) {
    parallel_for(v.outer, std::max<int64_t>(1, kGrain / R), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        // Vectorised extreme value first, then the first position holding it.
        const T* p = x + o * R;
        CMap<T> row(p, R);
        T m = kMax ? MaxR<T>::row(row, 0) : MinR<T>::row(row, 0);
        int64_t i = 0;
        bool nan = false;
        if constexpr (std::is_floating_point_v<T>) nan = std::isnan(m);
        if (nan)
          while (i < R - 1 && !std::isnan(p[i])) ++i;
        else
          while (i < R - 1 && p[i] != m) ++i;
        y[o] = i;
      }
    });
    return;
  }
  const int64_t block = std::min(v.inner, kColumnBlock);
  const int64_t blocks = ceil_div(v.inner, block);
  parallel_for(v.outer * blocks, std::max<int64_t>(1, kGrain / (R * block)),
               [&](int64_t b, int64_t e) {
                 Vec<T> best(block);
                 for (int64_t t = b; t < e; ++t) {
                   int64_t o = t / blocks, j0 = (t % blocks) * block;
                   int64_t len = std::min(block, v.inner - j0);
                   int64_t* idx = y + o * v.inner + j0;
                   const T* base = x + o * R * v.inner + j0;
                   for (int64_t j = 0; j < len; ++j) best[j] = base[j], idx[j] = 0;
                   for (int64_t r = 1; r < R; ++r) {
                     const T* p = base + r * v.inner;
                     for (int64_t j = 0; j < len; ++j) {
                       bool take = better<kMax>(p[j], best[j]);
                       best[j] = take ? p[j] : best[j];
                       idx[j] = take ? r : idx[j];
                     }
                   }
                 }
               });
}

template <bool kMax>
void arg_reduce_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const char* name = kMax ? "argmax" : "argmin";
  const Array& x = in[0];
  int axis = normalize_axis(attrs.get_int("axis", name), x.shape.rank(), name);
  if (out.size() == 0) return;
  AxisView v = axis_view(x.shape, axis);
  visit_dtype(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      internal_error(__FILE__, __LINE__, fmt::format("{} of bool reached its kernel", name));
    } else {
      arg_reduce_typed<kMax>(x.data<T>(), out.data<int64_t>(), v);
    }
  });
}

}  // namespace

void register_extremum_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Max, reduce_kernel<Red::Max>);
  set(OpKind::Min, reduce_kernel<Red::Min>);
  set(OpKind::ArgMax, arg_reduce_kernel<true>);
  set(OpKind::ArgMin, arg_reduce_kernel<false>);
}

}  // namespace kiln::runtime
