// Reductions (sum, mean, max, min, prod, logsumexp, argmax, argmin) and softmax/log_softmax
// against a naive reference that groups elements by output index: axes {}, one, several,
// negative and unsorted, keepdims on and off, scalars, zero-sized tensors, special values.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "kiln/kiln.h"
#include "tests/frontend/op_test_util.h"

namespace kiln {
namespace {

using test::expect_tensor;
using test::for_each_index;
using test::kFloatDTypes;
using test::rounded;

using test::kInf;
using test::kNaN;

using Group = std::vector<double>;
using GroupFn = std::function<double(const Group&)>;

struct Reduced {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

bool is_reduced(const std::vector<int64_t>& axes, size_t d, size_t rank) {
  if (axes.empty()) return true;
  for (int64_t a : axes)
    if (size_t(a < 0 ? a + int64_t(rank) : a) == d) return true;
  return false;
}

// Reduces `x` of `shape` over `axes` ({} = all) by applying f to each output's group of inputs
// (in row-major order of the input).
Reduced ref_reduce(const std::vector<double>& x, const std::vector<int64_t>& shape,
                   const std::vector<int64_t>& axes, bool keepdims, const GroupFn& f) {
  Reduced r;
  std::vector<int64_t> kept;  // output shape without keepdims' 1s
  for (size_t d = 0; d < shape.size(); ++d) {
    bool red = is_reduced(axes, d, shape.size());
    if (!red) kept.push_back(shape[d]);
    if (!red || keepdims) r.shape.push_back(red ? 1 : shape[d]);
  }
  int64_t n_out = 1;
  for (int64_t d : kept) n_out *= d;
  std::vector<Group> groups(static_cast<size_t>(n_out));
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!is_reduced(axes, d, shape.size())) o = o * shape[d] + idx[d];
    groups[size_t(o)].push_back(x[size_t(flat)]);
  });
  for (const Group& g : groups) r.values.push_back(f(g));
  return r;
}

double g_sum(const Group& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double g_mean(const Group& g) { return g_sum(g) / double(g.size()); }
double g_max(const Group& g) { return *std::max_element(g.begin(), g.end()); }
double g_min(const Group& g) { return *std::min_element(g.begin(), g.end()); }
double g_prod(const Group& g) {
  double p = 1;
  for (double v : g) p *= v;
  return p;
}
double g_logsumexp(const Group& g) {
  if (g.empty()) return -kInf;
  double m = g_max(g), s = 0;
  for (double v : g) s += std::exp(v - m);
  return m + std::log(s);
}
double g_argmax(const Group& g) { return double(std::max_element(g.begin(), g.end()) - g.begin()); }
double g_argmin(const Group& g) { return double(std::min_element(g.begin(), g.end()) - g.begin()); }

using ReduceFn = Tensor (*)(const Tensor&, const Axes&, bool);

struct ReduceCase {
  const char* name;
  ReduceFn op;
  GroupFn ref;
  bool float_only;
};

const std::vector<ReduceCase>& reduce_cases() {
  static const std::vector<ReduceCase> cases = {
      {"sum", sum, g_sum, false},    {"mean", mean, g_mean, true},
      {"max", max, g_max, false},    {"min", min, g_min, false},
      {"prod", prod, g_prod, false}, {"logsumexp", logsumexp, g_logsumexp, true},
  };
  return cases;
}

const std::vector<std::vector<int64_t>> kAxesCases = {{},     {0},    {1},      {2},       {-1},
                                                      {0, 2}, {2, 0}, {-3, -1}, {0, 1, 2}, {1, 2}};

TEST(ReduceOps, MatchReferenceOverAllAxisCombinations) {
  const std::vector<int64_t> shape = {2, 3, 4};
  for (const ReduceCase& c : reduce_cases()) {
    for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
      if (c.float_only && !is_floating(dt)) continue;
      // Integers from {-2, -1, 1, 2} (a product of 24 fits int32); floats near 1 for prod.
      std::vector<double> x;
      if (!is_floating(dt)) {
        for (double v : test::test_values(24, 0, 4, 7)) x.push_back(double(int(v) - 2 + (v >= 2)));
      } else if (std::string(c.name) == "prod") {
        x = rounded(test::test_values(24, 0.5, 1.5, 7), dt);
      } else {
        x = rounded(test::test_values(24, -4, 4, 7), dt);
      }
      Tensor t = tensor(x, Shape(shape), dt);
      for (const auto& axes : kAxesCases) {
        for (bool keep : {false, true}) {
          SCOPED_TRACE(fmt::format("{} {} axes [{}] keepdims={}", c.name, dtype_name(dt),
                                   fmt::join(axes, ", "), keep));
          Reduced r = ref_reduce(x, shape, axes, keep, c.ref);
          double tol = dt == DType::f32 ? 1e-5 : (dt == DType::f64 ? 1e-12 : 0);
          expect_tensor(c.op(t, axes, keep), dt, Shape(r.shape), r.values, tol, tol);
        }
      }
    }
  }
}

