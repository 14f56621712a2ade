// kiln::cond and kiln::while_loop, eagerly and inside kiln::function.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/profiler.h"
#include "tests/function/function_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::values;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor positive_sum(const Tensor& x) { return greater(sum(x), scalar(0)); }

// Inputs whose sums are positive (2.25) and negative (-2.25).
Tensor positive() { return tensor<float>({0.5f, -0.25f, 2}); }
Tensor negative() { return tensor<float>({-0.5f, 0.25f, -2}); }

// ---------------------------------------------------------------- cond

Tensor branchy(const Tensor& x, const Tensor& w) {
  return cond(
      positive_sum(x), [&] { return tanh(x) * w; }, [&] { return square(x) - w; });
}

TEST(ControlFlowCond, TracedMatchesEagerForBothOutcomes) {
  Tensor w = tensor<float>({2, 3, -1});
  int invocations = 0;
  auto f = function(
      [&](const Tensor& x, const Tensor& w) {
        ++invocations;
        return branchy(x, w);
      },
      {.name = "branchy"});
  EXPECT_EQ(values(f(positive(), w)), values(tanh(positive()) * w));
  EXPECT_THAT(values(f(negative(), w)), ElementsAre(0.25f - 2, 0.0625f - 3, 4 + 1));
  EXPECT_EQ(values(f(positive(), w)), values(branchy(positive(), w)));
  EXPECT_EQ(values(f(negative(), w)), values(branchy(negative(), w)));
  EXPECT_EQ(f.tracing_count(), 1);  // one graph holds both branches
  EXPECT_EQ(invocations, 1);
  std::string ir = f.concrete(positive(), w).ir_text();
  EXPECT_THAT(ir, HasSubstr(" = cond("));
  EXPECT_THAT(ir, HasSubstr("then ("));
  EXPECT_THAT(ir, HasSubstr("else ("));
}

TEST(ControlFlowCond, EagerRunsOnlyTheTakenBranch) {
  int taken_true = 0, taken_false = 0;
  Tensor r = cond(
      positive_sum(negative()),
      [&] {
        ++taken_true;
        return negative();
      },
      [&] {
        ++taken_false;
        return -negative();
      });
  EXPECT_EQ(taken_true, 0);
  EXPECT_EQ(taken_false, 1);
  EXPECT_THAT(values(r), ElementsAre(0.5f, -0.25f, 2));
}

// y = cond(sum(x) > 0, sum(tanh(x) * w), sum(x^2 * u)): w only in the true branch, u only in
// the false branch, plus a multi-output form.
std::tuple<Tensor, Tensor, Tensor, Tensor> cond_grads(const Tensor& x, const Tensor& w,
                                                      const Tensor& u) {
  GradientTape tape;
  tape.watch(x);
  tape.watch(w);
  tape.watch(u);
  std::vector<Tensor> outs = cond(
      positive_sum(x),
      [&] {
        return std::vector<Tensor>{sum(tanh(x) * w), x * 2.0};
      },
      [&] {
        return std::vector<Tensor>{sum(square(x) * u), x * x};
      });
  Tensor y = outs[0] + sum(outs[1]);
  std::vector<Tensor> g = tape.gradient(y, {x, w, u}, UnconnectedGradients::kZero);
  return {y, g[0], g[1], g[2]};
}

TEST(ControlFlowCond, GradientsThroughTracedCondMatchEager) {
  Tensor w = tensor<float>({0.5f, 1.5f, -2});
  Tensor u = tensor<float>({3, -1, 0.25f});
  auto f = function(cond_grads, {.name = "cond_grads"});
  for (const Tensor& x : {positive(), negative()}) {
    auto [ye, gxe, gwe, gue] = cond_grads(x, w, u);
    auto [yt, gxt, gwt, gut] = f(x, w, u);
    EXPECT_EQ(ye.item<float>(), yt.item<float>());
    EXPECT_EQ(values(gxe), values(gxt));
    EXPECT_EQ(values(gwe), values(gwt));
    EXPECT_EQ(values(gue), values(gut));
  }
  EXPECT_EQ(f.tracing_count(), 1);
  // Hand-computed: false branch (x = negative()): dy/dx = 2 x u + 2 x, dy/dw = 0, dy/du = x^2.
  auto [y, gx, gw, gu] = f(negative(), w, u);
  EXPECT_THAT(values(gx), ElementsAre(2 * -0.5f * 3 + 2 * -0.5f, 2 * 0.25f * -1 + 2 * 0.25f,
                                      2 * -2 * 0.25f + 2 * -2));
  EXPECT_THAT(values(gw), ElementsAre(0, 0, 0));
  EXPECT_THAT(values(gu), ElementsAre(0.25f, 0.0625f, 4));
  // True branch: dy/du = 0, dy/dw = tanh(x).
  auto [y2, gx2, gw2, gu2] = f(positive(), w, u);
  EXPECT_EQ(values(gw2), values(tanh(positive())));
  EXPECT_THAT(values(gu2), ElementsAre(0, 0, 0));
}

