// Gradients through kiln::while_loop traced inside kiln::function (stacked while + gradient
// loop, frontend/function/while_gradient.cc): equal to the eagerly unrolled loop's gradients
// and to central finite differences, on the reference executor and compiled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"
#include "tests/function/loop_gradient_check.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::expect_close;
using test::expect_matches_fd;
using test::finite_difference;
using test::Forward;
using ::testing::HasSubstr;

using test::kModes;

Tensor i64(int64_t v) { return scalar(double(v), DType::i64); }

// ---------------------------------------------------------------- a simple loop

// h <- tanh(h * w + x), n times (n a traced argument): loop variables (i, h), captures x, w.
Tensor simple_loop(const Tensor& h0, const Tensor& x, const Tensor& w, const Tensor& n) {
  return while_loop([&](const std::vector<Tensor>& s) { return less(s[0], n); },
                    [&](const std::vector<Tensor>& s) {
                      return std::vector<Tensor>{s[0] + i64(1), tanh(s[1] * w + x)};
                    },
                    {i64(0), h0})[1];
}

// The loss and its gradients with respect to h0, x and w.
std::vector<Tensor> simple_grads(const Tensor& h0, const Tensor& x, const Tensor& w,
                                 const Tensor& n, const Tensor& weights) {
  GradientTape tape;
  tape.watch({h0, x, w});
  Tensor loss = sum(simple_loop(h0, x, w, n) * weights);
  std::vector<Tensor> g = tape.gradient(loss, {h0, x, w}, UnconnectedGradients::kZero);
  g.insert(g.begin(), loss);
  return g;
}

TEST(WhileGradient, SimpleLoopMatchesEagerAndFiniteDifferences) {
  Tensor h0 = gradcheck::uniform({2, 3}, 1);
  Tensor x = gradcheck::uniform({2, 3}, 2);
  Tensor w = gradcheck::uniform({3}, 3);
  Tensor weights = gradcheck::uniform({2, 3}, 4);
  auto f = function(simple_grads, {.name = "simple_grads"});
  for (int64_t steps : {0, 1, 7}) {
    Tensor n = i64(steps);
    std::vector<Tensor> eager = simple_grads(h0, x, w, n, weights);
    Forward fwd = [&](const std::vector<Tensor>& a) { return simple_loop(a[0], a[1], a[2], n); };
    ConcreteFunction c = f.concrete(h0, x, w, n, weights);
    for (ExecutionMode mode : kModes) {
      std::vector<Tensor> t = c.run({h0, x, w, n, weights}, mode);
      std::string what = fmt::format("{} steps, {}", steps, execution_mode_name(mode));
      ASSERT_EQ(t.size(), 4u);
      expect_close(t[0], eager[0], 8.0 * double(steps + 1), what + ", loss");
      for (size_t i = 0; i < 3; ++i) {
        expect_close(t[1 + i], eager[1 + i], 8.0 * double(steps + 1) * 6,
                     fmt::format("{}, d/d input {}", what, i));
        expect_matches_fd(t[1 + i], finite_difference(fwd, {h0, x, w}, i, weights, 1e-6),
                          fmt::format("{}, d/d input {}", what, i));
      }
    }
  }
  EXPECT_EQ(f.tracing_count(), 1);  // the trip count is data: one graph
  // Zero steps: the loss is sum(h0 * weights), so d/dh0 = weights and x, w get zeros.
  std::vector<Tensor> z = f(h0, x, w, i64(0), weights);
  EXPECT_EQ(z[1].to_vector<double>(), weights.to_vector<double>());
  for (double g : z[2].to_vector<double>()) EXPECT_EQ(g, 0);
  // The forward loop is stacked (accumulators + trip count) and a second while runs it back.
  std::string ir = f.concrete(h0, x, w, i64(3), weights).ir_text();
  EXPECT_THAT(ir, HasSubstr("i64[] stacked"));
  EXPECT_THAT(ir, HasSubstr("f64[?,2,3]"));
}

// Without a tape the traced loop is a plain while: no stacks.
TEST(WhileGradient, NoTapeNoStacks) {
  auto f = function([](const Tensor& h0, const Tensor& x, const Tensor& w, const Tensor& n) {
    return simple_loop(h0, x, w, n);
  });
  std::string ir = f.concrete(gradcheck::uniform({2, 3}, 1), gradcheck::uniform({2, 3}, 2),
                              gradcheck::uniform({3}, 3), i64(2))
                       .ir_text();
  EXPECT_THAT(ir, HasSubstr(" = while("));
  EXPECT_THAT(ir, ::testing::Not(HasSubstr("stacked")));
}

