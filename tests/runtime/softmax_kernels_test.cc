// Eager softmax / log_softmax kernels against a naive double-precision reference, across axes,
// dtypes and the row, long-row and column code paths; stability, determinism and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/op_table.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/kernel_test_util.h"

namespace kiln::runtime {
namespace {

using kernel_test::doubles_of;
using kernel_test::expect_same_on_any_thread_count;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

Array run_softmax(OpKind op, const Array& x, int64_t axis) {
  return run_op(op, std::span<const Array>(&x, 1), Attrs{{"axis", axis}});
}

Array random_softmax_input(DType dt, const Shape& s, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  Array a = Array::empty(dt, s);
  for (int64_t i = 0; i < a.size(); ++i) {
    if (dt == DType::f32)
      a.data<float>()[i] = float(d(rng));
    else
      a.data<double>()[i] = d(rng);
  }
  return a;
}

// Reference: every slice along `axis` normalised in double with an explicit index walk.
std::vector<double> softmax_reference(bool log, const Array& x, int axis) {
  const Shape& s = x.shape;
  int64_t outer = 1, n = s[axis], inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  std::vector<double> xs = doubles_of(x), y(xs.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t r) { return (o * n + r) * inner + j; };
      double m = -kInfinity, sum = 0;
      for (int64_t r = 0; r < n; ++r) m = std::max(m, xs[at(r)]);
      for (int64_t r = 0; r < n; ++r) sum += std::exp(xs[at(r)] - m);
      for (int64_t r = 0; r < n; ++r)
        y[at(r)] = log ? xs[at(r)] - m - std::log(sum) : std::exp(xs[at(r)] - m) / sum;
    }
  }
  return y;
}

TEST(SoftmaxKernels, MatchesReference) {
  std::mt19937 rng(11);
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{5}, 0},          {{3, 4}, 1},        {{3, 4}, 0},    {{3, 4}, -1},
      {{2, 3, 4}, 1},    {{2, 3, 4}, -3},    {{2, 1, 5}, 1}, {{7, 1}, 1},
      {{64, 300}, 1},    {{3, 40000}, -1},   {{1000, 3}, 0}, {{4, 700, 9}, 1},
      {{6, 2, 3000}, 1}, {{2, 300, 100}, 1}, {{0, 4}, 1},    {{4, 0}, 1}};
  for (DType dt : {DType::f32, DType::f64}) {
    for (const auto& [shape, axis] : cases) {
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(log ? "log_softmax " : "softmax ") + std::string(dtype_name(dt)) +
                     " " + shape.to_string() + " axis " + std::to_string(axis));
        Array x = random_softmax_input(dt, shape, rng, -10, 10);
        Array y = run_softmax(log ? OpKind::LogSoftmax : OpKind::Softmax, x, axis);
        ASSERT_EQ(y.type(), x.type());
        int a = int(axis < 0 ? axis + shape.rank() : axis);
        std::vector<double> got = doubles_of(y), want = softmax_reference(log, x, a);
        const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], tol * (log ? 1 + std::fabs(want[i]) : 1)) << "at " << i;
      }
    }
  }
}

TEST(SoftmaxKernels, StableForLargeAndInfiniteInputs) {
  for (DType dt : {DType::f32, DType::f64}) {
    Array x = Array::empty(dt, {2, 3});
    std::vector<double> v = {1000, 1001, 1002, -kInfinity, 0, -kInfinity};
    for (int i = 0; i < 6; ++i) {
      if (dt == DType::f32)
        x.data<float>()[i] = float(v[i]);
      else
        x.data<double>()[i] = v[i];
    }
    std::vector<double> y = doubles_of(run_softmax(OpKind::Softmax, x, 1));
    std::vector<double> ly = doubles_of(run_softmax(OpKind::LogSoftmax, x, 1));
    const double s = 1 + std::exp(-1.0) + std::exp(-2.0);
    EXPECT_NEAR(y[2], 1 / s, 1e-6);
    EXPECT_NEAR(y[0], std::exp(-2.0) / s, 1e-6);
    EXPECT_NEAR(ly[2], -std::log(s), 1e-5);
    EXPECT_EQ(y[3], 0);
    EXPECT_EQ(y[4], 1);
    EXPECT_EQ(ly[3], -kInfinity);
    EXPECT_EQ(ly[4], 0);
  }
}

TEST(SoftmaxKernels, BitwiseIdenticalAcrossThreadCounts) {
  std::mt19937 rng(5);
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{2, 1000003}, 1}, {{4000, 500}, 1}, {{3000, 700}, 0}, {{50, 300, 40}, 1}};
  for (const auto& [shape, axis] : cases) {
    SCOPED_TRACE(shape.to_string());
    Array x = random_softmax_input(DType::f32, shape, rng, -20, 20);
    for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax})
      expect_same_on_any_thread_count([&] { return run_softmax(op, x, axis); });
  }
}

TEST(SoftmaxKernels, BadAxisThrowsNamingTheOp) {
  Array x = Array::zeros(DType::f32, {2, 3});
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    try {
      run_softmax(op, x, 2);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(op_name(op)), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(run_softmax(OpKind::Softmax, Array::zeros(DType::f32, {}), 0), Error);
  EXPECT_THROW(run_softmax(OpKind::Softmax, Array::zeros(DType::i32, {3}), 0), Error);
}

}  // namespace
}  // namespace kiln::runtime
