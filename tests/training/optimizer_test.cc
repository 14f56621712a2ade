// Optimizers: the first steps of every update rule against numbers worked out by hand (in the
// comments), slot variables (names, count, shapes), iterations, learning-rate schedules and
// the errors of apply_gradients and the by-name constructor.
#include "kiln/keras/training/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/training/loss.h"
#include "tests/support/expect_error.h"

namespace kiln {
namespace {

using test::expect_error;

// A float64 variable holding one number.
Variable scalar_var(const std::string& name, double v) {
  return Variable(name, tensor({v}, Shape{1}, DType::f64));
}
Tensor g1(double v) { return tensor({v}, Shape{1}, DType::f64); }
double val(const Variable& v) { return v.value().to_vector<double>()[0]; }

// Runs apply_gradients with gradient g[k] at step k and checks w after each step.
void expect_steps(Optimizer opt, double w0, const std::vector<double>& g,
                  const std::vector<double>& w_expected, double tol = 1e-12) {
  Variable w = scalar_var("w", w0);
  for (size_t k = 0; k < g.size(); ++k) {
    opt->apply_gradients({g1(g[k])}, {w});
    EXPECT_NEAR(val(w), w_expected[k], tol) << "after step " << k + 1;
    EXPECT_EQ(opt->iterations(), int64_t(k + 1));
  }
}

// ---------------------------------------------------------------- SGD

TEST(SGD, PlainStep) {
  // lr 0.1, w = [1, 2], g = [0.5, -1]: w -= 0.1 g -> [0.95, 2.1] -> [0.9, 2.2].
  Optimizer opt = SGD({.learning_rate = 0.1});
  Variable w("w", tensor({1.0, 2.0}));
  opt->apply_gradients({tensor({0.5, -1.0})}, {w});
  EXPECT_EQ(w.value().to_vector<double>(), (std::vector<double>{0.95, 2.1}));
  opt->apply_gradients({tensor({0.5, -1.0})}, {w});
  EXPECT_NEAR(w.value().to_vector<double>()[0], 0.9, 1e-15);
  EXPECT_NEAR(w.value().to_vector<double>()[1], 2.2, 1e-15);
  EXPECT_EQ(opt->variables().size(), 2u);  // iterations, learning_rate: no slot without momentum
}

TEST(SGD, Momentum) {
  // lr 0.1, m 0.9, w = 1, g = 1 each step:
  //   v = -0.1,   w = 0.9
  //   v = 0.9(-0.1) - 0.1 = -0.19,   w = 0.71
  //   v = 0.9(-0.19) - 0.1 = -0.271, w = 0.439
  expect_steps(SGD({.learning_rate = 0.1, .momentum = 0.9}), 1, {1, 1, 1}, {0.9, 0.71, 0.439});
}

TEST(SGD, Nesterov) {
  // Keras 3: v = m v - lr g; w += m v - lr g (new v). lr 0.1, m 0.9, w = 1, g = 1:
  //   v = -0.1,   w += 0.9(-0.1) - 0.1 = -0.19    -> 0.81
  //   v = -0.19,  w += 0.9(-0.19) - 0.1 = -0.271  -> 0.539
  //   v = -0.271, w += 0.9(-0.271) - 0.1 = -0.3439 -> 0.1951
  expect_steps(SGD({.learning_rate = 0.1, .momentum = 0.9, .nesterov = true}), 1, {1, 1, 1},
               {0.81, 0.539, 0.1951});
}

// ---------------------------------------------------------------- Adam, AdamW

TEST(Adam, FirstSteps) {
  // lr 0.1, b1 0.9, b2 0.999, eps 1e-7, w = 1, g = 0.5 then -0.25.
  // t=1: m = 0.1 * 0.5 = 0.05; v = 0.001 * 0.25 = 0.00025;
  //      alpha = 0.1 sqrt(1 - 0.999) / (1 - 0.9) = 0.0316227766;
  //      w = 1 - 0.0316227766 * 0.05 / (sqrt(0.00025) + 1e-7) = 1 - 0.0999993675 = 0.9000006325
  // t=2: m = 0.05 + (-0.25 - 0.05) 0.1 = 0.02; v = 0.00025 + (0.0625 - 0.00025) 0.001 = 0.00031225
  //      alpha = 0.1 sqrt(1 - 0.999^2) / (1 - 0.9^2) = 0.1 * 0.0447101778 / 0.19 = 0.0235316725
  //      w -= 0.0235316725 * 0.02 / (0.0176705970 + 1e-7) = 0.0266335533 -> 0.8733670792
  expect_steps(Adam({.learning_rate = 0.1}), 1, {0.5, -0.25},
               {0.9000006324515321, 0.8733670792079219});
}

TEST(AdamW, DecayThenAdam) {
  // As Adam above with weight_decay 0.004: first w -= w * 0.004 * 0.1.
  // t=1: 1 - 0.0004 = 0.9996, then - 0.0999993675 -> 0.8996006325
  // t=2: 0.8996006325 (1 - 0.0004) = 0.8992407923, then - 0.0266335533 -> 0.8726072390
  expect_steps(AdamW({.learning_rate = 0.1}), 1, {0.5, -0.25},
               {0.8996006324515321, 0.8726072389549413});
}

TEST(AdamW, ZeroDecayIsAdam) {
  expect_steps(AdamW({.learning_rate = 0.1, .weight_decay = 0}), 1, {0.5, -0.25},
               {0.9000006324515321, 0.8733670792079219});
}

// ---------------------------------------------------------------- RMSprop

TEST(RMSprop, KerasDocstringExample) {
  // Keras' example: lr 0.1, w = 10, loss w^2 / 2 so g = w.
  // 1: v = 0.1 * 100 = 10; inc = 0.1 * 10 / sqrt(10 + 1e-7) = 0.3162277644 -> 9.6837722356
  // 2: g = 9.6837722356; v = 0.9 * 10 + 0.1 * 93.7754... = 18.3775444710;
  //    inc = 0.96837722 / sqrt(18.3775445) = 0.2258919861 -> 9.4578802495
  Optimizer opt = RMSprop({.learning_rate = 0.1});
  Variable w = scalar_var("w", 10);
  for (double expected : {9.6837722355643017, 9.4578802494811196}) {
    GradientTape tape;
    Tensor loss = sum(square(w.read())) / 2.0;
    opt->apply_gradients(tape.gradient(loss, std::vector<Variable>{w}), {w});
    EXPECT_NEAR(val(w), expected, 1e-12);
  }
}

TEST(RMSprop, CenteredWithMomentum) {
  // lr 0.01, rho 0.9, momentum 0.5, centered, w = 1, g = 0.5 then -0.25.
  // 1: v = 0.1 * 0.25 = 0.025; a = 0.1 * 0.5 = 0.05; denom = 0.025 - 0.0025 + 1e-7 = 0.0225001
  //    inc = 0.005 / sqrt(0.0225001) = 0.0333332593; mom = inc; w = 0.9666667407
  // 2: v = 0.0225 + 0.00625 = 0.02875; a = 0.045 - 0.025 = 0.02;
  //    denom = 0.02875 - 0.0004 + 1e-7 = 0.0283501; inc = -0.0025 / 0.1683749 = -0.0148478206
  //    mom = 0.5 * 0.0333332593 - 0.0148478206 = 0.0018188090; w = 0.9648479317
  Optimizer opt = RMSprop({.learning_rate = 0.01, .momentum = 0.5, .centered = true});
  expect_steps(opt, 1, {0.5, -0.25}, {0.96666674074049386, 0.96484793169704386});
  std::vector<Variable> vars = opt->variables();
  ASSERT_EQ(vars.size(), 5u);
  EXPECT_EQ(vars[2].name(), "rmsprop/w_velocity");
  EXPECT_EQ(vars[3].name(), "rmsprop/w_momentum");
  EXPECT_EQ(vars[4].name(), "rmsprop/w_average_gradient");
  EXPECT_NEAR(val(vars[2]), 0.02875, 1e-15);
  EXPECT_NEAR(val(vars[3]), 0.0018188090434499565, 1e-15);
  EXPECT_NEAR(val(vars[4]), 0.02, 1e-15);
}

// ---------------------------------------------------------------- slots and iterations

TEST(Optimizer, SlotsAreNamedCountedAndShaped) {
  Optimizer opt = Adam();
  Variable kernel("dense_1/kernel", ones({2, 3}));
  Variable bias("dense_1/bias", zeros({3}));
  // As Keras 3: iterations, learning_rate, then the slots.
  ASSERT_EQ(opt->variables().size(), 2u);
  EXPECT_EQ(opt->variables()[0].name(), "adam/iterations");
  EXPECT_EQ(opt->variables()[0].dtype(), DType::i64);
  EXPECT_EQ(opt->variables()[1].name(), "adam/learning_rate");
  EXPECT_EQ(opt->variables()[1].dtype(), DType::f64);
  EXPECT_FALSE(opt->variables()[1].trainable());
  opt->apply_gradients({ones({2, 3}), ones({3})}, {kernel, bias});
  std::vector<Variable> vars = opt->variables();
  ASSERT_EQ(vars.size(), 6u);
  EXPECT_EQ(vars[2].name(), "adam/dense_1_kernel_momentum");
  EXPECT_EQ(vars[3].name(), "adam/dense_1_kernel_velocity");
  EXPECT_EQ(vars[4].name(), "adam/dense_1_bias_momentum");
  EXPECT_EQ(vars[5].name(), "adam/dense_1_bias_velocity");
  for (size_t i = 2; i < vars.size(); ++i) {
    EXPECT_FALSE(vars[i].trainable());
    EXPECT_EQ(vars[i].dtype(), DType::f32);
  }
  EXPECT_EQ(vars[2].shape(), (Shape{2, 3}));
  EXPECT_EQ(vars[5].shape(), (Shape{3}));
  // First moment after one step with g = 1: 0.1 everywhere.
  for (float m : vars[2].value().to_vector<float>()) EXPECT_FLOAT_EQ(m, 0.1f);
  // A second step reuses the slots.
  opt->apply_gradients({ones({2, 3}), ones({3})}, {kernel, bias});
  EXPECT_EQ(opt->variables().size(), 6u);
  EXPECT_EQ(opt->iterations(), 2);
  EXPECT_EQ(opt->variables()[0].value().item<int64_t>(), 2);
}

TEST(Optimizer, UndefinedGradientsAreSkipped) {
  Optimizer opt = SGD({.learning_rate = 0.1, .momentum = 0.9});
  Variable a = scalar_var("a", 1), b = scalar_var("b", 1);
  opt->apply_gradients({g1(1), Tensor()}, {a, b});
  EXPECT_NEAR(val(a), 0.9, 1e-15);
  EXPECT_EQ(val(b), 1.0);
  ASSERT_EQ(opt->variables().size(), 3u);  // iterations, learning_rate, a's momentum only
  EXPECT_EQ(opt->variables()[2].name(), "SGD/a_momentum");
  EXPECT_EQ(opt->iterations(), 1);
}

TEST(Optimizer, ByName) {
  EXPECT_EQ(Optimizer("sgd")->name(), "SGD");
  EXPECT_EQ(Optimizer("Adam")->name(), "adam");
  EXPECT_EQ(Optimizer(std::string("adamw"))->name(), "adamw");
  EXPECT_EQ(Optimizer("rmsprop")->name(), "rmsprop");
  // Keras' defaults.
  EXPECT_DOUBLE_EQ(Optimizer("sgd")->current_learning_rate(), 0.01);
  EXPECT_DOUBLE_EQ(Optimizer("adam")->current_learning_rate(), 0.001);
  EXPECT_DOUBLE_EQ(Optimizer("adamw")->current_learning_rate(), 0.001);
  EXPECT_DOUBLE_EQ(Optimizer("rmsprop")->current_learning_rate(), 0.001);
  expect_error([] { Optimizer("adagrad"); }, {"adagrad", "sgd", "adam", "adamw", "rmsprop"});
}

// ---------------------------------------------------------------- learning rates

TEST(Schedules, ExponentialDecay) {
  // 0.1 * 0.5^(step / 10)
  LearningRateSchedule s = schedules::exponential_decay(0.1, 10, 0.5);
  EXPECT_DOUBLE_EQ(s(0), 0.1);
  EXPECT_NEAR(s(5), 0.1 * std::sqrt(0.5), 1e-15);  // 0.0707106781
  EXPECT_DOUBLE_EQ(s(10), 0.05);
  EXPECT_NEAR(s(25), 0.1 * std::pow(0.5, 2.5), 1e-15);  // 0.0176776695
  // staircase: floor(step / 10) -> 0.1, 0.1, 0.05, 0.025.
  LearningRateSchedule st = schedules::exponential_decay(0.1, 10, 0.5, true);
  EXPECT_DOUBLE_EQ(st(5), 0.1);
  EXPECT_DOUBLE_EQ(st(9), 0.1);
  EXPECT_DOUBLE_EQ(st(10), 0.05);
  EXPECT_DOUBLE_EQ(st(25), 0.025);
  expect_error([] { schedules::exponential_decay(0.1, 0, 0.5); }, {"decay_steps", "0"});
}

TEST(Schedules, OptimizerEvaluatesTheScheduleAtTheCurrentIteration) {
  // lr(step) = 0.1 * 0.5^step; SGD with g = 1: w = 1 - 0.1 = 0.9, then 0.9 - 0.05 = 0.85.
  Optimizer opt = SGD();
  opt->set_schedule(schedules::exponential_decay(0.1, 1, 0.5));
  EXPECT_DOUBLE_EQ(opt->current_learning_rate(), 0.1);
  expect_steps(opt, 1, {1, 1}, {0.9, 0.85});
  EXPECT_DOUBLE_EQ(opt->current_learning_rate(), 0.025);
  expect_error([&] { opt->set_learning_rate(0.5); }, {"schedule"});
  opt->set_schedule(nullptr);
  opt->set_learning_rate(0.5);
  EXPECT_DOUBLE_EQ(opt->current_learning_rate(), 0.5);
}

// ---------------------------------------------------------------- errors

TEST(Optimizer, ApplyGradientsErrors) {
  Optimizer opt = Adam();
  Variable w("w", zeros({2, 3}));
  expect_error(
      [&] {
        opt->apply_gradients({zeros({3, 2})}, {w});
      },
      {"adam", "\"w\"", "(3, 2)", "(2, 3)"});
  expect_error(
      [&] {
        opt->apply_gradients({zeros({2, 3}, DType::f64)}, {w});
      },
      {"float64", "float32"});
  expect_error(
      [&] {
        opt->apply_gradients({zeros({2, 3}), zeros({2, 3})}, {w});
      },
      {"2 gradients", "1 variables"});
  expect_error([&] { opt->apply_gradients({Tensor()}, {w}); }, {"no gradients"});
  expect_error([&] { opt->apply_gradients({zeros({2, 3})}, {Variable()}); }, {"empty"});
  // Nothing changed: no slots, no iteration.
  EXPECT_EQ(opt->iterations(), 0);
  EXPECT_EQ(opt->variables().size(), 2u);
  expect_error([] { SGD({.momentum = 1.5}); }, {"momentum", "1.5"});
  expect_error([] { Optimizer()->iterations(); }, {"empty"});
}

TEST(Optimizer, TrainsALinearModelThroughTheTape) {
  // Fit y = 2x with MSE and SGD: the loss falls and w approaches 2.
  Variable w("w", zeros({1, 1}, DType::f64));
  Tensor x = tensor({1.0, 2.0, 3.0}, {3, 1}), y = x * 2.0;
  Optimizer opt = SGD({.learning_rate = 0.05});
  Loss mse("mse");
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    GradientTape tape;
    Tensor loss = mse(y, matmul(x, w.read()));
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    opt->apply_gradients(tape.gradient(loss, std::vector<Variable>{w}), {w});
  }
  EXPECT_LT(last, first * 1e-6);
  EXPECT_NEAR(w.value().item<double>(), 2.0, 1e-3);
}

}  // namespace
}  // namespace kiln
