// Finite-difference checks of the gradient rules of elementwise ops
// (frontend/grad_elementwise.cc), with broadcasting in both operand positions.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::away_from_zero;
using gradcheck::on_grid;
using gradcheck::Options;
using gradcheck::uniform;

using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
using Unary = std::function<Tensor(const Tensor&)>;
using MakeInput = std::function<Tensor(const Shape&, uint64_t)>;

// Operand shape pairs: equal shapes, broadcasting in each position, both stretched, scalars.
const std::vector<std::pair<Shape, Shape>>& shape_pairs() {
  static const std::vector<std::pair<Shape, Shape>> pairs = {
      {Shape{2, 3}, Shape{2, 3}}, {Shape{3, 1}, Shape{1, 4}}, {Shape{}, Shape{2, 3}},
      {Shape{2, 3}, Shape{}},     {Shape{4}, Shape{2, 3, 4}}, {Shape{2, 1, 4}, Shape{3, 1}},
  };
  return pairs;
}

gradcheck::Fn binary_fn(Binary op) {
  return [op](const std::vector<Tensor>& x) { return op(x[0], x[1]); };
}

gradcheck::Fn unary_fn(Unary op) {
  return [op](const std::vector<Tensor>& x) { return op(x[0]); };
}

// Checks `op` on every shape pair with operands drawn by make_a / make_b.
void check_binary(const Binary& op, const MakeInput& make_a, const MakeInput& make_b) {
  uint64_t seed = 1;
  for (const auto& [sa, sb] : shape_pairs()) {
    SCOPED_TRACE("a " + sa.to_string() + ", b " + sb.to_string());
    Tensor a = make_a(sa, seed), b = make_b(sb, seed + 100);
    ++seed;
    EXPECT_GRADIENTS(binary_fn(op), {a, b});
  }
}

Tensor any_values(const Shape& s, uint64_t seed) { return uniform(s, seed, -2, 2); }
Tensor nonzero_values(const Shape& s, uint64_t seed) { return away_from_zero(s, seed, 0.5, 2); }
Tensor positive_values(const Shape& s, uint64_t seed) { return uniform(s, seed, 0.5, 2); }
Tensor grid_values(const Shape& s, uint64_t seed) { return on_grid(s, seed, 0.0); }
Tensor offset_grid_values(const Shape& s, uint64_t seed) { return on_grid(s, seed, 0.1); }

TEST(ElementwiseGradients, Add) {
  check_binary([](const Tensor& a, const Tensor& b) { return add(a, b); }, any_values, any_values);
}

TEST(ElementwiseGradients, Sub) {
  check_binary([](const Tensor& a, const Tensor& b) { return sub(a, b); }, any_values, any_values);
}

TEST(ElementwiseGradients, Mul) {
  check_binary([](const Tensor& a, const Tensor& b) { return mul(a, b); }, any_values, any_values);
}

TEST(ElementwiseGradients, Div) {
  check_binary([](const Tensor& a, const Tensor& b) { return div(a, b); }, any_values,
               nonzero_values);
}

TEST(ElementwiseGradients, PowPositiveBase) {
  check_binary([](const Tensor& a, const Tensor& b) { return pow(a, b); }, positive_values,
               [](const Shape& s, uint64_t seed) { return uniform(s, seed, -1.5, 2.5); });
}

// A negative base with an integer exponent: only the base gradient is defined (finite
// differences in the exponent would leave the real numbers).
TEST(ElementwiseGradients, PowNegativeBaseIntegerExponent) {
  Tensor a = away_from_zero({2, 3}, 5, 0.5, 1.5);
  for (double e : {2.0, 3.0, -1.0}) {
    SCOPED_TRACE("exponent " + std::to_string(e));
    EXPECT_GRADIENTS(binary_fn([](const Tensor& x, const Tensor& y) { return pow(x, y); }),
                     {a, scalar(e, DType::f64)}, Options::only({0}));
  }
}

// The exponent gradient at a negative base is 0 by convention (TensorFlow's), not NaN.
TEST(ElementwiseGradients, PowExponentGradientAtNegativeBaseIsZero) {
  Tensor a = tensor<double>({-2.0, 3.0});
  Tensor b = scalar(2.0, DType::f64);
  GradientTape tape;
  tape.watch(b);
  Tensor g = tape.gradient(sum(pow(a, b)), b);
  ASSERT_TRUE(g.defined());
  EXPECT_NEAR(g.item<double>(), 9.0 * std::log(3.0), 1e-12);
}