// ---------------------------------------------------------------- nested loops and cond

// Outer loop j < 3: an inner loop of j + 1 steps h <- tanh(h * w) + x, then h <- h * w.
Tensor nested_loop(const Tensor& h0, const Tensor& x, const Tensor& w) {
  return while_loop([](const std::vector<Tensor>& s) { return less(s[0], i64(3)); },
                    [&](const std::vector<Tensor>& s) {
                      Tensor inner = while_loop(
                          [&](const std::vector<Tensor>& t) { return less_equal(t[0], s[0]); },
                          [&](const std::vector<Tensor>& t) {
                            return std::vector<Tensor>{t[0] + i64(1), tanh(t[1] * w) + x};
                          },
                          {i64(0), s[1]})[1];
                      return std::vector<Tensor>{s[0] + i64(1), inner * w};
                    },
                    {i64(0), h0})[1];
}

// cond(sum(x) > 0, the simple loop for 4 steps, sin-free other branch: x * w).
Tensor loop_in_cond(const Tensor& h0, const Tensor& x, const Tensor& w) {
  return cond(
      greater(sum(x), scalar(0, DType::f64)), [&] { return simple_loop(h0, x, w, i64(4)); },
      [&] { return h0 * x * w; });
}

void check_three_input_case(Tensor (*fn)(const Tensor&, const Tensor&, const Tensor&),
                            const Tensor& h0, const Tensor& x, const Tensor& w, double terms,
                            const std::string& name) {
  Tensor weights = gradcheck::uniform(h0.shape(), 14);
  auto grads = [fn, weights](const Tensor& a, const Tensor& b, const Tensor& c) {
    GradientTape tape;
    tape.watch({a, b, c});
    Tensor loss = sum(fn(a, b, c) * weights);
    return tape.gradient(loss, {a, b, c}, UnconnectedGradients::kZero);
  };
  std::vector<Tensor> eager = grads(h0, x, w);
  auto f = function(grads, {.name = name});
  ConcreteFunction c = f.concrete(h0, x, w);
  Forward fwd = [fn](const std::vector<Tensor>& a) { return fn(a[0], a[1], a[2]); };
  for (ExecutionMode mode : kModes) {
    std::vector<Tensor> t = c.run({h0, x, w}, mode);
    ASSERT_EQ(t.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      std::string what = fmt::format("{}, {}, d/d input {}", name, execution_mode_name(mode), i);
      expect_close(t[i], eager[i], terms, what);
      expect_matches_fd(t[i], finite_difference(fwd, {h0, x, w}, i, weights, 1e-6), what);
    }
  }
}

TEST(WhileGradient, NestedLoops) {
  // 3 outer steps of at most 3 inner steps, a few products per step, 6 elements.
  check_three_input_case(nested_loop, gradcheck::uniform({2, 3}, 5), gradcheck::uniform({2, 3}, 6),
                         gradcheck::uniform({3}, 7), 8.0 * 12 * 6, "nested");
}

TEST(WhileGradient, LoopInsideCondBothBranches) {
  Tensor h0 = gradcheck::uniform({2, 3}, 8), w = gradcheck::uniform({3}, 9);
  Tensor xp = gradcheck::uniform({2, 3}, 10, 0.1, 1), xn = -xp;
  check_three_input_case(loop_in_cond, h0, xp, w, 8.0 * 5 * 6, "cond_true");
  check_three_input_case(loop_in_cond, h0, xn, w, 8.0 * 5 * 6, "cond_false");
}

// ---------------------------------------------------------------- variables

// The body reads a trainable variable `u` and assigns `acc` (acc <- acc * u + h), as eagerly;
// after the loop the loss reads acc again.
struct VariableLoop {
  Variable u{"u", gradcheck::uniform({3}, 11)};
  Variable acc{"acc", gradcheck::uniform({3}, 12)};
  Tensor acc0 = acc.value();

