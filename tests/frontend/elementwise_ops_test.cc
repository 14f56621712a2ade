// Elementwise ops of kiln/kiln.h against std:: references: unary math, binary arithmetic,
// integer division, casts, comparisons, logic, where, numpy broadcasting, operators, and an
// input large enough to take the parallel path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kiln/kiln.h"
#include "tests/frontend/op_test_util.h"

namespace kiln {
namespace {

using test::expect_tensor;
using test::kFloatDTypes;
using test::ref_binary;
using test::rounded;
using ::testing::HasSubstr;

using test::kInf;
using test::kNaN;

// Tolerances for transcendental functions (vectorised float approximations are a few ulp off).
double math_rtol(DType t) { return t == DType::f32 ? 1e-5 : 1e-12; }
double math_atol(DType t) { return t == DType::f32 ? 1e-6 : 1e-14; }

std::vector<double> map(const std::vector<double>& v, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double x : v) out.push_back(f(x));
  return out;
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double stable_softplus_ref(double x) { return x > 30 ? x + std::exp(-x) : std::log1p(std::exp(x)); }

struct ElementwiseUnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  std::vector<double> inputs;
};

std::vector<ElementwiseUnaryCase> float_unary_cases() {
  const std::vector<double> any = {-3.5, -1, -0.25, 0, 0.5, 1, 2.75};
  const std::vector<double> pos = {0.01, 0.5, 1, 2, 100};
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, any},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, any},
      {"sign", [](const Tensor& x) { return sign(x); },
       [](double x) { return double((x > 0) - (x < 0)); }, any},
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }, any},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, pos},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); },
       pos},
      {"exp",
       [](const Tensor& x) { return exp(x); },
       [](double x) { return std::exp(x); },
       {-20, -1, 0, 0.5, 1, 20}},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, pos},
      {"log1p",
       [](const Tensor& x) { return log1p(x); },
       [](double x) { return std::log1p(x); },
       {-0.5, 0, 1e-7, 1, 10}},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, any},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, any},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; },
       any},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); },
       [](double x) { return x > 0 ? x : 0.2 * x; }, any},
      {"leaky_relu(0.05)", [](const Tensor& x) { return leaky_relu(x, 0.05); },
       [](double x) { return x > 0 ? x : 0.05 * x; }, any},
      {"gelu", [](const Tensor& x) { return gelu(x); }, gelu_ref, any},
      {"gelu(approximate)", [](const Tensor& x) { return gelu(x, true); }, gelu_tanh_ref, any},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, any},
      {"softplus", [](const Tensor& x) { return softplus(x); }, stable_softplus_ref, any},
  };
}

TEST(ElementwiseOps, FloatUnaryOpsMatchStdReference) {
  for (const ElementwiseUnaryCase& c : float_unary_cases()) {
    for (DType dt : kFloatDTypes) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dt)));
      std::vector<double> in = rounded(c.inputs, dt);
      Tensor x = tensor(in, Shape{int64_t(in.size())}, dt);
      expect_tensor(c.op(x), dt, x.shape(), map(in, c.ref), math_rtol(dt), math_atol(dt));
    }
  }
}

TEST(ElementwiseOps, FloatUnaryOpsKeepShapeOfHigherRankAndScalars) {
  Tensor x = tensor({1.f, 4.f, 9.f, 16.f, 25.f, 36.f}, Shape{2, 1, 3});
  expect_tensor(sqrt(x), DType::f32, Shape{2, 1, 3}, {1, 2, 3, 4, 5, 6});
  expect_tensor(exp(scalar(0.0, DType::f64)), DType::f64, Shape{}, {1});
}

TEST(ElementwiseOps, SpecialValues) {
  for (DType dt : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    expect_tensor(sqrt(tensor({-1.0, 0.0}, Shape{2}, dt)), dt, Shape{2}, {kNaN, 0});
    expect_tensor(log(tensor({0.0, -1.0}, Shape{2}, dt)), dt, Shape{2}, {-kInf, kNaN});
    expect_tensor(rsqrt(tensor({0.0}, Shape{1}, dt)), dt, Shape{1}, {kInf});
    expect_tensor(exp(tensor({-kInf, 1000.0}, Shape{2}, dt)), dt, Shape{2}, {0, kInf});
    expect_tensor(tanh(tensor({-50.0, 50.0}, Shape{2}, dt)), dt, Shape{2}, {-1, 1});
    expect_tensor(sigmoid(tensor({-200.0, 200.0}, Shape{2}, dt)), dt, Shape{2}, {0, 1}, 0, 1e-30);
    expect_tensor(div(tensor({1.0, -1.0, 0.0}, Shape{3}, dt), zeros({3}, dt)), dt, Shape{3},
                  {kInf, -kInf, kNaN});
  }
}

