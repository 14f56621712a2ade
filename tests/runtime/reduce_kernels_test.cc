// Eager reduction kernels (sum, mean, max, min, prod, logsumexp, argmax, argmin) against naive
// reference loops (a multi-index odometer over the input), across axes, keepdims, dtypes,
// scalars, zero-sized and large inputs; plus determinism across thread counts and errors.
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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Array run_reduce(OpKind op, const Array& x, const Attrs& attrs) {
  return run_op(op, std::span<const Array>(&x, 1), attrs);
}
Attrs reduce_attrs(const std::vector<int64_t>& axes, bool keepdims) {
  return Attrs{{"axes", axes}, {"keepdims", keepdims}};
}
Attrs arg_attrs(int64_t axis, bool keepdims) {
  return Attrs{{"axis", axis}, {"keepdims", keepdims}};
}

// Array of `dt` and `s` with element i = f(i) (converted to the element type).
template <typename F>
Array make_array(DType dt, const Shape& s, F&& f) {
  Array a = Array::empty(dt, s);
  visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = a.data<T>();
    for (int64_t i = 0; i < a.size(); ++i) p[i] = static_cast<T>(f(i));
  });
  return a;
}
// Random values in [lo, hi] (integers for integer dtypes).
Array random(DType dt, const Shape& s, std::mt19937& rng, double lo = -2, double hi = 2) {
  if (is_integer(dt)) {
    std::uniform_int_distribution<int> d{int(lo), int(hi)};
    return make_array(dt, s, [&](int64_t) { return d(rng); });
  }
  std::uniform_real_distribution<double> d(lo, hi);
  return make_array(dt, s, [&](int64_t) { return d(rng); });
}

// ---------------------------------------------------------------- reference

std::vector<int> norm_axes(std::vector<int64_t> axes, int rank) {
  std::vector<int> out;
  if (axes.empty())
    for (int i = 0; i < rank; ++i) out.push_back(i);
  for (int64_t a : axes) out.push_back(int(a < 0 ? a + rank : a));
  return out;
}
bool has(const std::vector<int>& v, int i) { return std::find(v.begin(), v.end(), i) != v.end(); }