  std::vector<Tensor> grads(const Tensor& x, const Tensor& n) {
    GradientTape tape(/*persistent=*/true);
    tape.watch(x);
    Tensor h = while_loop([&](const std::vector<Tensor>& s) { return less(s[0], n); },
                          [&](const std::vector<Tensor>& s) {
                            Tensor next = tanh(s[1] * u.read() + x);
                            acc.assign(acc.read() * u.read() + next);
                            return std::vector<Tensor>{s[0] + i64(1), next};
                          },
                          {i64(0), x})[1];
    Tensor loss = sum(h) + sum(acc.read() * acc.read());
    Tensor gx = tape.gradient(loss, x, UnconnectedGradients::kZero);
    std::vector<Tensor> gv =
        tape.gradient(loss, std::vector<Variable>{u, acc}, UnconnectedGradients::kZero);
    return {loss, gx, gv[0], gv[1], acc.read()};
  }
};

TEST(WhileGradient, VariablesReadAndAssignedInTheBody) {
  Tensor x = gradcheck::uniform({3}, 13);
  Tensor n = i64(5);
  for (ExecutionMode mode : kModes) {
    VariableLoop eager_loop, traced_loop;
    std::vector<Tensor> eager = eager_loop.grads(x, n);
    auto f = function([&](const Tensor& a, const Tensor& b) { return traced_loop.grads(a, b); },
                      {.name = "variable_loop", .mode = mode});
    std::vector<Tensor> t = f(x, n);
    ASSERT_EQ(t.size(), eager.size());
    const char* names[] = {"loss", "d/dx", "d/du", "d/dacc (its final value)", "acc after"};
    for (size_t i = 0; i < t.size(); ++i)
      expect_close(t[i], eager[i], 8.0 * 6 * 6,
                   fmt::format("{}, {}", execution_mode_name(mode), names[i]));
    // The assignments happened as eagerly.
    expect_close(traced_loop.acc.value(), eager_loop.acc.value(), 8.0 * 6, "acc variable");
  }
  // Finite differences of the loss w.r.t. x and u's initial value (fresh variables each time).
  auto loss_of = [&](const std::vector<Tensor>& a) {
    VariableLoop l;
    l.u.assign(a[1]);
    return l.grads(a[0], n)[0];
  };
  VariableLoop ref;
  auto f = function([&](const Tensor& a, const Tensor& b) { return ref.grads(a, b); });
  std::vector<Tensor> t = f(x, n);
  Tensor one = scalar(1, DType::f64);
  expect_matches_fd(t[1], finite_difference(loss_of, {x, ref.u.value()}, 0, one, 1e-6), "d/dx");
  expect_matches_fd(t[2], finite_difference(loss_of, {x, ref.u.value()}, 1, one, 1e-6), "d/du");
}

// ---------------------------------------------------------------- the RNN

struct Rnn {
  Tensor w, u, b;  // [D, H], [H, H], [H]
  // h <- tanh(x_t w + h u + b) for t < T (x: [T, B, D]), one traced while loop.
  Tensor run(const Tensor& xs, const Tensor& h0) const {
    int64_t steps = xs.shape()[0];
    return while_loop(
        [steps](const std::vector<Tensor>& s) { return less(s[0], i64(steps)); },
        [&](const std::vector<Tensor>& s) {
          Tensor x_t = gather(xs, s[0], 0);
          return std::vector<Tensor>{s[0] + i64(1), tanh(matmul(x_t, w) + matmul(s[1], u) + b)};
        },
        {i64(0), h0})[1];
  }
  // The same recurrence unrolled in C++.
  Tensor unrolled(const Tensor& xs, const Tensor& h0) const {
    Tensor h = h0;
    for (int64_t t = 0; t < xs.shape()[0]; ++t)
      h = tanh(matmul(gather(xs, i64(t), 0), w) + matmul(h, u) + b);
    return h;
  }
};

std::vector<Tensor> rnn_grads(const Tensor& xs, const Tensor& h0, const Tensor& w, const Tensor& u,
                              const Tensor& b, bool unrolled) {
  GradientTape tape;
  tape.watch({xs, h0, w, u, b});
  Rnn rnn{w, u, b};
  Tensor h = unrolled ? rnn.unrolled(xs, h0) : rnn.run(xs, h0);
  Tensor loss = sum(h * gradcheck::uniform(h0.shape(), 21));
  return tape.gradient(loss, {xs, h0, w, u, b}, UnconnectedGradients::kZero);
}