TEST(ElementwiseOps, MaximumAndMinimumPropagateNaNFromEitherSide) {
  for (DType dt : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = tensor({1.0, kNaN, kNaN, -kInf}, Shape{4}, dt);
    Tensor b = tensor({kNaN, 1.0, kNaN, 2.0}, Shape{4}, dt);
    expect_tensor(maximum(a, b), dt, Shape{4}, {kNaN, kNaN, kNaN, 2});
    expect_tensor(maximum(b, a), dt, Shape{4}, {kNaN, kNaN, kNaN, 2});
    expect_tensor(minimum(a, b), dt, Shape{4}, {kNaN, kNaN, kNaN, -kInf});
    expect_tensor(minimum(b, a), dt, Shape{4}, {kNaN, kNaN, kNaN, -kInf});
    // Broadcast scalar NaN on either side.
    expect_tensor(maximum(scalar(kNaN, dt), tensor({1.0, 2.0}, Shape{2}, dt)), dt, Shape{2},
                  {kNaN, kNaN});
    expect_tensor(maximum(tensor({1.0, 2.0}, Shape{2}, dt), scalar(kNaN, dt)), dt, Shape{2},
                  {kNaN, kNaN});
    // relu and abs keep NaN too.
    expect_tensor(relu(tensor({kNaN}, Shape{1}, dt)), dt, Shape{1}, {kNaN});
    expect_tensor(abs(tensor({kNaN}, Shape{1}, dt)), dt, Shape{1}, {kNaN});
  }
}

TEST(ElementwiseOps, SoftplusIsStableForLargeMagnitudes) {
  // log1p(exp(x)) overflows for large x; softplus must give x there and ~0 for large -x.
  expect_tensor(softplus(tensor({100.f, 88.f, 1e30f})), DType::f32, Shape{3}, {100, 88, 1e30});
  expect_tensor(softplus(tensor({-100.f, -1e30f})), DType::f32, Shape{2}, {0, 0}, 0, 1e-30);
  expect_tensor(softplus(tensor({1000.0, 710.0, -1000.0})), DType::f64, Shape{3}, {1000, 710, 0},
                1e-15, 0);
  // Small but representable: softplus(-30) = log1p(e^-30) ~ 9.3576e-14.
  expect_tensor(softplus(tensor({-30.0})), DType::f64, Shape{1}, {std::log1p(std::exp(-30.0))},
                1e-12);
}

TEST(ElementwiseOps, IntegerUnaryOps) {
  const std::vector<double> v = {-7, -1, 0, 3, 12};
  for (DType dt : {DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = tensor(v, Shape{5}, dt);
    expect_tensor(neg(x), dt, Shape{5}, {7, 1, 0, -3, -12});
    expect_tensor(abs(x), dt, Shape{5}, {7, 1, 0, 3, 12});
    expect_tensor(sign(x), dt, Shape{5}, {-1, -1, 0, 1, 1});
    expect_tensor(square(x), dt, Shape{5}, {49, 1, 0, 9, 144});
    expect_tensor(relu(x), dt, Shape{5}, {0, 0, 0, 3, 12});
  }
}

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
};

TEST(ElementwiseOps, FloatBinaryOpsMatchReference) {
  const std::vector<BinaryCase> cases = {
      {"add", [](auto& a, auto& b) { return add(a, b); }, [](double a, double b) { return a + b; }},
      {"sub", [](auto& a, auto& b) { return sub(a, b); }, [](double a, double b) { return a - b; }},
      {"mul", [](auto& a, auto& b) { return mul(a, b); }, [](double a, double b) { return a * b; }},
      {"div", [](auto& a, auto& b) { return div(a, b); }, [](double a, double b) { return a / b; }},
      {"pow", [](auto& a, auto& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
  };
  for (const BinaryCase& c : cases) {
    for (DType dt : kFloatDTypes) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(dt)));
      // pow needs a positive base; the others see both signs.
      bool positive = std::string(c.name) == "pow";
      std::vector<double> a = rounded(test::test_values(6, positive ? 0.1 : -4, 4, 1), dt);
      std::vector<double> b = rounded(test::test_values(6, positive ? -2 : -4, 3, 2), dt);
      Tensor ta = tensor(a, Shape{2, 3}, dt), tb = tensor(b, Shape{2, 3}, dt);
      expect_tensor(c.op(ta, tb), dt, Shape{2, 3}, ref_binary(a, {2, 3}, b, {2, 3}, c.ref),
                    math_rtol(dt), math_atol(dt));
    }
  }
  expect_tensor(pow(tensor({2.f, 0.f, 9.f, -2.f}), tensor({10.f, 0.f, 0.5f, 3.f})), DType::f32,
                Shape{4}, {1024, 1, 3, -8});
}

