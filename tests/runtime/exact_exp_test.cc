// The eager exponentials far below their range (runtime/kernels/exact_exp.h): Eigen's vectorized
// exp clamps arguments below about -88.4 (float) / -709.8 (double) and returns ~2^-127 /
// ~2^-1023 for all of them. kiln's exp, sigmoid, softplus and softmax kernels give the C
// library's values there instead: exp(-1e9) is +0 (a masked softmax score weighs nothing, as in
// Keras), exp(-100f) the denormal 3.7e-44, log(sigmoid(-100)) about -100. The inputs put the
// low arguments inside long arrays (vectorized chunks, several threads) and at both ends.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "kiln/runtime/kernels.h"

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

template <typename T>
void expect_tail(OpKind op, T (*exact)(T), const std::vector<T>& low) {
  std::vector<int64_t> at;
  const Array x = with_low_values<T>(low, 100000, at);
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

}  // namespace
}  // namespace kiln::runtime