TEST(ElementwiseGradients, Maximum) {
  check_binary([](const Tensor& a, const Tensor& b) { return maximum(a, b); }, grid_values,
               offset_grid_values);
}

TEST(ElementwiseGradients, Minimum) {
  check_binary([](const Tensor& a, const Tensor& b) { return minimum(a, b); }, grid_values,
               offset_grid_values);
}

// At a tie the whole gradient goes to the first operand (TensorFlow's convention), so the
// two partial gradients still add up to the gradient of the output.
TEST(ElementwiseGradients, MaximumAndMinimumTiesGoToFirstOperand) {
  Tensor a = tensor<double>({1.0, 2.0, 3.0});
  Tensor b = tensor<double>({1.0, 5.0, 3.0});
  for (bool is_max : {true, false}) {
    SCOPED_TRACE(is_max ? "maximum" : "minimum");
    GradientTape tape;
    tape.watch({a, b});
    Tensor y = is_max ? maximum(a, b) : minimum(a, b);
    std::vector<Tensor> g = tape.gradient(sum(y), {a, b});
    std::vector<double> ga = is_max ? std::vector<double>{1, 0, 1} : std::vector<double>{1, 1, 1};
    std::vector<double> gb = is_max ? std::vector<double>{0, 1, 0} : std::vector<double>{0, 0, 0};
    EXPECT_EQ(g[0].to_vector<double>(), ga);
    EXPECT_EQ(g[1].to_vector<double>(), gb);
  }
}

// A C++ number on either side of an operator becomes a scalar constant of the tensor's dtype.
TEST(ElementwiseGradients, OperatorsWithNumbers) {
  Tensor x = away_from_zero({2, 3}, 30, 0.5, 2);
  EXPECT_GRADIENTS(unary_fn([](const Tensor& t) {
                     return 2.0 * t + t / 3.0 + (1.0 - t) * (3.0 / t) - (t - 0.5) + (0.5 + t) * t;
                   }),
                   {x});
}

// dropout with a fixed seed is a fixed mask times 1 / (1 - rate).
TEST(ElementwiseGradients, Dropout) {
  Tensor x = uniform({4, 5}, 31);
  EXPECT_GRADIENTS(unary_fn([](const Tensor& t) { return dropout(t, 0.3, 1234); }), {x});
  GradientTape tape;
  tape.watch(x);
  Tensor y = dropout(x, 0.5, 99);
  Tensor g = tape.gradient(y, x);
  ASSERT_TRUE(g.defined());
  std::vector<double> gv = g.to_vector<double>(), yv = y.to_vector<double>();
  for (size_t i = 0; i < gv.size(); ++i) EXPECT_EQ(gv[i], yv[i] == 0 ? 0.0 : 2.0) << i;
}

// ---- unary ----

struct UnaryCase {
  const char* name;
  Unary op;
  MakeInput make;
};

Tensor kinked_values(const Shape& s, uint64_t seed) { return away_from_zero(s, seed, 0.1, 2); }

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, any_values},
      {"neg operator", [](const Tensor& x) { return -x; }, any_values},
      {"abs", [](const Tensor& x) { return abs(x); }, kinked_values},
      {"sign", [](const Tensor& x) { return sign(x); }, kinked_values},
      {"square", [](const Tensor& x) { return square(x); }, any_values},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, positive_values},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, positive_values},
      {"exp", [](const Tensor& x) { return exp(x); }, any_values},
      {"log", [](const Tensor& x) { return log(x); }, positive_values},
      {"log1p", [](const Tensor& x) { return log1p(x); },
       [](const Shape& s, uint64_t seed) { return uniform(s, seed, -0.6, 2); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, any_values},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](const Shape& s, uint64_t seed) { return uniform(s, seed, -4, 4); }},
      {"relu", [](const Tensor& x) { return relu(x); }, kinked_values},
      {"leaky_relu 0.2", [](const Tensor& x) { return leaky_relu(x, 0.2); }, kinked_values},
      {"leaky_relu 0.01", [](const Tensor& x) { return leaky_relu(x, 0.01); }, kinked_values},
      {"gelu", [](const Tensor& x) { return gelu(x, false); },
       [](const Shape& s, uint64_t seed) { return uniform(s, seed, -3, 3); }},
      {"gelu approximate", [](const Tensor& x) { return gelu(x, true); },
       [](const Shape& s, uint64_t seed) { return uniform(s, seed, -3, 3); }},
      {"erf", [](const Tensor& x) { return erf(x); }, any_values},
      {"softplus", [](const Tensor& x) { return softplus(x); },
       [](const Shape& s, uint64_t seed) { return uniform(s, seed, -4, 4); }},
      {"cast f64 to f64", [](const Tensor& x) { return cast(x, DType::f64); }, any_values},
  };
}