TEST(ElementwiseOps, IntegerArithmetic) {
  for (DType dt : {DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = tensor({7, -7, 0, 100}, Shape{4}, dt);
    Tensor b = tensor({2, 3, -5, 100}, Shape{4}, dt);
    expect_tensor(add(a, b), dt, Shape{4}, {9, -4, -5, 200});
    expect_tensor(sub(a, b), dt, Shape{4}, {5, -10, 5, 0});
    expect_tensor(mul(a, b), dt, Shape{4}, {14, -21, 0, 10000});
    expect_tensor(maximum(a, b), dt, Shape{4}, {7, 3, 0, 100});
    expect_tensor(minimum(a, b), dt, Shape{4}, {2, -7, -5, 100});
  }
}

TEST(ElementwiseOps, IntegerDivisionTruncatesTowardZero) {
  for (DType dt : {DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = tensor({7, -7, 7, -7, 6, 0, 1}, Shape{7}, dt);
    Tensor b = tensor({2, 2, -2, -2, 3, 5, 9}, Shape{7}, dt);
    expect_tensor(div(a, b), dt, Shape{7}, {3, -3, -3, 3, 2, 0, 0});
    // Broadcast divisor.
    expect_tensor(div(a, scalar(4, dt)), dt, Shape{7}, {1, -1, 1, -1, 1, 0, 0});
  }
}

TEST(ElementwiseOps, IntegerDivisionOverflowWrapsInsteadOfTrapping) {
  // INT_MIN / -1 does not fit; like numpy it wraps to INT_MIN (x86 would raise SIGFPE).
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(div(tensor({kMin32, kMin32, 9}), tensor({-1, 1, -1})).to_vector<int32_t>(),
            (std::vector<int32_t>{kMin32, kMin32, -9}));
  EXPECT_EQ(
      div(tensor(std::vector<int64_t>{kMin64, 8}), scalar(-1, DType::i64)).to_vector<int64_t>(),
      (std::vector<int64_t>{kMin64, -8}));
}

TEST(ElementwiseOps, IntegerDivisionByZeroThrows) {
  for (DType dt : {DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = tensor({1, 2, 3}, Shape{3}, dt);
    EXPECT_THAT(test::error_message([&] {
                  div(a, tensor({1, 0, 1}, Shape{3}, dt));
                }),
                HasSubstr("division by zero"));
    EXPECT_THAT(test::error_message([&] { div(a, scalar(0, dt)); }), HasSubstr("division by zero"));
    EXPECT_THROW(a / 0.0, Error);
  }
}

TEST(ElementwiseOps, CastBetweenAllDTypePairs) {
  const std::vector<double> v = {0, 1, 2, 100};
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      std::vector<double> in = rounded(v, from);
      Tensor y = cast(tensor(in, Shape{2, 2}, from), to);
      expect_tensor(y, to, Shape{2, 2}, rounded(in, to), 0, 0);
    }
  }
}

TEST(ElementwiseOps, CastConversions) {
  // Float to integer truncates toward zero; to bool is "!= 0"; float64 -> float32 rounds.
  Tensor f = tensor({-2.7f, -0.5f, 0.5f, 2.7f});
  expect_tensor(cast(f, DType::i32), DType::i32, Shape{4}, {-2, 0, 0, 2});
  expect_tensor(cast(f, DType::i64), DType::i64, Shape{4}, {-2, 0, 0, 2});
  expect_tensor(cast(tensor({0.0, 0.25, -3.0}), DType::b8), DType::b8, Shape{3}, {0, 1, 1});
  expect_tensor(cast(tensor({0, 7, -1}), DType::b8), DType::b8, Shape{3}, {0, 1, 1});
  Tensor d = cast(tensor({0.1}), DType::f32);
  EXPECT_EQ(d.item<float>(), 0.1f);
  expect_tensor(cast(tensor<bool>({true, false}), DType::f64), DType::f64, Shape{2}, {1, 0});
  expect_tensor(cast(tensor<uint8_t>({255, 0}), DType::i32), DType::i32, Shape{2}, {255, 0});
  // Same dtype: a no-op.
  Tensor same = tensor({1.f, 2.f});
  EXPECT_EQ(cast(same, DType::f32).id(), same.id());
}

TEST(ElementwiseOps, Comparisons) {
  // (2, 3) against (3,): broadcasting, results are bool.
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = tensor({1, 2, 3, 4, 5, 6}, Shape{2, 3}, dt);
    Tensor b = tensor({2, 2, 5}, Shape{3}, dt);
    expect_tensor(equal(a, b), DType::b8, Shape{2, 3}, {0, 1, 0, 0, 0, 0});
    expect_tensor(not_equal(a, b), DType::b8, Shape{2, 3}, {1, 0, 1, 1, 1, 1});
    expect_tensor(less(a, b), DType::b8, Shape{2, 3}, {1, 0, 1, 0, 0, 0});
    expect_tensor(less_equal(a, b), DType::b8, Shape{2, 3}, {1, 1, 1, 0, 0, 0});
    expect_tensor(greater(a, b), DType::b8, Shape{2, 3}, {0, 0, 0, 1, 1, 1});
    expect_tensor(greater_equal(a, b), DType::b8, Shape{2, 3}, {0, 1, 0, 1, 1, 1});
  }
  // NaN compares unequal to everything, itself included.
  Tensor n = tensor({float(kNaN), 1.f});
  expect_tensor(equal(n, n), DType::b8, Shape{2}, {0, 1});
  expect_tensor(not_equal(n, n), DType::b8, Shape{2}, {1, 0});
  // equal / not_equal accept bool.
  Tensor p = tensor<bool>({true, true, false, false}), q = tensor<bool>({true, false, true, false});
  expect_tensor(equal(p, q), DType::b8, Shape{4}, {1, 0, 0, 1});
  expect_tensor(not_equal(p, q), DType::b8, Shape{4}, {0, 1, 1, 0});
}

