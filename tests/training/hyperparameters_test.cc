// Optimizer hyperparameters are variables: a compiled training step sees a changed learning
// rate, momentum or beta at its next call without retracing; schedules give the same per-step
// rates eagerly and compiled; LearningRateScheduler and ReduceLROnPlateau change the rate of a
// compiled fit; gradient clipping matches hand-computed values eagerly and compiled.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/kiln.h"
#include "tests/support/expect_error.h"

namespace kiln {
namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

using test::expect_error;

std::vector<double> variable_values(const Variable& v) { return v.value().to_vector<double>(); }

// One training step on float64 weights w with loss sum(w * x) (the gradient is x), as a
// kiln::function (compiled) and as the plain callable (eager).
struct LinearStep {
  Variable w;
  Optimizer opt;
  std::function<Tensor(const Tensor&)> body;
  Function<std::function<Tensor(const Tensor&)>> step;

  LinearStep(Optimizer optimizer, std::vector<double> w0)
      : w("w", tensor(w0, Shape{int64_t(w0.size())}, DType::f64)),
        opt(std::move(optimizer)),
        body([this](const Tensor& x) {
          GradientTape tape;
          Tensor loss = sum(w.read() * x);
          opt->apply_gradients(tape.gradient(loss, std::vector<Variable>{w}), {w});
          return loss;
        }),
        step(kiln::function(body, {.name = "linear_step", .mode = ExecutionMode::kCompiled})) {}
  LinearStep(const LinearStep&) = delete;

  void run(const Tensor& x, bool eager) {
    if (eager)
      (void)body(x);
    else
      (void)step(x);
  }
};

Tensor f64s(std::vector<double> v) { return tensor(v, Shape{int64_t(v.size())}, DType::f64); }

// ---------------------------------------------------------------- the bug

TEST(Hyperparameters, LearningRateZeroAfterTheFirstCompiledStepStopsTheWeights) {
  for (const char* name : {"sgd", "adam", "adamw", "rmsprop"}) {
    SCOPED_TRACE(name);
    LinearStep s(Optimizer(name), {1.0, -2.0});
    const Tensor x = f64s({0.5, -1.5});
    s.run(x, false);
    const std::vector<double> after_first = variable_values(s.w);
    EXPECT_NE(after_first, (std::vector<double>{1.0, -2.0})) << "the first step moved nothing";
    s.opt->set_learning_rate(0.0);
    s.run(x, false);
    s.run(x, false);
    // w - 0 * anything finite is w: bitwise. AdamW's decay w - w wd 0 is w too.
    EXPECT_EQ(variable_values(s.w), after_first);
    EXPECT_EQ(s.step.tracing_count(), 1) << "changing the rate retraced";
    EXPECT_EQ(s.opt->iterations(), 3);
    // And back: the next step moves again.
    s.opt->set_learning_rate(0.1);
    s.run(x, false);
    EXPECT_NE(variable_values(s.w), after_first);
  }
}

TEST(Hyperparameters, AssigningTheVariableWorksLikeTheSetter) {
  LinearStep s(SGD({.learning_rate = 0.5}), {1.0});
  s.run(f64s({1.0}), false);  // w = 1 - 0.5 = 0.5
  EXPECT_EQ(variable_values(s.w)[0], 0.5);
  Variable lr = s.opt->hyperparameters().at(0);
  EXPECT_EQ(lr.name(), "SGD/learning_rate");
  lr.assign(scalar(0.25, DType::f64));
  EXPECT_EQ(s.opt->current_learning_rate(), 0.25);
  s.run(f64s({1.0}), false);  // w = 0.5 - 0.25
  EXPECT_EQ(variable_values(s.w)[0], 0.25);
}

// Every hyperparameter of every rule reaches the compiled step: the same trajectory, with a
// hyperparameter changed after the first step, eagerly and compiled. Eager and compiled run
// the same float64 arithmetic except for vector-math pow in Adam's bias correction (a few ulps),
// so they agree to a few ulps of the weights; a hyperparameter the graph ignored would move the
// weights by ~1e-3 or more.
TEST(Hyperparameters, ChangedHyperparametersReachTheCompiledStep) {
  struct Case {
    const char* what;
    std::function<Optimizer()> make;
    const char* hyperparameter;
    double new_value;
  };
  const std::vector<Case> cases = {
      {"sgd momentum", [] { return SGD({.learning_rate = 0.1, .momentum = 0.9}); }, "momentum",
       0.2},
      {"adam beta_1", [] { return Adam({.learning_rate = 0.1}); }, "beta_1", 0.5},
      {"adam beta_2", [] { return Adam({.learning_rate = 0.1}); }, "beta_2", 0.9},
      {"adam epsilon", [] { return Adam({.learning_rate = 0.1}); }, "epsilon", 0.5},
      {"adamw weight_decay", [] { return AdamW({.learning_rate = 0.1}); }, "weight_decay", 0.5},
      {"rmsprop rho", [] { return RMSprop({.learning_rate = 0.1}); }, "rho", 0.5},
      {"rmsprop momentum", [] { return RMSprop({.learning_rate = 0.1, .momentum = 0.5}); },
       "momentum", 0.9},
  };
  const std::vector<Tensor> xs = {f64s({0.5, -1.5}), f64s({-0.25, 2.0}), f64s({1.0, 1.0}),
                                  f64s({0.75, -0.5})};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    LinearStep eager(c.make(), {1.0, -2.0}), compiled(c.make(), {1.0, -2.0});
    LinearStep unchanged(c.make(), {1.0, -2.0});
    for (size_t k = 0; k < xs.size(); ++k) {
      if (k == 1) {
        eager.opt->set_hyperparameter(c.hyperparameter, c.new_value);
        compiled.opt->set_hyperparameter(c.hyperparameter, c.new_value);
        EXPECT_EQ(compiled.opt->hyperparameter(c.hyperparameter), c.new_value);
      }
      eager.run(xs[k], true);
      compiled.run(xs[k], false);
      unchanged.run(xs[k], true);
    }
    const std::vector<double> we = variable_values(eager.w), wc = variable_values(compiled.w),
                              wu = variable_values(unchanged.w);
    double moved = 0;
    for (size_t i = 0; i < we.size(); ++i) {
      EXPECT_NEAR(wc[i], we[i], 64 * kEps * (std::fabs(we[i]) + 1)) << "weight " << i;
      moved = std::max(moved, std::fabs(we[i] - wu[i]));
    }
    EXPECT_GT(moved, 1e-3) << "the hyperparameter change had no effect eagerly";
    EXPECT_EQ(compiled.step.tracing_count(), 1);
  }
}

