// The eager exponentials far below their range (runtime/kernels/exact_exp.h): Eigen's vectorized
// exp clamps arguments below about -88.4 (float) / -709.8 (double) and returns ~2^-127 /
// ~2^-1023 for all of them. kiln's exp, sigmoid, softplus and softmax kernels give the C
// library's values there instead: exp(-1e9) is +0 (a masked softmax score weighs nothing, as in
// Keras), exp(-100f) the denormal 3.7e-44, log(sigmoid(-100)) about -100. The inputs put the
// low arguments inside long arrays (vectorized chunks, several threads) and at both ends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/kernels/exact_exp.h"

namespace kiln::runtime {
namespace {

// A long array of moderate values with `low` written at some positions; returns the positions.
template <typename T>
Array with_low_values(const std::vector<T>& low, int64_t n, std::vector<int64_t>& at) {
  Array a = Array::empty(std::is_same_v<T, float> ? DType::f32 : DType::f64, Shape{n});
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u(-5, 5);
  for (int64_t i = 0; i < n; ++i) a.data<T>()[i] = T(u(rng));
  at.clear();
  for (size_t j = 0; j < low.size(); ++j) {
    const int64_t i = j == 0                ? 0
                      : j + 1 == low.size() ? n - 1
                                            : int64_t(j) * (n / int64_t(low.size()));
    a.data<T>()[i] = low[j];
    at.push_back(i);
  }
  return a;
}

// `with_nan`: a NaN beside them too (a chunk's minimum may then be NaN: the low values must
// still be found).
template <typename T>
void expect_tail(OpKind op, T (*exact)(T), const std::vector<T>& low, bool with_nan = false) {
  std::vector<int64_t> at;
  Array x = with_low_values<T>(low, 100000, at);
  if (with_nan) x.data<T>()[1] = std::numeric_limits<T>::quiet_NaN();
  const Array in[] = {x};
  const Array y = run_op(op, in, {});
  for (int64_t i : at) {
    const T v = x.data<T>()[i];
    EXPECT_EQ(y.data<T>()[i], exact(v)) << op_name(op) << "(" << v << ")";
  }
}

template <typename T>
T exp_ref(T v) {
  return std::exp(v);
}
template <typename T>
T sigmoid_ref(T v) {
  const T e = std::exp(v);
  return e / (T(1) + e);
}
template <typename T>
T softplus_ref(T v) {
  return std::log1p(std::exp(v));  // v < 0 here
}

TEST(ExactExp, ElementwiseTailsAreTheLibraryValues) {
  const std::vector<float> lowf = {-1e9f, -200, -104, -103.5f, -100, -95, -90, -88.5f, -87.5f};
  const std::vector<double> lowd = {-1e9, -1000, -746, -745, -740, -720, -710, -708.5};
  for (auto [op, f, d] :
       {std::tuple{OpKind::Exp, &exp_ref<float>, &exp_ref<double>},
        std::tuple{OpKind::Sigmoid, &sigmoid_ref<float>, &sigmoid_ref<double>},
        std::tuple{OpKind::Softplus, &softplus_ref<float>, &softplus_ref<double>}}) {
    expect_tail<float>(op, f, lowf);
    expect_tail<double>(op, d, lowd);
    expect_tail<float>(op, f, lowf, /*with_nan=*/true);
    expect_tail<double>(op, d, lowd, /*with_nan=*/true);
  }
  // The cases the clamp got wrong, by value.
  Array one = Array::empty(DType::f32, Shape{1});
  one.data<float>()[0] = -1e9f;
  const Array in[] = {one};
  EXPECT_EQ(run_op(OpKind::Exp, in, {}).data<float>()[0], 0.0f);
  one.data<float>()[0] = -100.0f;
  EXPECT_NEAR(std::log(double(run_op(OpKind::Sigmoid, in, {}).data<float>()[0])), -100.0, 0.1);
}

// Masked scores (-1e9) weigh exactly 0 along the last axis and along a middle one.
TEST(ExactExp, MaskedSoftmaxScoresWeighNothing) {
  for (DType dt : {DType::f32, DType::f64}) {
    for (int64_t axis : {1, 2}) {
      const Shape s = axis == 2 ? Shape{3, 5, 40} : Shape{3, 40, 5};
      Array x = Array::empty(dt, s);
      std::mt19937_64 rng(5);
      std::uniform_real_distribution<double> u(-3, 3);
      for (int64_t i = 0; i < x.size(); ++i) {
        const double v = i % 7 == 3 ? -1e9 : u(rng);
        if (dt == DType::f32)
          x.data<float>()[i] = float(v);
        else
          x.data<double>()[i] = v;
      }
      const Array in[] = {x};
      const Array y = run_op(OpKind::Softmax, in, {{"axis", axis}});
      for (int64_t i = 0; i < x.size(); ++i) {
        if (i % 7 != 3) continue;
        const double p = dt == DType::f32 ? double(y.data<float>()[i]) : y.data<double>()[i];
        EXPECT_EQ(p, 0.0) << dtype_name(dt) << " axis " << axis << " at " << i;
      }
    }
  }
}

// exact_exp::exp_values itself, in place and not: below kExpTail every value is the C library's
// (+0 below kExpZero, denormals between), above it Eigen's vectorized exp within a few ulps;
// the low arguments sit among ordinary ones and at the ends, in arrays of several vector lengths.
template <typename T>
void expect_exp_values(const std::vector<T>& low) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-20, 5);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{37}, int64_t{1000}}) {
    std::vector<T> a(static_cast<size_t>(n));
    for (T& v : a) v = T(u(rng));
    for (size_t j = 0; j < low.size() && j < size_t(n); ++j)
      a[size_t(int64_t(j) * 7919 % n)] = low[j];
    std::vector<T> out(a.size()), in_place = a;
    exact_exp::exp_values(a.data(), out.data(), n);
    exact_exp::exp_values(in_place.data(), in_place.data(), n);
    // (Eigen peels the unaligned head of an array with scalar exps: in place and not may differ
    // in the last bit above the tail.)
    for (const std::vector<T>* y : {&out, &in_place})
      for (int64_t i = 0; i < n; ++i) {
        const T v = a[size_t(i)], want = std::exp(v), got = (*y)[size_t(i)];
        if (v < exact_exp::kExpTail<T>)
          EXPECT_EQ(got, want) << v << " (n " << n << ")";
        else
          EXPECT_NEAR(got, want, 4 * std::numeric_limits<T>::epsilon() * want) << v;
      }
  }
}