TEST(ElementwiseOps, LogicalOps) {
  Tensor p = tensor<bool>({false, true}, Shape{2, 1});
  Tensor q = tensor<bool>({false, true}, Shape{1, 2});
  expect_tensor(logical_and(p, q), DType::b8, Shape{2, 2}, {0, 0, 0, 1});
  expect_tensor(logical_or(p, q), DType::b8, Shape{2, 2}, {0, 1, 1, 1});
  expect_tensor(logical_not(q), DType::b8, Shape{1, 2}, {1, 0});
}

TEST(ElementwiseOps, WhereBroadcastsAllThreeInputs) {
  Tensor cond = tensor<bool>({true, false, true}, Shape{3, 1});
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, Shape{1, 4});
  Tensor b = scalar(-1);
  expect_tensor(where(cond, a, b), DType::f32, Shape{3, 4},
                {1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4});
  Tensor ci = tensor<bool>({false, true, true, false});
  expect_tensor(select(ci, tensor({1, 2, 3, 4}, Shape{4}, DType::i64), scalar(0, DType::i64)),
                DType::i64, Shape{4}, {0, 2, 3, 0});
  // Condition broadcast against larger branches.
  expect_tensor(where(tensor<bool>({true}, Shape{}), zeros({2, 2}), ones({2, 2})), DType::f32,
                Shape{2, 2}, {0, 0, 0, 0});
}

// add and (non-commutative) sub with broadcasting, against the naive reference.
void check_broadcast(const std::vector<int64_t>& as, const std::vector<int64_t>& bs,
                     const std::vector<int64_t>& want_shape) {
  SCOPED_TRACE(Shape(as).to_string() + " with " + Shape(bs).to_string());
  int64_t na = Shape(as).num_elements(), nb = Shape(bs).num_elements();
  std::vector<double> a = rounded(test::test_values(size_t(na), -5, 5, 3), DType::f32);
  std::vector<double> b = rounded(test::test_values(size_t(nb), -5, 5, 4), DType::f32);
  Tensor ta = tensor(a, Shape(as), DType::f32), tb = tensor(b, Shape(bs), DType::f32);
  auto sub_ref = [](double x, double y) { return double(float(x) - float(y)); };
  auto add_ref = [](double x, double y) { return double(float(x) + float(y)); };
  expect_tensor(sub(ta, tb), DType::f32, Shape(want_shape), ref_binary(a, as, b, bs, sub_ref), 0);
  expect_tensor(sub(tb, ta), DType::f32, Shape(want_shape), ref_binary(b, bs, a, as, sub_ref), 0);
  expect_tensor(add(ta, tb), DType::f32, Shape(want_shape), ref_binary(a, as, b, bs, add_ref), 0);
}