// A schedule is computed in the graph from iterations: the rate of step k is schedule(k) in
// both modes. With gradient 1 each step moves w by exactly -lr (up to the rounding of w - lr).
TEST(Hyperparameters, ScheduleGivesTheSamePerStepRatesEagerlyAndCompiled) {
  LearningRateSchedule schedule = schedules::exponential_decay(0.1, 2, 0.5);
  auto make = [&] {
    Optimizer opt = SGD();
    opt->set_schedule(schedule);
    return opt;
  };
  LinearStep eager(make(), {1.0}), compiled(make(), {1.0});
  for (int k = 0; k < 6; ++k) {
    const double we = variable_values(eager.w)[0], wc = variable_values(compiled.w)[0];
    eager.run(f64s({1.0}), true);
    compiled.run(f64s({1.0}), false);
    const double want = schedule(int64_t(k));
    // pow in the graph: a few ulps of lr; w - lr rounds to an ulp of w (<= 1).
    const double tol = 16 * kEps * want + 2 * kEps;
    EXPECT_NEAR(we - variable_values(eager.w)[0], want, tol) << "eager step " << k;
    EXPECT_NEAR(wc - variable_values(compiled.w)[0], want, tol) << "compiled step " << k;
  }
  EXPECT_EQ(compiled.step.tracing_count(), 1);
  // The schedule is part of the traced graph: it cannot change now.
  expect_error([&] { compiled.opt->set_schedule(nullptr); }, {"schedule", "traced"});
}

TEST(Hyperparameters, Errors) {
  Optimizer sgd = SGD();
  expect_error([&] { sgd->set_hyperparameter("momentum", 0.9); },
               {"SGD", "momentum", "momentum > 0"});
  expect_error([&] { sgd->hyperparameter("beta_1"); }, {"beta_1", "learning_rate"});
  expect_error([&] { sgd->set_learning_rate(std::nan("")); }, {"learning_rate", "finite"});
  Optimizer with_momentum = SGD({.momentum = 0.5});
  expect_error([&] { with_momentum->set_hyperparameter("momentum", 2.0); }, {"momentum", "2"});
  EXPECT_EQ(with_momentum->hyperparameter("momentum"), 0.5);  // unchanged by the bad call
  Optimizer adam = Adam();
  std::vector<std::string> names;
  for (const Variable& v : adam->hyperparameters()) names.push_back(v.name());
  EXPECT_EQ(names, (std::vector<std::string>{"adam/learning_rate", "adam/beta_1", "adam/beta_2",
                                             "adam/epsilon"}));
  adam->set_schedule(schedules::exponential_decay(0.1, 1, 0.5));
  expect_error([&] { adam->set_learning_rate(0.5); }, {"schedule"});
}

