// GradientTape semantics (frontend/gradient_tape.cc): watching, unconnected sources,
// accumulation, broadcasting, output gradients, persistence, StopRecording, reset, dtype
// rules, and higher-order gradients through nested tapes.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::max_abs_diff;
using gradcheck::uniform;

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Expects `fn` to throw kiln::Error whose message contains `needle`.
template <typename Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ---- watching and unconnected sources ----

TEST(GradientTape, UnwatchedSourceIsUndefinedOrZero) {
  Tensor x = tensor<double>({1, 2, 3}), z = tensor<double>({4, 5}, {2, 1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = sum(x * 2.0);
  std::vector<Tensor> none = tape.gradient(y, {x, z}, UnconnectedGradients::kNone);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(values(none[0]), (std::vector<double>{2, 2, 2}));
  EXPECT_FALSE(none[1].defined());
  std::vector<Tensor> zero = tape.gradient(y, {x, z}, UnconnectedGradients::kZero);
  ASSERT_TRUE(zero[1].defined());
  EXPECT_EQ(zero[1].type(), z.type());
  EXPECT_EQ(values(zero[1]), (std::vector<double>{0, 0}));
  // The single-source overload too.
  EXPECT_FALSE(tape.gradient(y, z).defined());
}

TEST(GradientTape, OpsBeforeWatchAreNotRecorded) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  Tensor y = x * x;  // x is not watched yet
  tape.watch(x);
  EXPECT_FALSE(tape.gradient(sum(y), x).defined());
}

TEST(GradientTape, WatchedListsEachTensorOnce) {
  Tensor a = tensor<double>({1}), b = tensor<double>({2});
  GradientTape tape;
  tape.watch(a);
  tape.watch({a, b});
  std::vector<Tensor> w = tape.watched();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].id(), a.id());
  EXPECT_EQ(w[1].id(), b.id());
}