// Regression: a variable read only inside a traced branch (a layer called in the branch) got
// a zero gradient, because the tape watched the branch's lifted copy of the value instead of
// the tensor the cond node takes as operand.
TEST(ControlFlowCond, GradientsReachVariablesReadInsideBranches) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  set_random_seed(4);
  Dense dense(2);
  dense(zeros({1, 3}));
  Variable scale("scale", scalar(1.5f));
  auto grads = [&](const Tensor& x) {
    GradientTape tape;
    Tensor y = cond(
        positive_sum(x), [&] { return sum(tanh(dense(x))); },
        [&] { return sum(x * scale.read()); });
    std::vector<Variable> vars = dense->trainable_weights();
    vars.push_back(scale);
    std::vector<Tensor> g = tape.gradient(y, vars, UnconnectedGradients::kZero);
    g.insert(g.begin(), y);
    return g;
  };
  auto f = function(grads, {.name = "branch_weights"});
  Tensor xp = tensor<float>({1, 2, -0.5f, 0.25f, 0, 1}, Shape{2, 3});
  Tensor xn = -xp;
  for (const Tensor& x : {xp, xn}) {
    std::vector<Tensor> e = grads(x), t = f(x);
    ASSERT_EQ(e.size(), 4u);
    ASSERT_EQ(t.size(), 4u);
    for (size_t i = 0; i < e.size(); ++i) EXPECT_EQ(values(e[i]), values(t[i])) << "output " << i;
  }
  EXPECT_EQ(f.tracing_count(), 1);
  // True branch: d/dbias = sum over the batch of 1 - tanh(x W + b)^2 (non-zero), d/dscale = 0.
  std::vector<Tensor> tp = f(xp);
  for (float g : values(tp[2])) EXPECT_GT(g, 0);
  EXPECT_EQ(tp[3].item<float>(), 0);
  // False branch: d/dscale = sum(x) = -3.75; the layer's weights get 0.
  std::vector<Tensor> tn = f(xn);
  EXPECT_EQ(tn[3].item<float>(), -3.75f);
  EXPECT_THAT(values(tn[1]), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_THAT(values(tn[2]), ElementsAre(0, 0));
}

// Regression: the branches of a cond's gradient cond referred to locals of the first
// backward pass, so differentiating them again (second order) read dead memory.
TEST(ControlFlowCond, SecondOrderGradientThroughTracedCond) {
  auto grads = [](const Tensor& x) {
    GradientTape outer;
    outer.watch(x);
    Tensor dx;
    {
      GradientTape inner;
      inner.watch(x);
      Tensor y = cond(
          positive_sum(x), [&] { return sum(x * x * x); }, [&] { return sum(x * x); });
      dx = inner.gradient(y, x);
    }
    return std::pair<Tensor, Tensor>{dx, outer.gradient(sum(dx), x)};
  };
  auto f = function(grads, {.name = "second_order"});
  auto [dp, ddp] = f(tensor<float>({1, 2}));  // x^3: 3 x^2 and 6 x
  EXPECT_THAT(values(dp), ElementsAre(3, 12));
  EXPECT_THAT(values(ddp), ElementsAre(6, 12));
  auto [dn, ddn] = f(tensor<float>({-1, -2}));  // x^2: 2 x and 2
  EXPECT_THAT(values(dn), ElementsAre(-2, -4));
  EXPECT_THAT(values(ddn), ElementsAre(2, 2));
  auto [de, dde] = grads(tensor<float>({1, 2}));
  EXPECT_EQ(values(de), values(dp));
  EXPECT_EQ(values(dde), values(ddp));
  EXPECT_EQ(f.tracing_count(), 1);
}