Shape expected_shape(const Shape& s, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (int i = 0; i < s.rank(); ++i) {
    if (!has(axes, i))
      out.push_back(s[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

// Odometer: for each flat input index, the flat output index and the coordinate of `axis`.
struct Walk {
  std::vector<int64_t> out, coord;
  int64_t n_out = 1;
};
Walk walk(const Shape& s, const std::vector<int>& axes, int axis = -1) {
  Walk w;
  for (int d = 0; d < s.rank(); ++d)
    if (!has(axes, d)) w.n_out *= s[d];
  std::vector<int64_t> idx(s.rank(), 0);
  for (int64_t i = 0, n = s.num_elements(); i < n; ++i) {
    int64_t o = 0;
    for (int d = 0; d < s.rank(); ++d)
      if (!has(axes, d)) o = o * s[d] + idx[d];
    w.out.push_back(o);
    w.coord.push_back(axis >= 0 ? idx[axis] : 0);
    for (int d = s.rank() - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  return w;
}

// Reference result of a float reduction and a tolerance per output.
struct Ref {
  std::vector<double> val, tol;
};
Ref reference(OpKind op, const Array& x, const std::vector<int>& axes) {
  Walk w = walk(x.shape, axes);
  std::vector<double> xs = doubles_of(x);
  const int64_t n = w.n_out;
  std::vector<long double> acc(n, op == OpKind::Prod ? 1 : 0), abs(n, 0);
  std::vector<double> ext(n, op == OpKind::Min ? kInf : -kInf);
  std::vector<int64_t> count(n, 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    int64_t o = w.out[i];
    double v = xs[i];
    ++count[o];
    abs[o] += std::fabs(v);
    if (op == OpKind::Prod)
      acc[o] *= v;
    else
      acc[o] += v;
    if (std::isnan(v) || std::isnan(ext[o]))
      ext[o] = kNaN;
    else
      ext[o] = op == OpKind::Min ? std::min(ext[o], v) : std::max(ext[o], v);
  }
  if (op == OpKind::LogSumExp) {
    std::fill(acc.begin(), acc.end(), 0);
    for (size_t i = 0; i < xs.size(); ++i) {
      double m = ext[w.out[i]];
      acc[w.out[i]] += std::exp(xs[i] - (std::isfinite(m) ? m : 0));
    }
  }
  const bool f32 = x.dtype == DType::f32;
  const double eps = f32 ? 2e-5 : 1e-12;
  Ref r{std::vector<double>(n), std::vector<double>(n)};
  for (int64_t o = 0; o < n; ++o) {
    switch (op) {
      case OpKind::Sum:
        r.val[o] = double(acc[o]), r.tol[o] = eps * double(abs[o]) + 1e-6;
        break;
      case OpKind::Mean:
        r.val[o] = count[o] ? double(acc[o] / count[o]) : kNaN;
        r.tol[o] = eps * double(abs[o]) / double(std::max<int64_t>(count[o], 1)) + 1e-6;
        break;
      case OpKind::Prod:
        r.val[o] = double(acc[o]), r.tol[o] = (f32 ? 1e-3 : 1e-10) * std::fabs(r.val[o]);
        break;
      case OpKind::Max:
      case OpKind::Min:
        r.val[o] = ext[o], r.tol[o] = 0;
        break;
      default:  // LogSumExp
        r.val[o] = count[o] ? ext[o] + std::log(double(acc[o])) : -kInf;
        r.tol[o] = eps * (std::fabs(r.val[o]) + 1);
        break;
    }
  }
  return r;
}

// Exact reference of an integer reduction, wrapped to the dtype like the kernel.
std::vector<double> reference_int(OpKind op, const Array& x, const std::vector<int>& axes) {
  Walk w = walk(x.shape, axes);
  std::vector<double> xs = doubles_of(x);
  std::vector<uint64_t> acc(w.n_out, op == OpKind::Prod ? 1 : 0);
  std::vector<double> ext(w.n_out, op == OpKind::Min ? kInf : -kInf);
  for (size_t i = 0; i < xs.size(); ++i) {
    uint64_t v = uint64_t(int64_t(xs[i]));
    if (op == OpKind::Prod)
      acc[w.out[i]] *= v;
    else
      acc[w.out[i]] += v;
    ext[w.out[i]] =
        op == OpKind::Min ? std::min(ext[w.out[i]], xs[i]) : std::max(ext[w.out[i]], xs[i]);
  }
  std::vector<double> out(w.n_out);
  for (int64_t o = 0; o < w.n_out; ++o) {
    if (op == OpKind::Max || op == OpKind::Min) {
      out[o] = ext[o];
      continue;
    }
    visit_dtype(x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      out[o] = double(static_cast<T>(acc[o]));
    });
  }
  return out;
}

struct Case {
  Shape shape;
  std::vector<int64_t> axes;
};
// Small and odd shapes, negative and non-adjacent axes, and shapes that reach every code path
// of the kernel: short/normal/long rows, wide/narrow/chunked columns, several stages.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{}, {}},
      {{7}, {}},
      {{7}, {0}},
      {{7}, {-1}},
      {{3, 4}, {0}},
      {{3, 4}, {1}},
      {{3, 4}, {-2, 1}},
      {{2, 3, 4}, {}},
      {{2, 3, 4}, {1}},
      {{2, 3, 4}, {0, 2}},
      {{2, 3, 4}, {-1, 0}},
      {{2, 3, 4}, {1, 2}},
      {{2, 1, 5, 3}, {1}},
      {{2, 1, 5, 3}, {0, 2}},
      {{2, 1, 5, 3}, {1, 3}},
      {{4, 3, 2, 5, 2}, {0, 2, 4}},
      {{4, 3, 2, 5, 2}, {-4, -2}},
      {{100, 5}, {1}},
      {{64, 300}, {1}},
      {{3, 40000}, {1}},
      {{10, 8}, {0}},
      {{100, 6}, {0}},
      {{7, 200, 3}, {1}},
      {{50, 2000}, {0}},
      {{20000, 3}, {0}},
      {{5, 9000, 7}, {1}},
      {{30, 40, 50}, {0, 2}},
      {{40, 3, 50, 2}, {0, 2}},
      {{6, 5, 4, 3, 2, 3}, {0, 2, 3, 5}},
  };
  return c;
}

std::string describe_reduce(const Case& c, bool keepdims, DType dt) {
  std::string axes;
  for (int64_t a : c.axes) axes += std::to_string(a) + " ";
  return std::string(dtype_name(dt)) + " " + c.shape.to_string() + " axes [" + axes +
         "] keepdims " + (keepdims ? "true" : "false");
}

// Runs `op` on every case, dtype and keepdims, and compares against the reference.
void check_op(OpKind op, std::vector<DType> dtypes, double lo, double hi) {
  std::mt19937 rng(1234);
  for (DType dt : dtypes) {
    for (const Case& c : cases()) {
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(describe_reduce(c, keepdims, dt));
        Array x = random(dt, c.shape, rng, lo, hi);
        std::vector<int> axes = norm_axes(c.axes, c.shape.rank());
        Array y = run_reduce(op, x, reduce_attrs(c.axes, keepdims));
        ASSERT_EQ(y.dtype, dt);
        ASSERT_EQ(y.shape, expected_shape(c.shape, axes, keepdims));
        std::vector<double> got = doubles_of(y);
        if (is_integer(dt)) {
          std::vector<double> want = reference_int(op, x, axes);
          for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
        } else {
          Ref want = reference(op, x, axes);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], want.val[i], want.tol[i]) << "at " << i;
        }
      }
    }
  }
}

