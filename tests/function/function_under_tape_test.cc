// A kiln::function called while a GradientTape records runs its traced graph (compiled) and is
// recorded as one op whose gradient is the function's gradient graph: the gradients equal
// those of the callable run eagerly under the tape, the callable is not run again per call,
// assignments and random numbers inside the function happen once per call and the gradient
// uses the same random numbers, and what kiln cannot differentiate this way is a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/frontend/function/function_gradient.h"
#include "kiln/kiln.h"
#include "tests/support/expect_error.h"

namespace kiln {
namespace {

constexpr double kDoubleEpsilon = std::numeric_limits<double>::epsilon();

std::vector<double> tensor_doubles(const Tensor& t) { return t.to_vector<double>(); }

// |a - b| <= tol_ulps * eps * (scale of the terms), elementwise.
void expect_tensors_close(const Tensor& a, const Tensor& b, double scale, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  ASSERT_TRUE(b.defined()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  std::vector<double> va = tensor_doubles(a), vb = tensor_doubles(b);
  for (size_t i = 0; i < va.size(); ++i)
    EXPECT_NEAR(va[i], vb[i], 256 * kDoubleEpsilon * scale) << what << " element " << i;
}

using test::expect_error;

// A small dense layer with float64 weights: y = tanh(x W + b) * x[:, :1].
struct Layer64 {
  Variable w{"w", random_normal({3, 2}, 1, 0, 1, DType::f64)};
  Variable b{"b", random_normal({2}, 2, 0, 1, DType::f64)};
  int calls = 0;
  Tensor operator()(const Tensor& x) {
    ++calls;
    return tanh(matmul(x, w.read()) + b.read()) * slice(x, {0, 0}, {x.shape()[0], 1});
  }
};

TEST(FunctionUnderTape, FirstOrderGradientsEqualEagerAndTheCallableRunsOnce) {
  for (ExecutionMode mode : {ExecutionMode::kCompiled, ExecutionMode::kReference}) {
    SCOPED_TRACE(execution_mode_name(mode));
    Layer64 layer;
    auto f = kiln::function([&](const Tensor& x) { return layer(x); },
                            {.name = "layer64", .mode = mode});
    const detail::RecordedCallCounts before = detail::recorded_call_counts();
    for (int step = 0; step < 3; ++step) {
      Tensor x = random_normal({4, 3}, 10 + step, 0, 1, DType::f64);
      // Eager reference: the callable itself under the tape.
      std::vector<Tensor> want;
      {
        GradientTape tape;
        tape.watch(x);
        Tensor loss = sum(square(layer(x)));
        want = tape.gradient(loss, {x, layer.w.value(), layer.b.value()});
      }
      std::vector<Tensor> got;
      {
        GradientTape tape;
        tape.watch(x);
        Tensor loss = sum(square(f(x)));
        got = tape.gradient(loss, {x, layer.w.value(), layer.b.value()});
      }
      // Terms of size <= a few units; the two paths round differently only in summation
      // order and (compiled) FMA contraction: a few hundred ulps of the unit scale at most.
      expect_tensors_close(got[0], want[0], 4, "dx");
      expect_tensors_close(got[1], want[1], 4, "dW");
      expect_tensors_close(got[2], want[2], 4, "db");
      // Variables as sources work too.
      GradientTape tape;
      Tensor loss = sum(f(x));
      std::vector<Tensor> gv = tape.gradient(loss, std::vector<Variable>{layer.w, layer.b});
      EXPECT_TRUE(gv[0].defined() && gv[1].defined());
    }
    // The callable ran once for the trace plus the 3 eager reference calls; the 6 calls of f
    // under tapes ran the forward variant.
    EXPECT_EQ(layer.calls, 1 + 3);
    const detail::RecordedCallCounts after = detail::recorded_call_counts();
    EXPECT_EQ(after.forward_calls - before.forward_calls, 6);
    EXPECT_EQ(after.compiled - before.compiled, mode == ExecutionMode::kCompiled ? 6 : 0);
    EXPECT_EQ(after.backward_calls - before.backward_calls, 6);
  }
}

// Central differences in float64 on x, through the recorded call.
TEST(FunctionUnderTape, GradientMatchesFiniteDifferences) {
  Layer64 layer;
  auto f = kiln::function([&](const Tensor& x) { return layer(x); });
  Tensor x = random_normal({2, 3}, 20, 0, 1, DType::f64);
  GradientTape tape;
  tape.watch(x);
  Tensor dx = tape.gradient(sum(f(x)), x);
  std::vector<double> vx = tensor_doubles(x), g = tensor_doubles(dx);
  const double h = 1e-6;
  for (size_t i = 0; i < vx.size(); ++i) {
    std::vector<double> p = vx, m = vx;
    p[i] += h;
    m[i] -= h;
    double fp = sum(layer(tensor(p, x.shape(), DType::f64))).item<double>();
    double fm = sum(layer(tensor(m, x.shape(), DType::f64))).item<double>();
    // Truncation error O(h^2 f''') ~ 1e-12, rounding ~ eps |f| / h ~ 1e-10.
    EXPECT_NEAR(g[i], (fp - fm) / (2 * h), 1e-8) << "element " << i;
  }
}

TEST(FunctionUnderTape, AssignmentsHappenOncePerCall) {
  Variable counter("counter", scalar(0.0, DType::f64), /*trainable=*/false);
  Variable w("w", tensor({2.0}, Shape{1}, DType::f64));
  auto f = kiln::function([&](const Tensor& x) {
    counter.assign_add(scalar(1.0, DType::f64));
    return x * w.read();
  });
  Tensor x = tensor({3.0}, Shape{1}, DType::f64);
  for (int i = 0; i < 2; ++i) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = f(x);
    std::vector<Tensor> g = tape.gradient(sum(y), {x, w.value()});
    EXPECT_EQ(tensor_doubles(g[0]), std::vector<double>{2.0});
    EXPECT_EQ(tensor_doubles(g[1]), std::vector<double>{3.0});
  }
  EXPECT_EQ(counter.value().item<double>(), 2.0);
}

// The gradient of dropout is its mask: the backward graph must use the numbers the forward
// call drew, not new ones.
TEST(FunctionUnderTape, TheGradientUsesTheForwardCallsRandomNumbers) {
  auto f = kiln::function([](const Tensor& x) { return dropout(x, 0.5, 7); });
  for (int call = 0; call < 3; ++call) {
    Tensor x = random_normal({64}, 30 + call, 3, 0.1, DType::f64);  // no zeros
    GradientTape tape;
    tape.watch(x);
    Tensor y = f(x);
    Tensor dx = tape.gradient(sum(y), x);
    std::vector<double> vy = tensor_doubles(y), g = tensor_doubles(dx);
    int kept = 0;
    for (size_t i = 0; i < vy.size(); ++i) {
      EXPECT_EQ(g[i], vy[i] != 0 ? 2.0 : 0.0) << "element " << i;
      kept += vy[i] != 0;
    }
    EXPECT_GT(kept, 0);
    EXPECT_LT(kept, 64);
  }
}

// d/dx of the first-order gradient, through nested tapes: x^3 -> 3x^2 -> 6x, and for the
// layer, the eager nested-tape result.
TEST(FunctionUnderTape, SecondOrderGradientsEqualEager) {
  auto cube = kiln::function([](const Tensor& x) { return x * x * x; });
  Tensor x = tensor({2.0, -0.5}, Shape{2}, DType::f64);
  {
    GradientTape outer;
    outer.watch(x);
    Tensor dx;
    {
      GradientTape inner;
      inner.watch(x);
      dx = inner.gradient(sum(cube(x)), x);
    }
    EXPECT_EQ(tensor_doubles(dx), (std::vector<double>{12.0, 0.75}));
    EXPECT_EQ(tensor_doubles(outer.gradient(sum(dx), x)), (std::vector<double>{12.0, -3.0}));
  }
  // Third order through three tapes: d^3/dx^3 x^3 = 6.
  {
    GradientTape t3;
    t3.watch(x);
    Tensor d2;
    {
      GradientTape t2;
      t2.watch(x);
      Tensor d1;
      {
        GradientTape t1;
        t1.watch(x);
        d1 = t1.gradient(sum(cube(x)), x);
      }
      d2 = t2.gradient(sum(d1), x);
    }
    EXPECT_EQ(tensor_doubles(t3.gradient(sum(d2), x)), (std::vector<double>{6.0, 6.0}));
  }
  // A layer with variables: the second-order gradient with respect to x and W.
  Layer64 layer;
  auto f = kiln::function([&](const Tensor& x) { return layer(x); });
  Tensor xs = random_normal({3, 3}, 40, 0, 1, DType::f64);
  auto second = [&](auto&& fn) {
    GradientTape outer;
    outer.watch(xs);
    Tensor dx;
    {
      GradientTape inner;
      inner.watch(xs);
      dx = inner.gradient(sum(square(fn(xs))), xs);
    }
    return outer.gradient(sum(dx * dx), {xs, layer.w.value()});
  };
  std::vector<Tensor> want = second([&](const Tensor& t) { return layer(t); });
  std::vector<Tensor> got = second([&](const Tensor& t) { return f(t); });
  expect_tensors_close(got[0], want[0], 16, "d2/dx");
  expect_tensors_close(got[1], want[1], 16, "d2/dW");
}

// A function with a cond: the branch taken at each call is differentiated.
TEST(FunctionUnderTape, CondInsideTheFunction) {
  Variable w("w", tensor({3.0}, Shape{1}, DType::f64));
  auto g = kiln::function([&](const Tensor& x) {
    return cond(
        greater(sum(x), scalar(0.0, DType::f64)), [&] { return x * x * w.read(); },
        [&] { return x * w.read(); });
  });
  for (double v : {2.0, -2.0}) {
    Tensor x = tensor({v}, Shape{1}, DType::f64);
    GradientTape tape;
    tape.watch(x);
    std::vector<Tensor> grads = tape.gradient(sum(g(x)), {x, w.value()});
    // x > 0: d(x^2 w)/dx = 2xw = 12, d/dw = x^2 = 4;  x < 0: d(xw)/dx = w = 3, d/dw = x = -2.
    EXPECT_EQ(tensor_doubles(grads[0]), std::vector<double>{v > 0 ? 12.0 : 3.0});
    EXPECT_EQ(tensor_doubles(grads[1]), std::vector<double>{v > 0 ? 4.0 : -2.0});
  }
}

TEST(FunctionUnderTape, UnsupportedCasesAreClearErrors) {
  Tensor x = tensor({2.0}, Shape{1}, DType::f64);
  // A graph with a while loop.
  auto g = kiln::function([](const Tensor& x) {
    return while_loop(
        [](const std::vector<Tensor>& v) { return less(sum(v[0]), scalar(100.0, DType::f64)); },
        [](const std::vector<Tensor>& v) { return std::vector<Tensor>{v[0] * 2.0}; }, {x})[0];
  });
  expect_error(
      [&] {
        GradientTape tape;
        tape.watch(x);
        g(x);
      },
      {"GradientTape", "while"});
}

TEST(FunctionUnderTape, AnUnwatchedCallIsAPlainCall) {
  Layer64 layer;
  auto f = kiln::function([&](const Tensor& x) { return layer(x); });
  layer.w.set_trainable(false);
  layer.b.set_trainable(false);
  const detail::RecordedCallCounts before = detail::recorded_call_counts();
  GradientTape tape;  // watches nothing the call uses
  Tensor y = f(random_normal({2, 3}, 3, 0, 1, DType::f64));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(detail::recorded_call_counts().forward_calls, before.forward_calls);
}

}  // namespace
}  // namespace kiln
