// Internal to the eager kernels that exponentiate with Eigen (elementwise_unary.cc, softmax.cc,
// attention.cc). Eigen 3.4's vectorized exp, and its logistic built on it, clamp the argument
// at about the log of the smallest normal number (float -88.38, double -709.78): every smaller
// argument gives about 2^-127 (float) or 2^-1023 (double), where IEEE exp gives a smaller
// denormal or +0. So exp(-1e9), the weight of a masked softmax score, came out 2.9e-39 instead
// of 0, and log(sigmoid(-100)) -88.4 instead of -100 (tests/runtime/exact_exp_test.cc). Here
// the elements whose argument is below kExpTail get the C library's exp instead; the rest keep
// Eigen's vectorized values. (The generated kernels' exp is exact there: codegen/vector_math.cc.)
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::runtime::exact_exp {

// Below this argument Eigen's exp is off; above it, it is as accurate as everywhere else.
template <typename T>
inline constexpr T kExpTail = std::is_same_v<T, float> ? T(-87) : T(-708);

// y[0, n) = exp(a[0, n)) (y may be a): Eigen's vectorized exp, arguments below kExpTail by
// std::exp. One vectorized compare finds whether any argument is that low.
template <typename T>
void exp_values(const T* a, T* y, int64_t n) {
  using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<const Vec> args(a, n);
  if (!(args < kExpTail<T>).any()) {
    Eigen::Map<Vec>(y, n) = args.exp();
    return;
  }
  thread_local std::vector<std::pair<int64_t, T>> tail;
  tail.clear();
  for (int64_t i = 0; i < n; ++i)
    if (a[i] < kExpTail<T>) tail.emplace_back(i, a[i]);
  Eigen::Map<Vec>(y, n) = args.exp();
  for (const auto& [i, v] : tail) y[i] = std::exp(v);
}

}  // namespace kiln::runtime::exact_exp