// ---------------------------------------------------------------- gradient clipping

// Hand values: g = (3, 4) has norm 5.
//   clipnorm 1:          (0.6, 0.8)          clipnorm 10: unchanged
//   global_clipnorm 2.5: with the second gradient (12): global norm 13 -> scale 2.5/13
//   clipvalue 3.5:       (3, 3.5)
TEST(GradientClipping, MatchesHandComputedValuesEagerlyAndCompiled) {
  struct Case {
    GradientClipping clip;
    std::vector<double> a, b;  // expected clipped gradients of the two variables
  };
  const double s = 2.5 / 13;
  const std::vector<Case> cases = {
      {{.clipnorm = 1.0}, {0.6, 0.8}, {1.0}},
      {{.clipnorm = 10.0}, {3.0, 4.0}, {10.0}},
      {{.global_clipnorm = 2.5}, {3 * s, 4 * s}, {12 * s}},
      {{.global_clipnorm = 20.0}, {3.0, 4.0}, {12.0}},
      {{.clipvalue = 3.5}, {3.0, 3.5}, {3.5}},
  };
  for (bool compiled : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(compiled ? "compiled" : "eager");
      Variable a("a", f64s({0.0, 0.0})), b("b", f64s({0.0}));
      Optimizer opt = SGD({.learning_rate = 1.0, .clip = c.clip});
      auto body = [&](const Tensor& ga, const Tensor& gb) {
        opt->apply_gradients({ga, gb}, {a, b});
      };
      auto step = kiln::function(body, {.mode = ExecutionMode::kCompiled});
      if (compiled)
        step(f64s({3.0, 4.0}), f64s({12.0}));
      else
        body(f64s({3.0, 4.0}), f64s({12.0}));
      // w = 0 - clipped: one division and a square root away from the hand value.
      for (size_t i = 0; i < c.a.size(); ++i)
        EXPECT_NEAR(-variable_values(a)[i], c.a[i], 8 * kEps * std::fabs(c.a[i]));
      EXPECT_NEAR(-variable_values(b)[0], c.b[0], 8 * kEps * std::fabs(c.b[0]));
    }
  }
}

TEST(GradientClipping, UndefinedGradientsAndErrors) {
  Variable a("a", f64s({0.0, 0.0})), b("b", f64s({1.0}));
  Optimizer opt = SGD({.learning_rate = 1.0, .clip = {.global_clipnorm = 1.0}});
  opt->apply_gradients({f64s({3.0, 4.0}), Tensor()}, {a, b});
  EXPECT_NEAR(variable_values(a)[0], -0.6, 4 * kEps);
  EXPECT_EQ(variable_values(b)[0], 1.0);
  expect_error([] { SGD({.clip = {.clipnorm = 1.0, .clipvalue = 1.0}}); }, {"only one"});
  expect_error([] { Adam({.clip = {.clipnorm = -1.0}}); }, {"adam", "clipnorm", "-1"});
  expect_error([] { RMSprop({.clip = {.clipvalue = 0.0}}); }, {"clipvalue", "> 0"});
}

// ---------------------------------------------------------------- callbacks

// Records the weights at the end of every epoch.
struct WeightRecorder : Callback {
  std::vector<std::vector<Tensor>> weights;
  void on_epoch_end(int, const Logs&) override { weights.push_back(model()->get_weights()); }
};

Sequential small_model_with(Optimizer opt) {
  clear_session();
  set_random_seed(5);
  Sequential m({Dense(4, {.activation = "tanh"}), Dense(1)}, Shape{3});
  m->compile({.optimizer = opt, .loss = "mse"});  // traced, compiled (default mode)
  return m;
}

std::pair<Tensor, Tensor> small_data() {
  Tensor x = random_normal({32, 3}, /*seed=*/6);
  return {x, sum(x, {1}, true) * 0.5f};
}

bool same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].to_vector<float>() != b[i].to_vector<float>()) return false;
  return true;
}

