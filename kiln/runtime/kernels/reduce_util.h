// Internal helpers shared by the reduction and softmax kernels: Eigen vector aliases, the
// fixed chunk size that makes long reductions thread-count independent, NaN-propagating
// max/min, and the (outer, n, inner) view of a tensor around one axis.
//
// Determinism rule for every kernel using this header: the order of floating-point operations
// behind each output value (and the split of any vectorised transcendental expression) is
// fixed by the shapes alone, never by how parallel_for happened to split the work.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/ir/shape.h"

namespace kiln::runtime::reduce_util {

template <typename T>
using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using CMap = Eigen::Map<const Vec<T>>;
template <typename T>
using MMap = Eigen::Map<Vec<T>>;

// A reduction longer than this is computed as partial results of consecutive chunks of this
// many elements, merged in index order (whatever the thread count).
inline constexpr int64_t kChunk = 16384;
// Minimum elements of work per parallel task.
inline constexpr int64_t kGrain = 32768;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Eigen's NaN mode for max/min: numpy semantics (NaN wins) for floats.
template <typename T>
inline constexpr int kNaNMode =
    std::is_floating_point_v<T> ? Eigen::PropagateNaN : Eigen::PropagateFast;

template <typename T>
T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a < b ? b : a;
}
template <typename T>
T nan_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return b < a ? b : a;
}

// Coefficient-wise NaN-propagating max/min of two Eigen array expressions.
template <typename A, typename B>
auto cwise_max(const A& a, const B& b) {
  using T = typename A::Scalar;
  return a.binaryExpr(b, Eigen::internal::scalar_max_op<T, T, kNaNMode<T>>());
}
template <typename A, typename B>
auto cwise_min(const A& a, const B& b) {
  using T = typename A::Scalar;
  return a.binaryExpr(b, Eigen::internal::scalar_min_op<T, T, kNaNMode<T>>());
}

// A tensor seen as [outer, n, inner] around `axis` (row-major).
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisView axis_view(const Shape& s, int axis) {
  AxisView v;
  for (int i = 0; i < s.rank(); ++i) {
    if (i < axis)
      v.outer *= s[i];
    else if (i == axis)
      v.n = s[i];
    else
      v.inner *= s[i];
  }
  return v;
}

}  // namespace kiln::runtime::reduce_util