TEST(ElementwiseOps, NumpyBroadcasting) {
  check_broadcast({}, {2, 3}, {2, 3});
  check_broadcast({2, 3}, {}, {2, 3});
  check_broadcast({}, {}, {});
  check_broadcast({3, 1}, {1, 4}, {3, 4});
  check_broadcast({2, 1, 3}, {4, 1}, {2, 4, 3});
  check_broadcast({5, 3}, {3}, {5, 3});
  check_broadcast({5, 3}, {5, 1}, {5, 3});
  check_broadcast({2, 1, 3, 1}, {1, 4, 1, 5}, {2, 4, 3, 5});
  check_broadcast({1}, {4, 4}, {4, 4});
  check_broadcast({0, 3}, {1, 3}, {0, 3});
  check_broadcast({2, 0}, {2, 1}, {2, 0});
  check_broadcast({0}, {}, {0});
}

TEST(ElementwiseOps, LargeInputsTakeTheParallelPath) {
  const int64_t n = 1'000'003;
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    a[size_t(i)] = float(i % 1000) * 0.01f - 5.f;
    b[size_t(i)] = float((i * 7) % 113) - 56.f;
  }
  Tensor ta = tensor(a), tb = tensor(b);
  std::vector<float> sum = add(ta, tb).to_vector<float>();
  std::vector<float> prod = mul(ta, scalar(3)).to_vector<float>();
  std::vector<float> ex = exp(ta).to_vector<float>();
  std::vector<uint8_t> gt = cast(greater(ta, tb), DType::u8).to_vector<uint8_t>();
  ASSERT_EQ(sum.size(), size_t(n));
  int64_t bad = 0;
  for (size_t i = 0; i < size_t(n); ++i) {
    bad += sum[i] != a[i] + b[i];
    bad += prod[i] != a[i] * 3.f;
    bad += std::fabs(ex[i] - std::exp(a[i])) > 1e-5f * std::exp(a[i]);
    bad += gt[i] != (a[i] > b[i]);
  }
  EXPECT_EQ(bad, 0);

  // Broadcast a row and a column over a (1001, 999) matrix.
  Tensor m = reshape(slice(ta, {0}, {1001 * 999}), {1001, 999});
  Tensor row = tensor(std::vector<float>(a.begin(), a.begin() + 999));
  Tensor col = tensor(std::vector<float>(b.begin(), b.begin() + 1001), Shape{1001, 1});
  std::vector<float> r = add(sub(m, row), col).to_vector<float>();
  bad = 0;
  for (size_t i = 0; i < 1001; ++i)
    for (size_t j = 0; j < 999; ++j) bad += r[i * 999 + j] != (a[i * 999 + j] - a[j]) + b[i];
  EXPECT_EQ(bad, 0);
}

TEST(ElementwiseOps, OperatorsWithTensorsAndNumbers) {
  Tensor a = tensor({1.f, 2.f, 4.f}), b = tensor({2.f, 4.f, 8.f});
  expect_tensor(a + b, DType::f32, Shape{3}, {3, 6, 12});
  expect_tensor(a - b, DType::f32, Shape{3}, {-1, -2, -4});
  expect_tensor(a * b, DType::f32, Shape{3}, {2, 8, 32});
  expect_tensor(a / b, DType::f32, Shape{3}, {0.5, 0.5, 0.5});
  expect_tensor(-a, DType::f32, Shape{3}, {-1, -2, -4});
  expect_tensor(a + 1.5, DType::f32, Shape{3}, {2.5, 3.5, 5.5});
  expect_tensor(a - 1.0, DType::f32, Shape{3}, {0, 1, 3});
  expect_tensor(a * 2.0, DType::f32, Shape{3}, {2, 4, 8});
  expect_tensor(a / 4.0, DType::f32, Shape{3}, {0.25, 0.5, 1});
  expect_tensor(1.5 + a, DType::f32, Shape{3}, {2.5, 3.5, 5.5});
  expect_tensor(10.0 - a, DType::f32, Shape{3}, {9, 8, 6});
  expect_tensor(3.0 * a, DType::f32, Shape{3}, {3, 6, 12});
  expect_tensor(8.0 / a, DType::f32, Shape{3}, {8, 4, 2});
  // The number takes the tensor's dtype.
  Tensor i = tensor({7, -7}, Shape{2}, DType::i64);
  expect_tensor(i / 2.0, DType::i64, Shape{2}, {3, -3});
  expect_tensor(i + 1.0, DType::i64, Shape{2}, {8, -6});
  expect_tensor(tensor({0.5, 2.0}) * 3.0, DType::f64, Shape{2}, {1.5, 6});
  // Rank-0 operands.
  Tensor s = scalar(2) * scalar(3) + 1.0;
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.item<float>(), 7.f);
}

}  // namespace
}  // namespace kiln