const std::vector<DType> kAllNumeric = {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8};

TEST(ReduceKernels, SumMatchesReference) { check_op(OpKind::Sum, kAllNumeric, -2, 2); }
TEST(ReduceKernels, SumOfUint8WrapsAround) {
  Array x = make_array(DType::u8, {300}, [](int64_t) { return 200; });
  EXPECT_EQ(doubles_of(run_reduce(OpKind::Sum, x, reduce_attrs({}, false)))[0],
            double((200 * 300) % 256));
  check_op(OpKind::Sum, {DType::u8}, 0, 255);
}
TEST(ReduceKernels, MeanMatchesReference) {
  check_op(OpKind::Mean, {DType::f32, DType::f64}, -2, 2);
}
TEST(ReduceKernels, MaxMatchesReference) { check_op(OpKind::Max, kAllNumeric, -100, 100); }
TEST(ReduceKernels, MinMatchesReference) { check_op(OpKind::Min, kAllNumeric, -100, 100); }
TEST(ReduceKernels, ProdMatchesReference) {
  check_op(OpKind::Prod, {DType::f32, DType::f64}, 0.97, 1.03);
  check_op(OpKind::Prod, {DType::i32, DType::i64}, -1, 2);  // wraps like the reference
}
TEST(ReduceKernels, LogSumExpMatchesReference) {
  check_op(OpKind::LogSumExp, {DType::f32, DType::f64}, -30, 30);
}

TEST(ReduceKernels, LogSumExpIsStableAndHandlesInfinities) {
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    // Rows: huge values; all -inf; one +inf; -inf mixed with finite; a NaN.
    std::vector<double> v = {1000,  1000,  999, -kInf, -kInf, -kInf, kInf, 1,
                             -kInf, -kInf, 5,   -kInf, 1,     kNaN,  2};
    Array x = make_array(dt, {5, 3}, [&](int64_t i) { return v[i]; });
    std::vector<double> y = doubles_of(run_reduce(OpKind::LogSumExp, x, reduce_attrs({1}, false)));
    EXPECT_NEAR(y[0], 1000 + std::log(2 + std::exp(-1.0)), 1e-3);
    EXPECT_EQ(y[1], -kInf);
    EXPECT_EQ(y[2], kInf);
    EXPECT_NEAR(y[3], 5, 1e-6);
    EXPECT_TRUE(std::isnan(y[4]));
    // Same along a column axis (the vectorised column path) and a long row.
    Array xt = make_array(dt, {3, 5}, [&](int64_t i) { return v[(i % 5) * 3 + i / 5]; });
    std::vector<double> yt =
        doubles_of(run_reduce(OpKind::LogSumExp, xt, reduce_attrs({0}, false)));
    EXPECT_EQ(yt[1], -kInf);
    EXPECT_EQ(yt[2], kInf);
    EXPECT_TRUE(std::isnan(yt[4]));
    Array big = make_array(dt, {2, 50000}, [](int64_t i) { return i < 50000 ? -kInf : 88.0; });
    std::vector<double> yb =
        doubles_of(run_reduce(OpKind::LogSumExp, big, reduce_attrs({1}, false)));
    EXPECT_EQ(yb[0], -kInf);
    EXPECT_NEAR(yb[1], 88 + std::log(50000.0), 1e-3);
    // Medium rows (the fused one-row-at-a-time path): all -inf, and a +inf among finite values.
    Array mid = make_array(dt, {2, 100}, [](int64_t i) {
      return i < 100 ? -kInf : i == 150 ? kInf : 1.0;
    });
    std::vector<double> ym =
        doubles_of(run_reduce(OpKind::LogSumExp, mid, reduce_attrs({-1}, false)));
    EXPECT_EQ(ym[0], -kInf);
    EXPECT_EQ(ym[1], kInf);
  }
}