TEST(ReduceOps, ArgMaxArgMinPickTheFirstExtremeAlongEachAxis) {
  // Ties everywhere: values from {0, 1, 2}.
  const std::vector<int64_t> shape = {2, 3, 4};
  std::vector<double> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double((i * 5 + i / 7) % 3);
  for (DType dt : {DType::f32, DType::i32, DType::i64}) {
    Tensor t = tensor(x, Shape(shape), dt);
    for (int64_t axis : {0, 1, 2, -1, -2}) {
      for (bool keep : {false, true}) {
        SCOPED_TRACE(fmt::format("{} axis {} keepdims={}", dtype_name(dt), axis, keep));
        Reduced mx = ref_reduce(x, shape, {axis}, keep, g_argmax);
        Reduced mn = ref_reduce(x, shape, {axis}, keep, g_argmin);
        expect_tensor(argmax(t, axis, keep), DType::i64, Shape(mx.shape), mx.values, 0);
        expect_tensor(argmin(t, axis, keep), DType::i64, Shape(mn.shape), mn.values, 0);
      }
    }
  }
  // Default axis is the last.
  expect_tensor(argmax(tensor({1.f, 9.f, 3.f, 7.f, 2.f, 7.f}, Shape{2, 3})), DType::i64, Shape{2},
                {1, 0});
}

TEST(ReduceOps, SoftmaxAndLogSoftmaxAlongEachAxis) {
  const std::vector<int64_t> shape = {2, 3, 4};
  for (DType dt : kFloatDTypes) {
    std::vector<double> x = rounded(test::test_values(24, -5, 5, 11), dt);
    Tensor t = tensor(x, Shape(shape), dt);
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      SCOPED_TRACE(fmt::format("{} axis {}", dtype_name(dt), axis));
      Reduced lse = ref_reduce(x, shape, {axis}, true, g_logsumexp);
      // Broadcast the per-slice logsumexp back over the axis.
      std::vector<double> sm, lsm;
      int a = int(axis < 0 ? axis + 3 : axis);
      for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& idx) {
        int64_t o = 0;
        for (int d = 0; d < 3; ++d) o = o * lse.shape[size_t(d)] + (d == a ? 0 : idx[size_t(d)]);
        double l = x[size_t(flat)] - lse.values[size_t(o)];
        lsm.push_back(l);
        sm.push_back(std::exp(l));
      });
      double tol = dt == DType::f32 ? 1e-5 : 1e-12;
      expect_tensor(softmax(t, axis), dt, Shape(shape), sm, tol, 1e-7);
      expect_tensor(log_softmax(t, axis), dt, Shape(shape), lsm, tol, tol);
    }
  }
  // Default axis is the last; each row sums to one.
  Tensor s = softmax(tensor({1.0, 2.0, 3.0, 1.0, 1.0, 1.0}, Shape{2, 3}));
  expect_tensor(sum(s, {-1}), DType::f64, Shape{2}, {1, 1}, 1e-15);
  expect_tensor(slice(s, {1, 0}, {2, 3}), DType::f64, Shape{1, 3}, {1. / 3, 1. / 3, 1. / 3}, 1e-15);
}

