// Losses against hand-computed values (the arithmetic is in the comments), stability at
// extreme logits, probability clipping, shape/dtype errors, and gradients against central
// finite differences in float64.
#include "kiln/keras/training/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/ops.h"
#include "tests/autodiff/gradcheck.h"
#include "tests/support/expect_error.h"

namespace kiln {
namespace {

double value(const Tensor& t) {
  EXPECT_EQ(t.rank(), 0) << t.to_string();
  return t.item<double>();
}

using test::expect_error;

const double kLogEps = -std::log(1e-7);  // 16.11809565095832

// ---------------------------------------------------------------- regression losses

TEST(Losses, MeanSquaredError) {
  // diff^2 = [[1, 0], [4, 4]] -> per-sample means [0.5, 4] -> batch mean 2.25.
  Tensor y_true = tensor({0.f, 1.f, 2.f, 3.f}, {2, 2});
  Tensor y_pred = tensor({1.f, 1.f, 0.f, 5.f}, {2, 2});
  Tensor loss = Loss("mse")(y_true, y_pred);
  EXPECT_EQ(loss.dtype(), DType::f32);
  EXPECT_FLOAT_EQ(value(loss), 2.25f);
  EXPECT_FLOAT_EQ(value(losses::mean_squared_error()(y_true, y_pred)), 2.25f);
  EXPECT_EQ(Loss("mse").name(), "mean_squared_error");
}

TEST(Losses, MeanAbsoluteError) {
  // |diff| = [[1, 0], [2, 2]] -> per-sample means [0.5, 2] -> batch mean 1.25.
  Tensor y_true = tensor({0.0, 1.0, 2.0, 3.0}, {2, 2});
  Tensor y_pred = tensor({1.0, 1.0, 0.0, 5.0}, {2, 2});
  EXPECT_DOUBLE_EQ(value(Loss("mae")(y_true, y_pred)), 1.25);
  EXPECT_EQ(Loss("mean_absolute_error").name(), "mean_absolute_error");
}

TEST(Losses, RankDifferenceOfATrailingOneIsAligned) {
  // y_true (3,) against y_pred (3, 1): Keras expands y_true. diff^2 = [0, 1, 4] -> 5/3.
  Tensor y_true = tensor({1.0, 2.0, 3.0});
  Tensor y_pred = tensor({1.0, 1.0, 1.0}, {3, 1});
  EXPECT_DOUBLE_EQ(value(Loss("mse")(y_true, y_pred)), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(value(Loss("mse")(y_pred, y_true)), 5.0 / 3.0);
  // (2, 3, 1) against (2, 3): the longer one is squeezed.
  Tensor a = zeros({2, 3, 1}, DType::f64), b = ones({2, 3}, DType::f64);
  EXPECT_DOUBLE_EQ(value(Loss("mse")(a, b)), 1.0);
}

TEST(Losses, IntegerTargetsAreCastToThePredictionDtype) {
  // y_true int32 [1, 3] vs y_pred [0, 0]: (1 + 9) / 2 = 5.
  EXPECT_DOUBLE_EQ(value(Loss("mse")(tensor({1, 3}), tensor({0.0, 0.0}))), 5.0);
}

// ---------------------------------------------------------------- binary crossentropy

TEST(Losses, BinaryCrossentropyProbabilities) {
  // y = [[1, 0], [0, 1]], p = [[0.9, 0.2], [0.3, 0.6]]:
  // terms -log 0.9, -log 0.8, -log 0.7, -log 0.6 = 0.10536, 0.22314, 0.35667, 0.51083;
  // per-sample means 0.16425, 0.43375; batch mean 0.29900116.
  Tensor y = tensor({1.0, 0.0, 0.0, 1.0}, {2, 2});
  Tensor p = tensor({0.9, 0.2, 0.3, 0.6}, {2, 2});
  double expected = -(std::log(0.9) + std::log(0.8) + std::log(0.7) + std::log(0.6)) / 4;
  EXPECT_NEAR(expected, 0.29900116, 1e-8);
  EXPECT_NEAR(value(Loss("binary_crossentropy")(y, p)), expected, 1e-12);
}

TEST(Losses, BinaryCrossentropyClipsProbabilities) {
  // p = 1 with y = 0 and p = 0 with y = 1: both clipped, -log(1e-7) = 16.1181 each.
  Tensor y = tensor({0.0, 1.0}, {1, 2});
  Tensor p = tensor({1.0, 0.0}, {1, 2});
  EXPECT_NEAR(value(losses::binary_crossentropy()(y, p)), kLogEps, 1e-6);
  // float32: 1 - 1e-7 rounds to 1 - 2^-23 (0.99999988), so -log(1 - q) = 15.9424; mean with
  // -log(1e-7) is 16.0302. Finite either way.
  double f32 = value(losses::binary_crossentropy()(cast(y, DType::f32), cast(p, DType::f32)));
  EXPECT_NEAR(f32, (kLogEps - std::log(0x1.0p-23)) / 2, 1e-3);
}

TEST(Losses, BinaryCrossentropyLogits) {
  // softplus(x) - x y for x = [[2, -1], [0, 3]], y = [[1, 0], [0, 1]]:
  // log(1+e^-2) = 0.126928, log(1+e^-1) = 0.313262, log 2 = 0.693147, log(1+e^-3) = 0.048587;
  // mean 0.295481.
  Tensor y = tensor({1.0, 0.0, 0.0, 1.0}, {2, 2});
  Tensor x = tensor({2.0, -1.0, 0.0, 3.0}, {2, 2});
  double expected = (std::log1p(std::exp(-2.0)) + std::log1p(std::exp(-1.0)) + std::log(2.0) +
                     std::log1p(std::exp(-3.0))) /
                    4;
  EXPECT_NEAR(expected, 0.295481058, 1e-8);
  EXPECT_NEAR(value(losses::binary_crossentropy(true)(y, x)), expected, 1e-12);
  // Same value as the probability form on sigmoid(x) (no clipping in play here).
  EXPECT_NEAR(value(losses::binary_crossentropy(false)(y, sigmoid(x))), expected, 1e-12);
}

TEST(Losses, BinaryCrossentropyExtremeLogitsStayFinite) {
  for (DType dt : {DType::f32, DType::f64}) {
    // Right answers at +-100: log1p(e^-100) ~ 3.7e-44 ~ 0.
    Tensor x = tensor({100.0, -100.0}, {1, 2}, dt);
    EXPECT_NEAR(value(losses::binary_crossentropy(true)(tensor({1.0, 0.0}, {1, 2}, dt), x)), 0,
                1e-30);
    // Wrong answers: 100 each (max(x, 0) - x y = 100 for x = 100, y = 0 and x = -100, y = 1).
    EXPECT_NEAR(value(losses::binary_crossentropy(true)(tensor({0.0, 1.0}, {1, 2}, dt), x)), 100,
                1e-4);
  }
}

// ---------------------------------------------------------------- categorical crossentropy

TEST(Losses, CategoricalCrossentropyProbabilities) {
  // y = [[0, 1, 0], [0, 0, 1]], p = [[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]:
  // -log 0.5 = 0.693147, -log 0.8 = 0.223144 -> mean 0.458145.
  Tensor y = tensor({0.0, 1.0, 0.0, 0.0, 0.0, 1.0}, {2, 3});
  Tensor p = tensor({0.2, 0.5, 0.3, 0.1, 0.1, 0.8}, {2, 3});
  double expected = -(std::log(0.5) + std::log(0.8)) / 2;
  EXPECT_NEAR(expected, 0.458145, 1e-6);
  EXPECT_NEAR(value(Loss("categorical_crossentropy")(y, p)), expected, 1e-12);
  // Keras normalizes p by its sum first: [[2, 5, 3], [1, 1, 8]] gives the same loss.
  Tensor unnormalized = tensor({2.0, 5.0, 3.0, 1.0, 1.0, 8.0}, {2, 3});
  EXPECT_NEAR(value(Loss("categorical_crossentropy")(y, unnormalized)), expected, 1e-12);
}

TEST(Losses, CategoricalCrossentropyClipsProbabilities) {
  // p[true class] = 0 -> clipped to 1e-7 -> -log(1e-7).
  Tensor y = tensor({0.0, 1.0, 0.0}, {1, 3});
  Tensor p = tensor({1.0, 0.0, 0.0}, {1, 3});
  EXPECT_NEAR(value(losses::categorical_crossentropy()(y, p)), kLogEps, 1e-6);
}

TEST(Losses, CategoricalCrossentropyLogits) {
  // Row 1: x = [1, 2, 3], class 2: -(3 - log(e + e^2 + e^3)) = 0.407606.
  // Row 2: x = [0, 0, 0], class 0: log 3 = 1.098612. Mean 0.753109.
  Tensor y = tensor({0.0, 0.0, 1.0, 1.0, 0.0, 0.0}, {2, 3});
  Tensor x = tensor({1.0, 2.0, 3.0, 0.0, 0.0, 0.0}, {2, 3});
  double row1 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
  double expected = (row1 + std::log(3.0)) / 2;
  EXPECT_NEAR(expected, 0.75310913, 1e-7);
  EXPECT_NEAR(value(losses::categorical_crossentropy(true)(y, x)), expected, 1e-12);
}

TEST(Losses, CategoricalCrossentropyExtremeLogitsStayFinite) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = tensor({100.0, -100.0, 0.0}, {1, 3}, dt);
    // Class 1: -(-100 - logsumexp) = 100 + (100 + log(1 + e^-100 + e^-200)) = 200.
    EXPECT_NEAR(
        value(losses::categorical_crossentropy(true)(tensor({0.0, 1.0, 0.0}, {1, 3}, dt), x)), 200,
        1e-3);
    // Class 0: log(1 + e^-100 + e^-200) ~ 0.
    EXPECT_NEAR(
        value(losses::categorical_crossentropy(true)(tensor({1.0, 0.0, 0.0}, {1, 3}, dt), x)), 0,
        1e-6);
  }
}

// ---------------------------------------------------------------- sparse categorical

TEST(Losses, SparseCategoricalCrossentropyLogits) {
  // The logits example above with labels [2, 0]: 0.753109.
  Tensor x = tensor({1.0, 2.0, 3.0, 0.0, 0.0, 0.0}, {2, 3});
  double expected =
      (std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3 + std::log(3.0)) / 2;
  Loss loss = losses::sparse_categorical_crossentropy(true);
  EXPECT_NEAR(value(loss(tensor({2, 0}), x)), expected, 1e-12);                   // int32
  EXPECT_NEAR(value(loss(tensor<int64_t>({2, 0}), x)), expected, 1e-12);          // int64
  EXPECT_NEAR(value(loss(tensor<int64_t>({2, 0}, {2, 1}), x)), expected, 1e-12);  // (N, 1)
  EXPECT_NEAR(value(loss(tensor({2.0, 0.0}), x)), expected, 1e-12);               // float ids
}

TEST(Losses, SparseCategoricalCrossentropyProbabilities) {
  // Labels [1, 2] on p = [[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]: -(log 0.5 + log 0.8) / 2.
  Tensor p = tensor({0.2, 0.5, 0.3, 0.1, 0.1, 0.8}, {2, 3});
  EXPECT_NEAR(value(Loss("sparse_categorical_crossentropy")(tensor({1, 2}), p)),
              -(std::log(0.5) + std::log(0.8)) / 2, 1e-12);
  // Clipping: p[label] = 0 -> -log(1e-7).
  EXPECT_NEAR(
      value(Loss("sparse_categorical_crossentropy")(tensor({1}), tensor({1.0, 0.0}, {1, 2}))),
      kLogEps, 1e-6);
}

TEST(Losses, SparseCategoricalCrossentropyExtremeLogits) {
  // Logits [100, -100, 0], label 1: 200; float32 stays finite.
  Tensor x = tensor({100.f, -100.f, 0.f}, {1, 3});
  EXPECT_NEAR(value(losses::sparse_categorical_crossentropy(true)(tensor({1}), x)), 200, 1e-3);
}

TEST(Losses, SparseCategoricalCrossentropyRank3) {
  // (2, 1, 2) logits of zeros with labels of shape (2, 1): log 2 for every position.
  Tensor x = zeros({2, 1, 2}, DType::f64);
  EXPECT_NEAR(value(losses::sparse_categorical_crossentropy(true)(tensor({0, 1}, {2, 1}), x)),
              std::log(2.0), 1e-12);
}

// ---------------------------------------------------------------- errors

TEST(Losses, ErrorsNameTheLossAndBothShapes) {
  Tensor a = zeros({2, 3}), b = zeros({2, 4});
  expect_error([&] { Loss("mse")(a, b); }, {"mean_squared_error", "(2, 3)", "(2, 4)"});
  expect_error([&] { Loss("mae")(a, b); }, {"mean_absolute_error", "(2, 3)", "(2, 4)"});
  expect_error([&] { losses::binary_crossentropy(true)(a, b); },
               {"binary_crossentropy", "(2, 3)", "(2, 4)"});
  expect_error([&] { losses::categorical_crossentropy()(a, b); },
               {"categorical_crossentropy", "(2, 3)", "(2, 4)"});
  expect_error(
      [&] {
        losses::sparse_categorical_crossentropy()(tensor({0, 1, 2}), a);
      },
      {"sparse_categorical_crossentropy", "(3,)", "(2, 3)"});
  // A rank difference that is not a trailing 1.
  expect_error([&] { Loss("mse")(zeros({2}), zeros({2, 3})); }, {"(2,)", "(2, 3)"});
}

TEST(Losses, DtypeAndLabelErrors) {
  expect_error([&] { Loss("mse")(zeros({2}), zeros({2}, DType::i32)); },
               {"mean_squared_error", "int32"});
  expect_error(
      [&] {
        losses::sparse_categorical_crossentropy(true)(tensor({0, 3}), zeros({2, 3}));
      },
      {"sparse_categorical_crossentropy", "3", "[0, 3)"});
  expect_error(
      [&] {
        losses::sparse_categorical_crossentropy(true)(tensor({-1, 0}), zeros({2, 3}));
      },
      {"-1"});
  expect_error([&] { Loss("hinge"); }, {"hinge", "mean_squared_error", "sparse_categorical"});
  expect_error([&] { Loss()(zeros({1}), zeros({1})); }, {"empty"});
  expect_error([&] { Loss("mse")(Tensor(), zeros({1})); }, {"mean_squared_error", "undefined"});
}

// ---------------------------------------------------------------- gradients

using gradcheck::uniform;

TEST(LossGradients, RegressionLosses) {
  Tensor y_true = uniform({3, 4}, 1);
  EXPECT_GRADIENTS([&](const std::vector<Tensor>& in) { return Loss("mse")(y_true, in[0]); },
                   {uniform({3, 4}, 2)});
  // MAE: keep |diff| away from the kink at 0.
  Tensor y_pred = y_true + gradcheck::away_from_zero({3, 4}, 3);
  EXPECT_GRADIENTS([&](const std::vector<Tensor>& in) { return Loss("mae")(y_true, in[0]); },
                   {y_pred});
}

TEST(LossGradients, BinaryCrossentropy) {
  Tensor y = tensor({1.0, 0.0, 0.0, 1.0, 1.0, 0.0}, {3, 2});
  EXPECT_GRADIENTS(
      [&](const std::vector<Tensor>& in) { return losses::binary_crossentropy()(y, in[0]); },
      {uniform({3, 2}, 4, 0.05, 0.95)});
  EXPECT_GRADIENTS(
      [&](const std::vector<Tensor>& in) { return losses::binary_crossentropy(true)(y, in[0]); },
      {uniform({3, 2}, 5, -4, 4)});
}

TEST(LossGradients, BinaryCrossentropyLogitsGradientIsSigmoidMinusLabel) {
  // d/dx mean(softplus(x) - x y) = (sigmoid(x) - y) / N, also at x = 0 and x = +-100.
  Tensor y = tensor({1.0, 0.0, 0.0, 1.0}, {1, 4});
  Tensor x = tensor({0.0, 0.0, 100.0, -100.0}, {1, 4});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(losses::binary_crossentropy(true)(y, x), x);
  std::vector<double> expected = {-0.5 / 4, 0.5 / 4, 1.0 / 4, -1.0 / 4};
  std::vector<double> got = g.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-12) << i;
}