TEST(ReduceKernels, MaxMinPropagateNaN) {
  for (DType dt : {DType::f32, DType::f64}) {
    for (int64_t n : {3, 17, 100, 40000}) {
      for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " nan at " +
                     std::to_string(pos));
        Array x =
            make_array(dt, {2, n}, [&](int64_t i) { return i == n + pos ? kNaN : double(i % 7); });
        for (OpKind op : {OpKind::Max, OpKind::Min}) {
          std::vector<double> y = doubles_of(run_reduce(op, x, reduce_attrs({1}, false)));
          EXPECT_FALSE(std::isnan(y[0]));
          EXPECT_TRUE(std::isnan(y[1]));
          std::vector<double> all = doubles_of(run_reduce(op, x, reduce_attrs({}, false)));
          EXPECT_TRUE(std::isnan(all[0]));
          Array xt =
              make_array(dt, {n, 2}, [&](int64_t i) { return i == 2 * pos + 1 ? kNaN : 1.0; });
          std::vector<double> yt = doubles_of(run_reduce(op, xt, reduce_attrs({0}, false)));
          EXPECT_FALSE(std::isnan(yt[0]));
          EXPECT_TRUE(std::isnan(yt[1]));
        }
      }
    }
  }
}

// ---------------------------------------------------------------- argmax / argmin

std::vector<int64_t> reference_arg(OpKind op, const Array& x, int axis) {
  Walk w = walk(x.shape, {axis}, axis);
  std::vector<double> xs = doubles_of(x);
  std::vector<double> best(w.n_out, 0);
  std::vector<int64_t> idx(w.n_out, -1);
  for (size_t i = 0; i < xs.size(); ++i) {
    int64_t o = w.out[i];
    double v = xs[i], b = best[o];
    bool take = idx[o] < 0 || (std::isnan(v) && !std::isnan(b)) ||
                (!std::isnan(b) && (op == OpKind::ArgMax ? v > b : v < b));
    if (take) best[o] = v, idx[o] = w.coord[i];
  }
  return idx;
}

TEST(ReduceKernels, ArgMaxArgMinMatchReference) {
  std::mt19937 rng(99);
  const std::vector<std::pair<Shape, int64_t>> arg_cases = {
      {{7}, 0},        {{7}, -1},       {{3, 4}, 0},     {{3, 4}, 1},
      {{2, 3, 4}, 1},  {{2, 3, 4}, -3}, {{2, 1, 5}, 1},  {{100, 5}, 1},
      {{3, 40000}, 1}, {{50, 2000}, 0}, {{20000, 3}, 0}, {{5, 900, 7}, 1}};
  for (DType dt : kAllNumeric) {
    for (const auto& [shape, axis] : arg_cases) {
      for (bool keepdims : {false, true}) {
        for (OpKind op : {OpKind::ArgMax, OpKind::ArgMin}) {
          SCOPED_TRACE(std::string(op_name(op)) + " " + std::string(dtype_name(dt)) + " " +
                       shape.to_string() + " axis " + std::to_string(axis) +
                       (keepdims ? " keepdims" : ""));
          // Few distinct values, so ties are common: the first index must win.
          Array x = random(dt, shape, rng, 0, 9);
          int a = int(axis < 0 ? axis + shape.rank() : axis);
          Array y = run_reduce(op, x, arg_attrs(axis, keepdims));
          ASSERT_EQ(y.dtype, DType::i64);
          ASSERT_EQ(y.shape, expected_shape(shape, {a}, keepdims));
          std::vector<int64_t> want = reference_arg(op, x, a);
          const int64_t* got = y.data<int64_t>();
          for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at " << i;
        }
      }
    }
  }
}