TEST(ReduceOps, SoftmaxFamilyIsStableForLargeInputs) {
  for (DType dt : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = tensor({1000.0, 1001.0, 1002.0}, Shape{3}, dt);
    double z = 1 + std::exp(-1.0) + std::exp(-2.0);
    expect_tensor(softmax(x), dt, Shape{3}, {std::exp(-2.0) / z, std::exp(-1.0) / z, 1 / z}, 1e-6);
    expect_tensor(log_softmax(x), dt, Shape{3}, {-2 - std::log(z), -1 - std::log(z), -std::log(z)},
                  1e-6);
    expect_tensor(logsumexp(x), dt, Shape{}, {1002 + std::log(z)}, 1e-7);
    expect_tensor(log_softmax(tensor({0.0, -1000.0}, Shape{2}, dt)), dt, Shape{2}, {0, -1000},
                  1e-7);
    expect_tensor(logsumexp(tensor({-1000.0, -1000.0}, Shape{2}, dt)), dt, Shape{},
                  {-1000 + std::log(2.0)}, 1e-7);
  }
}

TEST(ReduceOps, SpecialValues) {
  // NaN propagates through max/min; argmax/argmin return the first NaN.
  Tensor n = tensor({1.f, float(kNaN), 3.f, float(kNaN)});
  expect_tensor(max(n), DType::f32, Shape{}, {kNaN});
  expect_tensor(min(n), DType::f32, Shape{}, {kNaN});
  expect_tensor(argmax(n), DType::i64, Shape{}, {1}, 0);
  expect_tensor(argmin(n), DType::i64, Shape{}, {1}, 0);
  expect_tensor(sum(n), DType::f32, Shape{}, {kNaN});
  // logsumexp: all -inf gives -inf; a +inf gives +inf.
  expect_tensor(logsumexp(tensor({-kInf, -kInf})), DType::f64, Shape{}, {-kInf});
  expect_tensor(logsumexp(tensor({1.0, kInf})), DType::f64, Shape{}, {kInf});
  expect_tensor(max(tensor({-kInf, -kInf})), DType::f64, Shape{}, {-kInf});
}

TEST(ReduceOps, Scalars) {
  Tensor s = scalar(2.5, DType::f64);
  for (bool keep : {false, true}) {
    SCOPED_TRACE(keep);
    expect_tensor(sum(s, {}, keep), DType::f64, Shape{}, {2.5});
    expect_tensor(mean(s, {}, keep), DType::f64, Shape{}, {2.5});
    expect_tensor(max(s, {}, keep), DType::f64, Shape{}, {2.5});
    expect_tensor(min(s, {}, keep), DType::f64, Shape{}, {2.5});
    expect_tensor(prod(s, {}, keep), DType::f64, Shape{}, {2.5});
    expect_tensor(logsumexp(s, {}, keep), DType::f64, Shape{}, {2.5});
  }
  // A reduction of a (1,)-shaped tensor to a scalar.
  expect_tensor(sum(tensor({4}, Shape{1}, DType::i32)), DType::i32, Shape{}, {4});
  expect_tensor(argmax(tensor({4.f}, Shape{1})), DType::i64, Shape{}, {0});
}