TEST(LearningRateCallbacks, SchedulerChangesTheRateOfACompiledFit) {
  Sequential m = small_model_with(SGD({.learning_rate = 0.05}));
  auto [x, y] = small_data();
  auto recorder = std::make_shared<WeightRecorder>();
  std::vector<double> seen;
  auto scheduler = std::make_shared<LearningRateScheduler>([&](int epoch, double lr) {
    seen.push_back(lr);
    return epoch < 2 ? lr : 0.0;  // epochs 0 and 1 train, 2 and 3 do not
  });
  m->fit(x, y, {.batch_size = 8, .epochs = 4, .verbose = 0, .callbacks = {scheduler, recorder}});
  EXPECT_EQ(seen, (std::vector<double>{0.05, 0.05, 0.05, 0.0}));
  ASSERT_EQ(recorder->weights.size(), 4u);
  EXPECT_FALSE(same(recorder->weights[0], recorder->weights[1]));
  EXPECT_TRUE(same(recorder->weights[1], recorder->weights[2]));
  EXPECT_TRUE(same(recorder->weights[2], recorder->weights[3]));
  EXPECT_EQ(m->compile_options().optimizer->current_learning_rate(), 0.0);
  EXPECT_EQ(m->compile_options().optimizer->iterations(), 16);
}

TEST(LearningRateCallbacks, ReduceLROnPlateauChangesTheRateOfACompiledFit) {
  // "loss" never improves by 1e9: epoch 0 sets the best, epoch 1 waits 1 >= patience and
  // multiplies the rate by factor 0; epochs 2 and 3 do not move the weights.
  Sequential m = small_model_with(SGD({.learning_rate = 0.05}));
  auto [x, y] = small_data();
  auto recorder = std::make_shared<WeightRecorder>();
  auto reduce = std::make_shared<ReduceLROnPlateau>(
      ReduceLROnPlateauOptions{.monitor = "loss", .factor = 0.0, .patience = 1, .min_delta = 1e9});
  m->fit(x, y, {.batch_size = 8, .epochs = 4, .verbose = 0, .callbacks = {reduce, recorder}});
  ASSERT_EQ(recorder->weights.size(), 4u);
  EXPECT_FALSE(same(recorder->weights[0], recorder->weights[1]));
  EXPECT_TRUE(same(recorder->weights[1], recorder->weights[2]));
  EXPECT_TRUE(same(recorder->weights[2], recorder->weights[3]));
}

// Keras' bookkeeping, epoch by epoch, on a made-up loss sequence (patience 2, factor 0.5,
// cooldown 1, min_delta 0.01, min_lr 0.02; lr starts at 0.1). As in Keras, the epoch that ends
// a cooldown already counts towards the next wait.
//   epoch 0: 1.0    best 1.0
//   epoch 1: 0.995  not better by 0.01: wait 1
//   epoch 2: 0.99   wait 2 -> lr 0.05, cooldown 1, wait 0
//   epoch 3: 0.99   cooldown 1 -> 0, wait 0; no longer in cooldown: wait 1
//   epoch 4: 0.99   wait 2 -> lr 0.025, cooldown 1
//   epoch 5: 0.98   cooldown -> 0; better than 1.0 - 0.01: best 0.98, wait 0
//   epoch 6: 0.98   wait 1
//   epoch 7: 0.98   wait 2 -> lr max(0.0125, 0.02) = 0.02, cooldown 1
//   epoch 8: 0.98   cooldown -> 0, wait 1
//   epoch 9: 0.98   wait 2 -> lr max(0.01, 0.02) = 0.02 (Keras compares lr with float32(min_lr))
TEST(LearningRateCallbacks, ReduceLROnPlateauFollowsKerasBookkeeping) {
  Sequential m = small_model_with(SGD({.learning_rate = 0.1}));
  ReduceLROnPlateau reduce({.monitor = "val_loss",
                            .factor = 0.5,
                            .patience = 2,
                            .min_delta = 0.01,
                            .cooldown = 1,
                            .min_lr = 0.02});
  reduce.set_model(m.operator->());
  reduce.on_train_begin({});
  const std::vector<double> losses = {1.0, 0.995, 0.99, 0.99, 0.99, 0.98, 0.98, 0.98, 0.98, 0.98};
  const std::vector<double> want = {0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.025, 0.02, 0.02, 0.02};
  for (size_t e = 0; e < losses.size(); ++e) {
    reduce.on_epoch_end(int(e), {{"val_loss", losses[e]}});
    EXPECT_DOUBLE_EQ(m->compile_options().optimizer->current_learning_rate(), want[e])
        << "after epoch " << e;
  }
  expect_error(
      [&] {
        reduce.on_epoch_end(10, {{"loss", 1.0}});
      },
      {"ReduceLROnPlateau", "val_loss", "loss"});
  expect_error([] { ReduceLROnPlateau({.factor = 1.0}); }, {"factor", "1"});
}

}  // namespace
}  // namespace kiln