TEST(ReduceKernels, ArgMaxArgMinTiesAndNaN) {
  for (DType dt : {DType::f32, DType::f64}) {
    std::vector<double> v = {1, 3, 3, 0, 0, kNaN, 2, kNaN, -kInf, -kInf, 5, 5, -0.0, 0.0, 0};
    Array x = make_array(dt, {5, 3}, [&](int64_t i) { return v[i]; });
    auto arg = [&](OpKind op, const Array& a, int64_t axis) {
      Array y = run_reduce(op, a, arg_attrs(axis, false));
      return std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + y.size());
    };
    EXPECT_EQ(arg(OpKind::ArgMax, x, 1), (std::vector<int64_t>{1, 2, 1, 1, 0}));
    EXPECT_EQ(arg(OpKind::ArgMin, x, 1), (std::vector<int64_t>{0, 2, 1, 0, 0}));
    // The column path: first NaN down each column.
    Array xt = make_array(dt, {3, 5}, [&](int64_t i) { return v[(i % 5) * 3 + i / 5]; });
    EXPECT_EQ(arg(OpKind::ArgMax, xt, 0), (std::vector<int64_t>{1, 2, 1, 1, 0}));
    EXPECT_EQ(arg(OpKind::ArgMin, xt, 0), (std::vector<int64_t>{0, 2, 1, 0, 0}));
  }
}

// ---------------------------------------------------------------- edge cases

TEST(ReduceKernels, ZeroSizedInputsGiveIdentity) {
  for (DType dt : {DType::f32, DType::f64}) {
    Array x = Array::empty(dt, {3, 0});
    auto all = [&](OpKind op, std::vector<int64_t> axes) {
      return doubles_of(run_reduce(op, x, reduce_attrs(axes, false)));
    };
    EXPECT_EQ(all(OpKind::Sum, {1}), (std::vector<double>{0, 0, 0}));
    EXPECT_EQ(all(OpKind::Prod, {1}), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(all(OpKind::LogSumExp, {1}), (std::vector<double>{-kInf, -kInf, -kInf}));
    for (double m : all(OpKind::Mean, {1})) EXPECT_TRUE(std::isnan(m));
    EXPECT_EQ(all(OpKind::Sum, {}), (std::vector<double>{0}));
    Array y = run_reduce(OpKind::Sum, x, reduce_attrs({0}, true));
    EXPECT_EQ(y.shape, Shape({1, 0}));
    EXPECT_EQ(run_reduce(OpKind::Max, x, reduce_attrs({0}, false)).shape, Shape({0}));
    EXPECT_EQ(run_reduce(OpKind::ArgMax, x, arg_attrs(0, false)).shape, Shape({0}));
  }
  Array xi = Array::empty(DType::i32, {0, 4});
  EXPECT_EQ(doubles_of(run_reduce(OpKind::Sum, xi, reduce_attrs({0}, false))),
            (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(doubles_of(run_reduce(OpKind::Prod, xi, reduce_attrs({}, true))),
            (std::vector<double>{1}));
}

TEST(ReduceKernels, ScalarInput) {
  for (DType dt : {DType::f32, DType::f64, DType::i32}) {
    Array x = make_array(dt, {}, [](int64_t) { return -3; });
    for (OpKind op : {OpKind::Sum, OpKind::Max, OpKind::Min, OpKind::Prod}) {
      Array y = run_reduce(op, x, reduce_attrs({}, true));
      EXPECT_EQ(y.shape, Shape{});
      EXPECT_EQ(doubles_of(y)[0], -3);
    }
    if (is_floating(dt)) {
      EXPECT_EQ(doubles_of(run_reduce(OpKind::Mean, x, reduce_attrs({}, false)))[0], -3);
      EXPECT_EQ(doubles_of(run_reduce(OpKind::LogSumExp, x, reduce_attrs({}, false)))[0], -3);
    }
  }
}

TEST(ReduceKernels, LargeInputs) {
  std::mt19937 rng(7);
  const int64_t n = 1000003;
  for (DType dt : {DType::f32, DType::f64, DType::i32}) {
    Array x = random(dt, {n}, rng, -5, 5);
    for (OpKind op : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min, OpKind::LogSumExp}) {
      if (!is_floating(dt) && (op == OpKind::Mean || op == OpKind::LogSumExp)) continue;
      SCOPED_TRACE(std::string(op_name(op)) + " " + std::string(dtype_name(dt)));
      double got = doubles_of(run_reduce(op, x, reduce_attrs({}, false)))[0];
      if (is_integer(dt)) {
        EXPECT_EQ(got, reference_int(op, x, {0})[0]);
      } else {
        Ref want = reference(op, x, {0});
        EXPECT_NEAR(got, want.val[0], want.tol[0]);
      }
    }
  }
  // Long rows (chunked partials) and a wide column reduction of the same data.
  Array m = random(DType::f32, {7, 142861}, rng);
  for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0}}) {
    for (OpKind op : {OpKind::Sum, OpKind::LogSumExp, OpKind::Max}) {
      std::vector<int> ax = norm_axes(axes, 2);
      std::vector<double> got = doubles_of(run_reduce(op, m, reduce_attrs(axes, false)));
      Ref want = reference(op, m, ax);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want.val[i], want.tol[i]);
    }
  }
}