TEST(ReduceOps, ZeroSizedTensors) {
  Tensor e = zeros({0, 3});
  // Reducing the empty axis gives the identity.
  expect_tensor(sum(e, {0}), DType::f32, Shape{3}, {0, 0, 0});
  expect_tensor(prod(e, {0}), DType::f32, Shape{3}, {1, 1, 1});
  expect_tensor(mean(e, {0}), DType::f32, Shape{3}, {kNaN, kNaN, kNaN});
  expect_tensor(logsumexp(e, {0}), DType::f32, Shape{3}, {-kInf, -kInf, -kInf});
  expect_tensor(sum(e), DType::f32, Shape{}, {0});
  expect_tensor(sum(e, {}, true), DType::f32, Shape{1, 1}, {0});
  expect_tensor(sum(e, {0}, true), DType::f32, Shape{1, 3}, {0, 0, 0});
  expect_tensor(sum(zeros({0}, DType::i64)), DType::i64, Shape{}, {0});
  // Reducing a non-empty axis of an empty tensor gives an empty result.
  expect_tensor(sum(e, {1}), DType::f32, Shape{0}, {});
  expect_tensor(max(e, {1}), DType::f32, Shape{0}, {});
  expect_tensor(max(e, {1}, true), DType::f32, Shape{0, 1}, {});
  expect_tensor(argmax(e, 1), DType::i64, Shape{0}, {});
  expect_tensor(softmax(e), DType::f32, Shape{0, 3}, {});
  expect_tensor(log_softmax(e, 0), DType::f32, Shape{0, 3}, {});
}

TEST(ReduceOps, IntegerSumAndProd) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, Shape{2, 3}, DType::i64);
  expect_tensor(sum(x, {0}), DType::i64, Shape{3}, {5, 7, 9});
  expect_tensor(prod(x, {1}), DType::i64, Shape{2}, {6, 120});
  expect_tensor(max(x, {1}, true), DType::i64, Shape{2, 1}, {3, 6});
  // Exact for values beyond float precision.
  Tensor big = tensor(std::vector<int64_t>{(int64_t(1) << 53) + 1, 1});
  EXPECT_EQ(sum(big).item<int64_t>(), (int64_t(1) << 53) + 2);
}

TEST(ReduceOps, LargeReductionsMatchReferenceAndIgnoreThreadCount) {
  // 2^20 + 3 values: long enough for the parallel path, odd length for the tails.
  const size_t n = (size_t(1) << 20) + 3;
  std::vector<double> x = test::test_values(n, -1, 1, 5);
  Tensor t = tensor(x);
  double ref = 0, ref_max = -kInf;
  for (double v : x) ref += v, ref_max = std::max(ref_max, v);
  expect_tensor(sum(t), DType::f64, Shape{}, {ref}, 1e-10, 1e-10);
  expect_tensor(mean(t), DType::f64, Shape{}, {ref / double(n)}, 1e-10, 1e-13);
  expect_tensor(max(t), DType::f64, Shape{}, {ref_max}, 0);
  EXPECT_EQ(argmax(t).item<int64_t>(), int64_t(std::max_element(x.begin(), x.end()) - x.begin()));

  // Column sums of a (1023, 1025) float32 matrix.
  Tensor m = reshape(cast(slice(t, {0}, {1023 * 1025}), DType::f32), {1023, 1025});
  std::vector<float> mv = m.to_vector<float>();
  std::vector<double> col(1025, 0.0);
  for (size_t i = 0; i < 1023; ++i)
    for (size_t j = 0; j < 1025; ++j) col[j] += mv[i * 1025 + j];
  expect_tensor(sum(m, {0}), DType::f32, Shape{1025}, col, 1e-4, 1e-4);

  // Bitwise the same on one and two threads.
  const int saved = num_threads();
  set_num_threads(1);
  Tensor s1 = sum(m), c1 = sum(m, {0}), r1 = logsumexp(m, {1}), sm1 = softmax(m, 0);
  set_num_threads(2);
  Tensor s2 = sum(m), c2 = sum(m, {0}), r2 = logsumexp(m, {1}), sm2 = softmax(m, 0);
  set_num_threads(saved);
  EXPECT_TRUE(test::bitwise_equal(s1, s2));
  EXPECT_TRUE(test::bitwise_equal(c1, c2));
  EXPECT_TRUE(test::bitwise_equal(r1, r2));
  EXPECT_TRUE(test::bitwise_equal(sm1, sm2));
}

}  // namespace
}  // namespace kiln