TEST(ElementwiseGradients, Unary) {
  uint64_t seed = 40;
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    for (const Shape& s : {Shape{}, Shape{2, 3}}) {
      SCOPED_TRACE(s.to_string());
      EXPECT_GRADIENTS(unary_fn(c.op), {c.make(s, seed++)});
    }
  }
}

// Rules must stay right when the output gradient is not all ones: composition with a
// non-trivial outer function (chain rule through every unary rule).
TEST(ElementwiseGradients, UnaryComposedWithOuterFunction) {
  uint64_t seed = 80;
  for (const UnaryCase& c : unary_cases()) {
    SCOPED_TRACE(c.name);
    Tensor x = c.make({3, 2}, seed++);
    Unary op = c.op;
    EXPECT_GRADIENTS(unary_fn([op](const Tensor& t) { return square(op(t)) + op(t * 0.5); }), {x});
  }
}

// float64 -> float32 -> float64 round trip: the gradient passes through the casts (checked
// with float32-sized steps and tolerances).
TEST(ElementwiseGradients, CastThroughFloat32) {
  Tensor x = uniform({2, 3}, 7, -2, 2);
  EXPECT_GRADIENTS(
      unary_fn([](const Tensor& t) { return cast(square(cast(t, DType::f32)), DType::f64); }), {x},
      Options::steps(1e-3, 2e-3, 2e-3));
}

TEST(ElementwiseGradients, CastGradientHasTheSourceDtype) {
  Tensor x = uniform({2, 3}, 8);
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(sum(cast(x, DType::f32)), x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.dtype(), DType::f64);
  EXPECT_EQ(g.shape(), x.shape());
  EXPECT_EQ(g.to_vector<double>(), std::vector<double>(6, 1.0));
}

// A path through an integer cast carries no gradient: d/dx (int(x) * x) = int(x).
TEST(ElementwiseGradients, CastThroughIntegerCarriesNoGradient) {
  Tensor x = tensor<double>({1.5, -2.5, 3.25});
  GradientTape tape;
  tape.watch(x);
  Tensor y = cast(cast(x, DType::i32), DType::f64) * x;
  Tensor g = tape.gradient(sum(y), x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, -2, 3}));
}

// ---- select ----

TEST(ElementwiseGradients, SelectSameShapes) {
  Tensor cond = tensor<bool>({true, false, false, true, true, false}, {2, 3});
  Tensor a = uniform({2, 3}, 11), b = uniform({2, 3}, 12);
  EXPECT_GRADIENTS([cond](const std::vector<Tensor>& x) { return where(cond, x[0], x[1]); },
                   {a, b});
}

TEST(ElementwiseGradients, SelectBroadcastsAllThree) {
  // cond (2, 1, 4), a (3, 1), b scalar -> (2, 3, 4).
  Tensor cond = tensor<bool>({true, false, true, true, false, false, true, false}, {2, 1, 4});
  Tensor a = uniform({3, 1}, 13), b = uniform({}, 14);
  EXPECT_GRADIENTS([cond](const std::vector<Tensor>& x) { return where(cond, x[0], x[1]); },
                   {a, b});
  EXPECT_GRADIENTS([cond](const std::vector<Tensor>& x) { return select(cond, x[1], x[0]); },
                   {a, b});
}

// A smooth function built from where: |x| = where(x > 0, x, -x).
TEST(ElementwiseGradients, SelectOfComputedBranches) {
  Tensor x = away_from_zero({2, 3}, 15);
  EXPECT_GRADIENTS(unary_fn([](const Tensor& t) {
                     return where(greater(t, scalar(0, DType::f64)), square(t), exp(t) * 2.0);
                   }),
                   {x});
}

}  // namespace
}  // namespace kiln