TEST(ReduceKernels, BitwiseIdenticalAcrossThreadCounts) {
  std::mt19937 rng(3);
  Array big = random(DType::f32, {4000037}, rng);
  expect_same_on_any_thread_count(
      [&] { return run_reduce(OpKind::Sum, big, reduce_attrs({}, false)); });
  expect_same_on_any_thread_count(
      [&] { return run_reduce(OpKind::LogSumExp, big, reduce_attrs({}, false)); });
  const std::vector<std::pair<Shape, std::vector<int64_t>>> shaped = {
      {{20000, 200}, {0}},        // column partials
      {{5, 800007}, {1}},         // long rows
      {{2000000, 2}, {1}},        // short rows
      {{200, 1000, 20}, {0, 2}},  // two stages
      {{400, 10000}, {0}}};       // wide columns
  for (const auto& [shape, axes] : shaped) {
    SCOPED_TRACE(shape.to_string());
    Array x = random(DType::f32, shape, rng);
    for (OpKind op : {OpKind::Sum, OpKind::Mean, OpKind::LogSumExp})
      expect_same_on_any_thread_count([&] { return run_reduce(op, x, reduce_attrs(axes, false)); });
  }
}

TEST(ReduceKernels, BadAxesThrowNamingTheOp) {
  TensorType t{DType::f32, {2, 3}};
  auto message = [&](OpKind op, const Attrs& attrs) -> std::string {
    try {
      infer_type(op, std::span<const TensorType>(&t, 1), attrs);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message(OpKind::Sum, reduce_attrs({2}, false)).find("sum"), std::string::npos);
  EXPECT_NE(message(OpKind::Mean, reduce_attrs({-3}, false)).find("mean"), std::string::npos);
  EXPECT_NE(message(OpKind::Max, reduce_attrs({0, -2}, false)).find("max"), std::string::npos);
  EXPECT_NE(message(OpKind::LogSumExp, reduce_attrs({5}, true)).find("logsumexp"),
            std::string::npos);
  EXPECT_NE(message(OpKind::ArgMax, arg_attrs(2, false)).find("argmax"), std::string::npos);
  EXPECT_NE(message(OpKind::ArgMin, arg_attrs(-3, false)).find("argmin"), std::string::npos);
  Array x = Array::zeros(DType::f32, {2, 3});
  EXPECT_THROW(run_reduce(OpKind::Prod, x, reduce_attrs({7}, false)), Error);
  EXPECT_THROW(run_reduce(OpKind::Min, Array::empty(DType::f32, {0, 3}), reduce_attrs({0}, false)),
               Error);
  EXPECT_THROW(run_reduce(OpKind::Mean, Array::zeros(DType::i32, {2}), reduce_attrs({}, false)),
               Error);
}

}  // namespace
}  // namespace kiln::runtime