TEST(ControlFlowCond, TrainingStepWithALayerInOneBranchMatchesEager) {
  // Bitwise comparison with eager: the traced graph on the reference executor.
  ScopedExecutionMode reference_mode(ExecutionMode::kReference);
  auto make = [] {
    set_random_seed(8);
    Dense d(3);
    d(zeros({1, 3}));
    return d;
  };
  Dense de = make(), dt = make();
  Optimizer oe = SGD({.learning_rate = 0.5}), ot = SGD({.learning_rate = 0.5});
  auto step = [](Dense& d, Optimizer& opt, const Tensor& x) {
    GradientTape tape;
    Tensor l = cond(
        positive_sum(x), [&] { return mean(square(d(x) - x)); }, [&] { return mean(square(x)); });
    std::vector<Variable> vars = d->trainable_weights();
    std::vector<Tensor> g = tape.gradient(l, vars, UnconnectedGradients::kZero);
    opt->apply_gradients(g, vars);
    return l;
  };
  auto traced = function([&](const Tensor& x) { return step(dt, ot, x); });
  for (int i = 0; i < 4; ++i) {
    Tensor x = random_normal({4, 3}, 50 + i) + (i % 2 ? -2.0 : 2.0);
    EXPECT_EQ(step(de, oe, x).item<float>(), traced(x).item<float>()) << "step " << i;
  }
  std::vector<Tensor> we = de->get_weights(), wt = dt->get_weights();
  for (size_t i = 0; i < we.size(); ++i) EXPECT_EQ(values(we[i]), values(wt[i])) << "weight " << i;
  EXPECT_EQ(traced.tracing_count(), 1);
}

TEST(ControlFlowCond, VariableAssignedInOneBranch) {
  Variable hits("hits", scalar(0), /*trainable=*/false);
  Variable last_negative("last_negative", zeros({3}), /*trainable=*/false);
  auto f = function(
      [&](const Tensor& x) {
        return cond(
            positive_sum(x),
            [&] {
              hits.assign_add(scalar(1));
              return x + hits.read();  // sees the new value
            },
            [&] {
              last_negative.assign(x);
              return x;
            });
      },
      {.name = "counting"});
  EXPECT_THAT(values(f(positive())), ElementsAre(1.5f, 0.75f, 3));
  EXPECT_EQ(hits.value().item<float>(), 1);
  EXPECT_THAT(values(last_negative.value()), ElementsAre(0, 0, 0));  // untouched
  EXPECT_THAT(values(f(positive())), ElementsAre(2.5f, 1.75f, 4));
  EXPECT_EQ(hits.value().item<float>(), 2);  // applied once per call
  EXPECT_EQ(values(f(negative())), values(negative()));
  EXPECT_EQ(hits.value().item<float>(), 2);  // untouched
  EXPECT_EQ(values(last_negative.value()), values(negative()));
  EXPECT_EQ(f.tracing_count(), 1);
  std::vector<VariableUse> uses = f.concrete(positive()).variables();
  ASSERT_EQ(uses.size(), 2u);
  for (const VariableUse& u : uses) EXPECT_TRUE(u.written) << u.variable.name();
}

TEST(ControlFlowCond, BranchMismatchErrors) {
  auto types = function([](const Tensor& x) {
    return cond(
        positive_sum(x), [&] { return x; }, [&] { return sum(x); });
  });
  EXPECT_THAT(error_of([&] { types(positive()); }),
              HasSubstr("cond: output 0 is f32[3] in true_fn but f32[] in false_fn; both "
                        "branches must return the same types"));
  auto counts = function([](const Tensor& x) {
    return cond(
        positive_sum(x),
        [&] {
          return std::vector<Tensor>{x, x};
        },
        [&] { return std::vector<Tensor>{x}; })[0];
  });
  EXPECT_THAT(error_of([&] { counts(positive()); }),
              HasSubstr("cond: true_fn returns 2 tensor(s) but false_fn returns 1"));
  EXPECT_TRUE(executing_eagerly());
  EXPECT_THAT(error_of([&] {
                cond(
                    sum(positive()), [&] { return positive(); }, [&] { return positive(); });
              }),
              HasSubstr("cond: the predicate must be a bool scalar, got f32[]"));
}

// ---------------------------------------------------------------- while_loop

// Doubles x until sum(x) > limit; also counts the steps.
std::pair<Tensor, Tensor> double_until(const Tensor& x, const Tensor& limit) {
  std::vector<Tensor> r =
      while_loop([&](const std::vector<Tensor>& v) { return less_equal(sum(v[0]), limit); },
                 [](const std::vector<Tensor>& v) {
                   return std::vector<Tensor>{v[0] * 2.0, v[1] + scalar(1, DType::i32)};
                 },
                 {x, scalar(0, DType::i32)});
  return {r[0], r[1]};
}

