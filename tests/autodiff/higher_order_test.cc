// Higher-order gradients through nested GradientTapes: hand-derived derivatives, a
// Hessian-vector product of matmul, and finite-difference checks of second derivatives (which
// check that the gradient rules are themselves differentiable).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::uniform;

using gradcheck::doubles_of;

TEST(HigherOrderGradients, SecondAndThirdDerivativeOfCube) {
  Tensor x = tensor<double>({-1.5, 0.5, 2});
  GradientTape t3;
  t3.watch(x);
  GradientTape t2;
  t2.watch(x);
  Tensor d1;
  {
    GradientTape t1;
    t1.watch(x);
    Tensor y = x * x * x;
    d1 = t1.gradient(y, x);
  }
  Tensor d2 = t2.gradient(d1, x);
  Tensor d3 = t3.gradient(d2, x);
  EXPECT_EQ(doubles_of(d1), (std::vector<double>{6.75, 0.75, 12}));  // 3x²
  EXPECT_EQ(doubles_of(d2), (std::vector<double>{-9, 3, 12}));       // 6x
  EXPECT_EQ(doubles_of(d3), (std::vector<double>{6, 6, 6}));
}

TEST(HigherOrderGradients, TanhFirstAndSecondDerivative) {
  Tensor x = uniform({7}, 1, -2.5, 2.5);
  GradientTape outer;
  outer.watch(x);
  Tensor d1;
  {
    GradientTape inner;
    inner.watch(x);
    d1 = inner.gradient(tanh(x), x);
  }
  Tensor d2 = outer.gradient(d1, x);
  std::vector<double> xs = doubles_of(x), g1 = doubles_of(d1), g2 = doubles_of(d2);
  for (size_t i = 0; i < xs.size(); ++i) {
    double t = std::tanh(xs[i]);
    EXPECT_NEAR(g1[i], 1 - t * t, 1e-14) << "x = " << xs[i];
    EXPECT_NEAR(g2[i], -2 * t * (1 - t * t), 1e-14) << "x = " << xs[i];
  }
}

// Hessian-vector product of f(W) = sum((X W)²): H V = 2 Xᵀ X V.
TEST(HigherOrderGradients, MatMulHessianVectorProduct) {
  const int n = 5, k = 3, m = 2;
  Tensor X = uniform({n, k}, 2), W = uniform({k, m}, 3), V = uniform({k, m}, 4);
  GradientTape outer;
  outer.watch(W);
  Tensor gW;
  {
    GradientTape inner;
    inner.watch(W);
    gW = inner.gradient(sum(square(matmul(X, W))), W);
  }
  Tensor hv = outer.gradient(sum(gW * V), W);
  ASSERT_TRUE(hv.defined());
  ASSERT_EQ(hv.shape(), (Shape{k, m}));
  std::vector<double> x = doubles_of(X), v = doubles_of(V), w = doubles_of(W), h = doubles_of(hv),
                      g = doubles_of(gW);
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < m; ++j) {
      double expect_h = 0, expect_g = 0;
      for (int r = 0; r < n; ++r) {
        double xv = 0, xw = 0;
        for (int q = 0; q < k; ++q) {
          xv += x[r * k + q] * v[q * m + j];
          xw += x[r * k + q] * w[q * m + j];
        }
        expect_h += 2 * x[r * k + i] * xv;  // 2 Xᵀ (X V)
        expect_g += 2 * x[r * k + i] * xw;  // 2 Xᵀ (X W)
      }
      EXPECT_NEAR(g[i * m + j], expect_g, 1e-12) << "gradient at " << i << "," << j;
      EXPECT_NEAR(h[i * m + j], expect_h, 1e-12) << "Hessian-vector product at " << i << "," << j;
    }
  }
}

// Second derivatives against finite differences of the first (tape) derivative.
TEST(HigherOrderGradients, SecondDerivativesMatchFiniteDifferences) {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
  };
  const Case cases[] = {
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t, false); }},
      {"gelu approximate", [](const Tensor& t) { return gelu(t, true); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"softplus", [](const Tensor& t) { return softplus(t); }},
      {"erf", [](const Tensor& t) { return erf(t); }},
      {"log", [](const Tensor& t) { return log(t + 3.0); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t + 3.0); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t + 3.0); }},
      {"pow", [](const Tensor& t) { return pow(t + 3.0, t); }},
      {"div", [](const Tensor& t) { return (t * t) / (t + 3.0); }},
      {"softmax", [](const Tensor& t) { return softmax(t * t, -1) * t; }},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t * t, 0) * t; }},
      {"logsumexp", [](const Tensor& t) { return logsumexp(t * t, {1}); }},
      {"prod", [](const Tensor& t) { return prod(t + 3.0, {0}); }},
      {"matmul", [](const Tensor& t) { return matmul(t, t * t, true, false); }},
      {"sum", [](const Tensor& t) { return square(sum(t, {0}, true)) * t; }},
      {"max mean", [](const Tensor& t) { return square(max(t, {1})) + square(mean(t, {0})); }},
      {"maximum relu abs",
       [](const Tensor& t) { return maximum(t, t * 0.5) * relu(t) * abs(t) + minimum(t, -t); }},
      {"select",
       [](const Tensor& t) { return where(greater(t, scalar(0, DType::f64)), t * t * t, exp(t)); }},
      {"gather",
       [](const Tensor& t) {
         return square(gather(t, tensor<int64_t>({2, 0, 2}), 0));
       }},
      {"scatter_add",
       [](const Tensor& t) {
         return square(scatter_add(t, tensor<int64_t>({1, 1, 0}), 1, 2));
       }},
      {"slice pad",
       [](const Tensor& t) {
         return square(pad(slice(t, {0, 1}, {3, 3}, {2, 1}), {1, 0}, {0, 1}, {1, 0}));
       }},
      {"concat transpose",
       [](const Tensor& t) {
         return square(concat({t, transpose(t)}, 0));
       }},
      {"broadcast reshape",
       [](const Tensor& t) {
         return square(broadcast_to(reshape(t, {3, 1, 3}), {3, 2, 3}));
       }},
      {"cast", [](const Tensor& t) { return cast(square(t), DType::f64) * t; }},
  };
  Tensor x = uniform({3, 3}, 5, -1.5, 1.5);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_GRADIENTS(gradcheck::first_derivative(c.f), {x},
                     gradcheck::Options::steps(1e-5, 1e-5, 1e-6));
  }
}

// Second order through the convolution and average-pooling rules: their gradients are the
// backprop ops, whose own rules are exercised here.
TEST(HigherOrderGradients, SecondDerivativesThroughConvAndPool) {
  Tensor w = uniform({2, 2, 2, 2}, 6);
  Tensor x = uniform({1, 4, 4, 2}, 7);
  EXPECT_GRADIENTS(gradcheck::first_derivative([w](const Tensor& t) {
                     return square(conv2d(t, w, {2, 1}, "same"));
                   }),
                   {x});
  EXPECT_GRADIENTS(gradcheck::first_derivative([x](const Tensor& t) {
                     return square(conv2d(x, t, {1, 1}, "valid", {2, 1}));
                   }),
                   {w});
  EXPECT_GRADIENTS(gradcheck::first_derivative([](const Tensor& t) {
                     return square(avg_pool2d(t, {2, 2}, {1, 1}, "same"));
                   }),
                   {x});
}

}  // namespace
}  // namespace kiln