TEST(GradientTape, GradientOfTargetWithRespectToItselfIsOnes) {
  Tensor x = tensor<double>({1, 2, 3});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(x, x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(values(g), (std::vector<double>{1, 1, 1}));
}

// ---- accumulation, broadcasting, targets ----

TEST(GradientTape, FanOutAccumulates) {
  Tensor x = tensor<double>({-1.5, 0, 2, 3.25});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x + x;
  Tensor g = tape.gradient(y, x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(values(g), (std::vector<double>{-2, 1, 5, 7.5}));  // 2x + 1
}

TEST(GradientTape, BroadcastingReducesToTheSourceShape) {
  Tensor x = tensor<double>({1, 2, 3}, {3, 1});
  Tensor s = scalar(2.0, DType::f64);
  Tensor c = tensor<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  GradientTape tape;
  tape.watch({x, s});
  Tensor y = x * c + s;  // (3, 4)
  std::vector<Tensor> g = tape.gradient(y, {x, s});
  EXPECT_EQ(g[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(values(g[0]), (std::vector<double>{10, 26, 42}));  // row sums of c
  EXPECT_EQ(g[1].shape(), Shape{});
  EXPECT_EQ(g[1].item<double>(), 12.0);
}

TEST(GradientTape, NonScalarTargetIsSummed) {
  Tensor x = tensor<double>({1, -2, 3, 0.5}, {2, 2});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(x * x, x);
  EXPECT_EQ(values(g), (std::vector<double>{2, -4, 6, 1}));
}

TEST(GradientTape, OutputGradientWeightsTheTarget) {
  Tensor x = tensor<double>({1, -2, 3}), w = tensor<double>({0.5, 2, -1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  std::vector<Tensor> g = tape.gradient(y, {x}, UnconnectedGradients::kNone, w);
  EXPECT_EQ(values(g[0]), (std::vector<double>{1, -8, -6}));  // 2 x w
  expect_error(
      [&] {
        tape.gradient(y, {x}, UnconnectedGradients::kNone, tensor<double>({1, 2}));
      },
      "output_gradient");
  expect_error(
      [&] {
        tape.gradient(y, {x}, UnconnectedGradients::kNone, tensor<float>({1, 2, 3}));
      },
      "output_gradient");
}

TEST(GradientTape, GradientWithRespectToAnIntermediate) {
  Tensor x = tensor<double>({0.5, -1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  Tensor z = exp(y) * 3.0;
  std::vector<Tensor> g = tape.gradient(z, {y, x});
  ASSERT_TRUE(g[0].defined() && g[1].defined());
  EXPECT_LT(max_abs_diff(g[0], 3.0 * exp(y)), 1e-12);
  EXPECT_LT(max_abs_diff(g[1], 6.0 * x * exp(y)), 1e-12);
  // An intermediate on the path is also a valid single source afterwards.
  EXPECT_LT(max_abs_diff(tape.gradient(z, y), 3.0 * exp(y)), 1e-12);
}

TEST(GradientTape, TwoSourcesSharingAPath) {
  Tensor a = tensor<double>({1.5, -2}), b = tensor<double>({0.5, 3});
  GradientTape tape;
  tape.watch({a, b});
  Tensor c = a * b;
  Tensor z = c * c + a;
  std::vector<Tensor> g = tape.gradient(z, {a, b});
  // dz/da = 2 c b + 1, dz/db = 2 c a.
  EXPECT_EQ(values(g[0]), (std::vector<double>{2 * 0.75 * 0.5 + 1, 2 * -6.0 * 3 + 1}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{2 * 0.75 * 1.5, 2 * -6.0 * -2}));
}

TEST(GradientTape, SameSourceListedTwice) {
  Tensor x = tensor<double>({2, 3});
  GradientTape tape;
  tape.watch(x);
  std::vector<Tensor> g = tape.gradient(x * x, {x, x});
  EXPECT_EQ(values(g[0]), (std::vector<double>{4, 6}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{4, 6}));
}

// ---- persistence, StopRecording, reset ----

TEST(GradientTape, NonPersistentTapeAllowsOneCall) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  EXPECT_FALSE(tape.persistent());
  tape.watch(x);
  Tensor y = sum(x * x);
  Tensor g = tape.gradient(y, x);
  EXPECT_EQ(values(g), (std::vector<double>{2, 4}));
  expect_error([&] { tape.gradient(y, x); }, "persistent");
}

TEST(GradientTape, PersistentTapeAllowsSeveralCalls) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape(/*persistent=*/true);
  EXPECT_TRUE(tape.persistent());
  tape.watch(x);
  Tensor y = x * x, z = y * x;
  EXPECT_EQ(values(tape.gradient(y, x)), (std::vector<double>{2, 4}));
  EXPECT_EQ(values(tape.gradient(z, x)), (std::vector<double>{3, 12}));
  EXPECT_EQ(values(tape.gradient(y, x)), (std::vector<double>{2, 4}));
  // Recording continues between calls.
  Tensor w = z + y;
  EXPECT_EQ(values(tape.gradient(w, x)), (std::vector<double>{5, 16}));
}

TEST(GradientTape, StopRecordingPausesOnlyThisTape) {
  Tensor x = tensor<double>({1, 2});
  GradientTape other;
  other.watch(x);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  Tensor paused;
  {
    GradientTape::StopRecording stop(tape);
    paused = y * x;  // not recorded by `tape`, recorded by `other`
  }
  Tensor resumed = y * 3.0;  // recorded again
  EXPECT_FALSE(tape.gradient(paused, x).defined());
  EXPECT_EQ(values(tape.gradient(resumed, x)), (std::vector<double>{6, 12}));
  EXPECT_EQ(values(other.gradient(paused, x)), (std::vector<double>{3, 12}));
}

TEST(GradientTape, StopRecordingOnAPausedPathStopsTheGradient) {
  Tensor x = tensor<double>({2});
  GradientTape tape;
  tape.watch(x);
  Tensor frozen;
  {
    GradientTape::StopRecording stop(tape);
    frozen = x * x;  // acts as a constant
  }
  Tensor y = frozen * x;
  EXPECT_EQ(values(tape.gradient(y, x)), (std::vector<double>{4}));
}

TEST(GradientTape, ResetForgetsRecordsAndWatches) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  tape.reset();
  EXPECT_TRUE(tape.watched().empty());
  EXPECT_FALSE(tape.gradient(y, x).defined());
  // reset also re-arms a used non-persistent tape.
  tape.reset();
  tape.watch(x);
  Tensor z = x * x * x;
  EXPECT_EQ(values(tape.gradient(z, x)), (std::vector<double>{3, 12}));
}

// Tapes are per thread: ops run on another thread are not recorded.
TEST(GradientTape, OpsOnAnotherThreadAreNotRecorded) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  tape.watch(x);
  Tensor y;
  std::thread([&] { y = x * x; }).join();
  Tensor z = x * 3.0;
  Tensor g = tape.gradient(y + z, x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(values(g), (std::vector<double>{3, 3}));
}

// ---- dtypes ----

TEST(GradientTape, WatchingAnIntegerTensorIsAnError) {
  GradientTape tape;
  expect_error([&] { tape.watch(tensor<int32_t>({1, 2})); }, "floating");
  expect_error([&] { tape.watch(tensor<bool>({true})); }, "floating");
  expect_error([&] { tape.watch(Tensor()); }, "undefined");
}

TEST(GradientTape, IntegerOpsAreNotRecorded) {
  Tensor x = tensor<double>({1.5, 2.5});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor i = cast(x, DType::i64);
  Tensor j = i + i;
  Tensor back = cast(j, DType::f64);
  EXPECT_FALSE(tape.gradient(back, x).defined());
  // Comparisons, argmax (kNoGradient) neither.
  Tensor mask = cast(greater(x, scalar(2.0, DType::f64)), DType::f64);
  EXPECT_FALSE(tape.gradient(mask, x).defined());
  Tensor am = cast(argmax(x), DType::f64);
  EXPECT_FALSE(tape.gradient(am, x).defined());
  // A target that is not floating is an error.
  expect_error([&] { tape.gradient(j, x); }, "floating");
}

TEST(GradientTape, Float32Gradients) {
  Tensor x = tensor<float>({1, 2, 3});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(sum(x * x * x), x);
  ASSERT_EQ(g.dtype(), DType::f32);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{3, 12, 27}));
}

// ---- higher order (nested tapes) ----

TEST(GradientTape, SecondAndThirdDerivativeOfCube) {
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
  EXPECT_EQ(values(d1), (std::vector<double>{6.75, 0.75, 12}));  // 3x²
  EXPECT_EQ(values(d2), (std::vector<double>{-9, 3, 12}));       // 6x
  EXPECT_EQ(values(d3), (std::vector<double>{6, 6, 6}));
}

TEST(GradientTape, TanhFirstAndSecondDerivative) {
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
  std::vector<double> xs = values(x), g1 = values(d1), g2 = values(d2);
  for (size_t i = 0; i < xs.size(); ++i) {
    double t = std::tanh(xs[i]);
    EXPECT_NEAR(g1[i], 1 - t * t, 1e-14) << "x = " << xs[i];
    EXPECT_NEAR(g2[i], -2 * t * (1 - t * t), 1e-14) << "x = " << xs[i];
  }
}

// Hessian-vector product of f(W) = sum((X W)²): H V = 2 Xᵀ X V.
TEST(GradientTape, MatMulHessianVectorProduct) {
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
  std::vector<double> x = values(X), v = values(V), w = values(W), h = values(hv), g = values(gW);
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
TEST(GradientTape, SecondDerivativesMatchFiniteDifferences) {
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
TEST(GradientTape, SecondDerivativesThroughConvAndPool) {
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