TEST(LossGradients, CategoricalCrossentropy) {
  Tensor y = tensor({0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0}, {3, 3});
  EXPECT_GRADIENTS(
      [&](const std::vector<Tensor>& in) { return losses::categorical_crossentropy()(y, in[0]); },
      {uniform({3, 3}, 6, 0.1, 1.0)});
  EXPECT_GRADIENTS(
      [&](const std::vector<Tensor>& in) {
        return losses::categorical_crossentropy(true)(y, in[0]);
      },
      {uniform({3, 3}, 7, -3, 3)});
}

TEST(LossGradients, SparseCategoricalCrossentropy) {
  Tensor labels = tensor({1, 2, 0});
  EXPECT_GRADIENTS(
      [&](const std::vector<Tensor>& in) {
        return losses::sparse_categorical_crossentropy()(labels, in[0]);
      },
      {uniform({3, 3}, 8, 0.1, 1.0)});
  EXPECT_GRADIENTS(
      [&](const std::vector<Tensor>& in) {
        return losses::sparse_categorical_crossentropy(true)(labels, in[0]);
      },
      {uniform({3, 3}, 9, -3, 3)});
}

TEST(LossGradients, SparseLogitsGradientIsSoftmaxMinusOneHot) {
  // x = [[0, 0]], label 1: softmax = [0.5, 0.5] -> gradient [0.5, -0.5] (N = 1).
  Tensor x = zeros({1, 2}, DType::f64);
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(losses::sparse_categorical_crossentropy(true)(tensor({1}), x), x);
  EXPECT_NEAR(g.to_vector<double>()[0], 0.5, 1e-12);
  EXPECT_NEAR(g.to_vector<double>()[1], -0.5, 1e-12);
}

}  // namespace
}  // namespace kiln
