// Internal to the eager kernels that exponentiate with Eigen (elementwise_unary.cc, softmax.cc,
// attention.cc). Eigen 3.4's vectorized exp, and its logistic built on it, clamp the argument
// near the log of the smallest normal number (float -88.723, double -709.784): every smaller
// argument gives 2.9e-39 (float) or 5.6e-309 (double), where IEEE exp gives a smaller denormal
// or +0. So exp(-1e9), the weight of a masked softmax score, came out 2.9e-39 instead of 0, and
// log(sigmoid(-100)) -88.4 instead of -100 (tests/runtime/exact_exp_test.cc). Here the elements
// whose argument is below kExpZero get +0 and those in [kExpZero, kExpTail) the C library's exp;
// the rest keep Eigen's vectorized values. (The generated kernels' exp is exact there:
// codegen/vector_math.cc.)
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
// Below this argument IEEE exp rounds to +0: exp(-104) = 6.8e-46 is under half of float's
// smallest denormal (2^-149 / 2 = 7.0e-46), exp(-746) = 1.0e-324 under half of double's
// (2.5e-324). The masked scores of a softmax (-1e9 - max) all lie there.
template <typename T>
inline constexpr T kExpZero = std::is_same_v<T, float> ? T(-104) : T(-746);

// Eigen's exp of any argument below kExpZero (its value at its clamp, -88.723 or -709.784:
// 2.9e-39 or 5.6e-309) is under this; its exp of kExpTail or more (at least exp(kExpTail) =
// 1.6e-38 or 3.3e-308) is not. (Arguments between the two are the denormal band, std::exp's.)
template <typename T>
inline constexpr T kClampedBelow = std::is_same_v<T, float> ? T(8e-39) : T(1.6e-308);

// y[0, n) = exp(a[0, n)) (y may be a): Eigen's vectorized exp; then the results of arguments
// below kExpZero become +0 (with any others under kClampedBelow), and those of arguments in
// [kExpZero, kExpTail), whose results are denormal, std::exp's. A vectorized minimum finds
// whether any argument is that low.
template <typename T>
void exp_values(const T* a, T* y, int64_t n) {
  using Vec = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<const Vec> args(a, n);
  if (n == 0 || args.minCoeff() >= kExpTail<T>) {
    Eigen::Map<Vec>(y, n) = args.exp();
    return;
  }
  thread_local std::vector<std::pair<int64_t, T>> tail;
  tail.clear();
  int64_t denormal = 0;  // (no && and no early exit: a loop the compiler vectorizes)
  for (int64_t i = 0; i < n; ++i) denormal += (a[i] < kExpTail<T>)&(a[i] >= kExpZero<T>);
  if (denormal > 0)
    for (int64_t i = 0; i < n; ++i)
      if (a[i] < kExpTail<T> && a[i] >= kExpZero<T>) tail.emplace_back(i, a[i]);
  Eigen::Map<Vec>(y, n) = args.exp();
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] < kClampedBelow<T> ? T(0) : y[i];
  for (const auto& [i, v] : tail) y[i] = std::exp(v);
}

// Lanes of the vectorized exp's packets of T (Eigen's widest for this build).
template <typename T>
inline constexpr int64_t kExpLanes =
    Eigen::internal::unpacket_traits<typename Eigen::internal::packet_traits<T>::type>::size;

// The first `count` lanes of a packet P set (count < the packet's lanes): a mask for the last,
// partial packet of a row whose padding lanes must not count.
template <typename P>
EIGEN_ALWAYS_INLINE P first_lanes(int64_t count) {
  namespace ei = Eigen::internal;
  using T = typename ei::unpacket_traits<P>::type;
  return ei::pcmp_lt(ei::plset<P>(T(0)), ei::pset1<P>(T(count)));
}

// One packet of exponentials with the tails above: e = exp(a) lane by lane (Eigen's vectorized
// exp where it is exact; +0 below kExpZero; the C library's exp in between).
template <typename P>
EIGEN_ALWAYS_INLINE P exp_packet(const P& a) {
  namespace ei = Eigen::internal;
  using T = typename ei::unpacket_traits<P>::type;
  const P e = ei::pexp(a);
  if (!ei::predux_any(ei::pcmp_lt(a, ei::pset1<P>(kExpTail<T>)))) [[likely]]
    return e;
  constexpr int kLanes = ei::unpacket_traits<P>::size;
  alignas(64) T args[kLanes], values[kLanes];
  ei::pstoreu(args, a);
  ei::pstoreu(values, e);
  for (int i = 0; i < kLanes; ++i)
    if (args[i] < kExpZero<T>)
      values[i] = T(0);
    else if (args[i] < kExpTail<T>)
      values[i] = std::exp(args[i]);
  return ei::ploadu<P>(values);
}

// y[0, n) = exp(x[0, n) - m) (y may be x), with exp_values' tails, in one pass of packets;
// returns the sum of the n exponentials, one partial sum per lane added across the lanes at
// the end. x and y must have room for n rounded up to whole kExpLanes<T> packets: the last
// packet reads the elements past n (any values: those lanes are exponentiated as exp(0) and
// left out of the sum) and writes them (unspecified values).
template <typename T>
EIGEN_ALWAYS_INLINE T exp_shifted_sum_padded(const T* x, T* y, int64_t n, T m) {
  namespace ei = Eigen::internal;
  using P = typename ei::packet_traits<T>::type;
  constexpr int64_t kLanes = kExpLanes<T>;
  const P shift = ei::pset1<P>(m), zero = ei::pset1<P>(T(0));
  P sum = zero;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const P e = exp_packet(ei::psub(ei::ploadu<P>(x + i), shift));
    ei::pstoreu(y + i, e);
    sum = ei::padd(sum, e);
  }
  if (i < n) {
    const P live = first_lanes<P>(n - i);
    const P e = exp_packet(ei::pselect(live, ei::psub(ei::ploadu<P>(x + i), shift), zero));
    ei::pstoreu(y + i, e);
    sum = ei::padd(sum, ei::pselect(live, e, zero));
  }
  return ei::predux(sum);
}

}  // namespace kiln::runtime::exact_exp