TEST(WhileGradient, RnnOfTwoHundredStepsIsOneLoop) {
  const int64_t B = 2, D = 3, H = 4;
  Tensor h0 = gradcheck::uniform({B, H}, 22), w = gradcheck::uniform({D, H}, 23, -0.5, 0.5);
  Tensor u = gradcheck::uniform({H, H}, 24, -0.5, 0.5), b = gradcheck::uniform({H}, 25);
  auto f = function([](const Tensor& xs, const Tensor& h0, const Tensor& w, const Tensor& u,
                       const Tensor& b) { return rnn_grads(xs, h0, w, u, b, false); },
                    {.name = "rnn_grads"});
  Tensor x10 = gradcheck::uniform({10, B, D}, 26), x200 = gradcheck::uniform({200, B, D}, 27);
  size_t nodes10 = f.concrete(x10, h0, w, u, b).graph().total_node_count();
  size_t nodes200 = f.concrete(x200, h0, w, u, b).graph().total_node_count();
  EXPECT_EQ(nodes10, nodes200);
  EXPECT_LT(nodes200, 200u);

  std::vector<Tensor> unrolled = rnn_grads(x200, h0, w, u, b, true);
  ConcreteFunction c = f.concrete(x200, h0, w, u, b);
  Tensor weights = gradcheck::uniform(h0.shape(), 21);
  Forward fwd = [](const std::vector<Tensor>& a) {
    return Rnn{a[2], a[3], a[4]}.unrolled(a[0], a[1]);
  };
  const char* names[] = {"xs", "h0", "w", "u", "b"};
  for (ExecutionMode mode : kModes) {
    std::vector<Tensor> t = c.run({x200, h0, w, u, b}, mode);
    ASSERT_EQ(t.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      std::string what = fmt::format("{}, d/d{}", execution_mode_name(mode), names[i]);
      // 200 steps, each a sum of D + H products and a tanh.
      expect_close(t[i], unrolled[i], 8.0 * 200 * (D + H), what);
      if (i == 0) continue;  // xs: 1200 elements; its finite differences are below
      expect_matches_fd(t[i], finite_difference(fwd, {x200, h0, w, u, b}, i, weights, 1e-6), what);
    }
  }
  // d/dxs on the last steps (the earlier ones vanish through 200 tanh's anyway): check the
  // finite differences of a 12-step sequence element by element.
  Tensor x12 = gradcheck::uniform({12, B, D}, 28);
  std::vector<Tensor> t12 =
      f.concrete(x12, h0, w, u, b).run({x12, h0, w, u, b}, ExecutionMode::kCompiled);
  expect_matches_fd(t12[0], finite_difference(fwd, {x12, h0, w, u, b}, 0, weights, 1e-6), "dxs");
}

// ---------------------------------------------------------------- errors

TEST(WhileGradient, RandomNumbersInTheBodyHaveNoGradient) {
  auto f = function([](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = while_loop([](const std::vector<Tensor>& s) { return less(s[0], i64(2)); },
                          [](const std::vector<Tensor>& s) {
                            return std::vector<Tensor>{
                                s[0] + i64(1), s[1] * random_uniform({3}, 7, 0, 1, DType::f64)};
                          },
                          {i64(0), x})[1];
    return tape.gradient(sum(y), x);
  });
  EXPECT_THAT(error_of([&] { f(gradcheck::uniform({3}, 1)); }),
              HasSubstr("draws random numbers (random_uniform)"));
}

TEST(WhileGradient, SecondOrderThroughATracedLoopIsAnError) {
  auto f = function([](const Tensor& x) {
    GradientTape outer;
    outer.watch(x);
    Tensor g;
    {
      GradientTape inner;
      inner.watch(x);
      Tensor y = simple_loop(x, x, x, i64(2));
      g = inner.gradient(sum(y), x);
    }
    return outer.gradient(sum(g), x);
  });
  EXPECT_THAT(error_of([&] { f(gradcheck::uniform({3}, 1)); }),
              HasSubstr("second-order gradients through a kiln::while_loop traced"));
}

TEST(WhileGradient, ReassignedCaptureIsAnError) {
  auto f = function([](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    Tensor scale = x * 2.0;
    Tensor y = while_loop([](const std::vector<Tensor>& s) { return less(s[0], i64(2)); },
                          [&](const std::vector<Tensor>& s) {
                            return std::vector<Tensor>{s[0] + i64(1), s[1] * scale};
                          },
                          {i64(0), x})[1];
    scale = x * 3.0;  // the body now captures another tensor
    return tape.gradient(sum(y), x);
  });
  EXPECT_THAT(error_of([&] { f(gradcheck::uniform({3}, 1)); }),
              HasSubstr("re-running body_fn to differentiate it used a tensor"));
}

}  // namespace
}  // namespace kiln