TEST(ControlFlowWhile, TracedMatchesEager) {
  int invocations = 0;
  auto f = function(
      [&](const Tensor& x, const Tensor& limit) {
        ++invocations;
        return double_until(x, limit);
      },
      {.name = "double_until"});
  Tensor limit = scalar(100);
  struct Case {
    std::vector<float> x;
    std::vector<float> want;
    int steps;
  };
  const Case cases[] = {{{1, 2}, {64, 128}, 6},  // 3 -> 6 -> ... -> 192
                        {{30, 40}, {60, 80}, 1},
                        {{200, 0}, {200, 0}, 0}};
  for (const Case& c : cases) {
    Tensor x = tensor<float>(c.x);
    auto [ye, ne] = double_until(x, limit);
    auto [yt, nt] = f(x, limit);
    EXPECT_EQ(values(yt), c.want);
    EXPECT_EQ(nt.item<int32_t>(), c.steps);
    EXPECT_EQ(values(ye), values(yt));
    EXPECT_EQ(ne.item<int32_t>(), nt.item<int32_t>());
    EXPECT_EQ(nt.dtype(), DType::i32);
  }
  // The limit is a traced argument: changing it changes the trip count, not the graph.
  auto [y, n] = f(tensor<float>({1, 2}), scalar(10));
  EXPECT_THAT(values(y), ElementsAre(4, 8));
  EXPECT_EQ(n.item<int32_t>(), 2);
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_EQ(invocations, 1);
  EXPECT_THAT(f.concrete(tensor<float>({1, 2}), limit).ir_text(), HasSubstr(" = while("));
}

// An RNN-like loop: h <- (h W) / 2 for `steps` steps, W a loop variable passed through. Traced,
// the product packs W once for the whole loop (runtime/loop_invariants.h); the bits are those
// of the eager loop, which multiplies W as it is stored.
TEST(ControlFlowWhile, ProductsPackAWeightPassedThroughOnce) {
  auto rnn = [](const Tensor& h0, const Tensor& w) {
    return while_loop(
        [](const std::vector<Tensor>& v) { return less(v[2], scalar(5, DType::i32)); },
        [](const std::vector<Tensor>& v) {
          return std::vector<Tensor>{matmul(v[0], v[1]) * 0.5, v[1], v[2] + scalar(1, DType::i32)};
        },
        {h0, w, scalar(0, DType::i32)})[0];
  };
  Tensor h0 = random_uniform({32, 256}, 7, -1, 1);
  Tensor w = random_uniform({256, 256}, 8, -0.2, 0.2);
  const std::vector<float> eager = values(rnn(h0, w));
  auto f = function(rnn, {.name = "rnn_loop", .mode = ExecutionMode::kCompiled});
  runtime::start_profiling();
  const std::vector<float> traced = values(f(h0, w));
  const std::vector<runtime::ProfileEvent> events = runtime::stop_profiling();
  EXPECT_EQ(traced, eager);
  int products = 0, packed_once = 0;
  for (const runtime::ProfileEvent& e : events)
    if (e.category == "gemm") {
      ++products;
      if (e.detail.find("B packed-once-per-loop") != std::string::npos) ++packed_once;
    }
  if (runtime::gemm_kernels() != "eigen") {
    EXPECT_EQ(products, 5);
    EXPECT_EQ(packed_once, 5);
  }
}

TEST(ControlFlowWhile, TracedGradientMatchesEager) {
  auto grad = [](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = double_until(x, scalar(100)).first;
    return tape.gradient(sum(y), x);
  };
  // Eagerly the loop is unrolled on the tape: d(2^k x)/dx = 2^k.
  EXPECT_THAT(values(grad(tensor<float>({1, 2}))), ElementsAre(64, 64));
  // Traced: a stacked while and its gradient loop (tests/function/while_gradient_test.cc).
  auto f = function(grad, {.name = "loop_grad"});
  EXPECT_THAT(values(f(tensor<float>({1, 2}))), ElementsAre(64, 64));
  EXPECT_THAT(values(f(tensor<float>({30, 40}))), ElementsAre(2, 2));
  EXPECT_EQ(f.tracing_count(), 1);
  EXPECT_TRUE(executing_eagerly());
}

TEST(ControlFlowWhile, Errors) {
  Variable v("v", scalar(0));
  auto assigns = function([&](const Tensor& x) {
    return while_loop(
        [&](const std::vector<Tensor>& s) {
          v.assign(s[0]);
          return less(s[0], scalar(3));
        },
        [&](const std::vector<Tensor>& s) { return std::vector<Tensor>{s[0] + 1.0}; }, {x})[0];
  });
  EXPECT_THAT(error_of([&] { assigns(scalar(0)); }),
              HasSubstr("while_loop: cond_fn assigns variable \"v\"; assign variables in "
                        "body_fn instead"));
  auto retyped = function([](const Tensor& x) {
    return while_loop([](const std::vector<Tensor>& s) { return less(sum(s[0]), scalar(3)); },
                      [](const std::vector<Tensor>& s) {
                        return std::vector<Tensor>{concat({s[0], s[0]})};
                      },
                      {x})[0];
  });
  EXPECT_THAT(error_of([&] { retyped(ones({1})); }),
              HasSubstr("while_loop: loop variable 0 is f32[1] but body_fn returns f32[2]"));
}

}  // namespace
}  // namespace kiln