TEST(ExactExp, ExpValuesGiveTheLibraryValuesBelowTheTail) {
  expect_exp_values<float>(
      {-1e9f, -1e4f, -104.5f, -104, -103.97f, -103.5f, -100, -95, -88.5f, -87.01f, -87, -86.99f});
  expect_exp_values<double>(
      {-1e9, -1e5, -746.5, -746, -745.1, -745, -740, -720, -709, -708.01, -708, -707.99});
  std::vector<float> none;
  exact_exp::exp_values(none.data(), none.data(), 0);  // no arguments: nothing read or written
}

// exact_exp::exp_shifted_sum_padded: exp(x - m) with exp_values' tails, in place and not, for
// lengths around whole packets; the padding past n holds NaN, which must stay out of the sum.
// The sum is that of the returned values, up to its reassociation (n - 1 roundings).
template <typename T>
void expect_shifted_sum(const std::vector<T>& low) {
  constexpr int64_t kLanes = exact_exp::kExpLanes<T>;
  const T m = T(3.25);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-17, 8);
  for (int64_t n : {int64_t{1}, kLanes - 1, kLanes, kLanes + 3, 3 * kLanes, int64_t{203}}) {
    const int64_t room = (n + kLanes - 1) / kLanes * kLanes;
    std::vector<T> x(size_t(room), std::numeric_limits<T>::quiet_NaN());
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = T(u(rng));
    for (size_t j = 0; j < low.size() && j < size_t(n); ++j)
      x[size_t(int64_t(j) * 7919 % n)] = low[j] + m;
    std::vector<T> out(x.size()), in_place = x;
    const T sum = exact_exp::exp_shifted_sum_padded(x.data(), out.data(), n, m);
    const T sum_in_place =
        exact_exp::exp_shifted_sum_padded(in_place.data(), in_place.data(), n, m);
    EXPECT_EQ(sum, sum_in_place) << "n " << n;
    double total = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T arg = x[size_t(i)] - m, want = std::exp(arg), got = out[size_t(i)];
      EXPECT_EQ(got, in_place[size_t(i)]) << arg;
      if (arg < exact_exp::kExpTail<T>)
        EXPECT_EQ(got, want) << arg << " (n " << n << ")";
      else
        EXPECT_NEAR(got, want, 4 * std::numeric_limits<T>::epsilon() * want) << arg;
      total += double(got);
      magnitude += std::abs(double(got));
    }
    ASSERT_TRUE(std::isfinite(sum)) << "n " << n;
    EXPECT_NEAR(double(sum), total,
                double(n) * double(std::numeric_limits<T>::epsilon()) * magnitude)
        << "n " << n;
  }
}

TEST(ExactExp, ShiftedSumGivesTheLibraryValuesBelowTheTailAndSumsOnlyItsElements) {
  expect_shifted_sum<float>({-1e9f, -104.5f, -103.5f, -100, -90, -87.01f, -86.99f});
  expect_shifted_sum<double>({-1e9, -746.5, -745.1, -740, -720, -708.01, -707.99});
}

}  // namespace
}  // namespace kiln::runtime
