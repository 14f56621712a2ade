// BatchNormalization and LayerNormalization: weights and tracking, training vs inference,
// moving statistics, forward against plain loops, gradients, config, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::HasSubstr;

// Per-channel biased mean and variance of a (rows, channels) row-major array.
void moments(const std::vector<double>& x, int64_t rows, int64_t ch, std::vector<double>* mean,
             std::vector<double>* var) {
  mean->assign(size_t(ch), 0);
  var->assign(size_t(ch), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ch; ++c) (*mean)[size_t(c)] += x[size_t(r * ch + c)] / double(rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ch; ++c) {
      double d = x[size_t(r * ch + c)] - (*mean)[size_t(c)];
      (*var)[size_t(c)] += d * d / double(rows);
    }
}

std::vector<double> normalize(const std::vector<double>& x, int64_t ch,
                              const std::vector<double>& mean, const std::vector<double>& var,
                              const std::vector<double>& gamma, const std::vector<double>& beta,
                              double eps) {
  std::vector<double> y;
  for (size_t i = 0; i < x.size(); ++i) {
    size_t c = i % size_t(ch);
    y.push_back((x[i] - mean[c]) / std::sqrt(var[c] + eps) * gamma[c] + beta[c]);
  }
  return y;
}

BatchNormalization built_bn(int64_t ch) {
  BatchNormalization bn({.dtype = DType::f64});
  bn(zeros({2, ch}, DType::f64));
  // Non-trivial gamma, beta and moving statistics.
  bn->set_weights({gradcheck::uniform({ch}, 41, 0.5, 1.5), gradcheck::uniform({ch}, 42),
                   gradcheck::uniform({ch}, 43), gradcheck::uniform({ch}, 44, 0.5, 2)});
  return bn;
}

TEST(BatchNormalizationTest, WeightsAndTracking) {
  clear_session();
  BatchNormalization bn;
  EXPECT_FALSE(bn->built());
  bn(ones({4, 3}));
  ASSERT_EQ(bn->weights().size(), 4u);
  EXPECT_EQ(bn->weights()[0].name(), "batch_normalization/gamma");
  EXPECT_EQ(bn->weights()[1].name(), "batch_normalization/beta");
  EXPECT_EQ(bn->weights()[2].name(), "batch_normalization/moving_mean");
  EXPECT_EQ(bn->weights()[3].name(), "batch_normalization/moving_variance");
  for (const Variable& v : bn->weights()) EXPECT_EQ(v.shape(), (Shape{3}));
  EXPECT_EQ(bn->trainable_weights().size(), 2u);
  EXPECT_EQ(bn->non_trainable_weights().size(), 2u);
  EXPECT_EQ(bn->non_trainable_weights()[0], bn->moving_mean);
  EXPECT_EQ(bn->moving_variance.value().to_vector<double>(), std::vector<double>(3, 1.0));
  bn->set_trainable(false);
  EXPECT_EQ(bn->trainable_weights().size(), 0u);
  EXPECT_EQ(bn->non_trainable_weights().size(), 4u);
  BatchNormalization plain({.center = false, .scale = false});
  plain(ones({2, 5}));
  EXPECT_EQ(plain->weights().size(), 2u);
  EXPECT_EQ(plain->trainable_weights().size(), 0u);
}

TEST(BatchNormalizationTest, TrainingUsesBatchStatisticsAndUpdatesMovingOnes) {
  BatchNormalization bn = built_bn(3);
  Tensor x = gradcheck::uniform({6, 3}, 45, -2, 3);
  std::vector<double> xv = x.to_vector<double>(), m, v;
  moments(xv, 6, 3, &m, &v);
  std::vector<double> gamma = bn->gamma.value().to_vector<double>(),
                      beta = bn->beta.value().to_vector<double>(),
                      mm = bn->moving_mean.value().to_vector<double>(),
                      mv = bn->moving_variance.value().to_vector<double>();
  test::expect_tensor(bn(x, /*training=*/true), DType::f64, {6, 3},
                      normalize(xv, 3, m, v, gamma, beta, 1e-3), 1e-12, 1e-13);
  std::vector<double> want_mm, want_mv;
  for (size_t c = 0; c < 3; ++c) {
    want_mm.push_back(mm[c] * 0.99 + m[c] * 0.01);
    want_mv.push_back(mv[c] * 0.99 + v[c] * 0.01);
  }
  test::expect_tensor(bn->moving_mean.value(), DType::f64, {3}, want_mm, 1e-13, 1e-15);
  test::expect_tensor(bn->moving_variance.value(), DType::f64, {3}, want_mv, 1e-13, 1e-15);
}

TEST(BatchNormalizationTest, InferenceUsesMovingStatisticsWithoutUpdates) {
  BatchNormalization bn = built_bn(3);
  Tensor x = gradcheck::uniform({5, 3}, 46);
  std::vector<double> mm = bn->moving_mean.value().to_vector<double>(),
                      mv = bn->moving_variance.value().to_vector<double>();
  test::expect_tensor(
      bn(x), DType::f64, {5, 3},
      normalize(x.to_vector<double>(), 3, mm, mv, bn->gamma.value().to_vector<double>(),
                bn->beta.value().to_vector<double>(), 1e-3),
      1e-12, 1e-13);
  EXPECT_EQ(bn->moving_mean.value().to_vector<double>(), mm);
  EXPECT_EQ(bn->moving_variance.value().to_vector<double>(), mv);
  // Symbolic training calls propagate the shape and update nothing.
  Tensor y = bn(test::symbolic_input({-1, 3}, DType::f64), /*training=*/true);
  EXPECT_EQ(y.shape(), (Shape{-1, 3}));
  EXPECT_EQ(bn->moving_mean.value().to_vector<double>(), mm);
  // A frozen layer runs in inference mode even with training=true (Keras 3).
  bn->set_trainable(false);
  Tensor frozen = bn(x, /*training=*/true);
  EXPECT_EQ(frozen.to_vector<double>(), bn(x).to_vector<double>());
  EXPECT_EQ(bn->moving_mean.value().to_vector<double>(), mm);
}

TEST(BatchNormalizationTest, FeatureAxisOtherThanLast) {
  BatchNormalization bn({.axis = 1, .momentum = 0.5, .epsilon = 0.01, .dtype = DType::f64});
  Tensor x = gradcheck::uniform({2, 3, 4}, 47);
  Tensor y = bn(x, true);
  EXPECT_EQ(bn->gamma.shape(), (Shape{3}));
  // Reference on the transposed (rows = 2 * 4, channels = 3) layout.
  std::vector<double> xv = x.to_vector<double>(), xt, m, v;
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      for (int c = 0; c < 3; ++c) xt.push_back(xv[size_t((n * 3 + c) * 4 + k)]);
  moments(xt, 8, 3, &m, &v);
  std::vector<double> yt = normalize(xt, 3, m, v, {1, 1, 1}, {0, 0, 0}, 0.01), want(24);
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k)
      for (int c = 0; c < 3; ++c)
        want[size_t((n * 3 + c) * 4 + k)] = yt[size_t((n * 4 + k) * 3 + c)];
  test::expect_tensor(y, DType::f64, {2, 3, 4}, want, 1e-12, 1e-13);
  std::vector<double> want_mm;
  for (double mc : m) want_mm.push_back(0.5 * mc);
  test::expect_tensor(bn->moving_mean.value(), DType::f64, {3}, want_mm, 1e-13, 1e-15);
  EXPECT_THAT(error_message([&] {
                bn(ones({2, 4, 4}, DType::f64));
              }),
              HasSubstr("expected axis 1 of input shape to have value 3, but received input with "
                        "shape (2, 4, 4)"));
  EXPECT_THAT(error_message([&] {
                bn(ones({2, 3}, DType::f64));
              }),
              HasSubstr("expected ndim=3, found ndim=2"));
}

TEST(BatchNormalizationTest, GradientsMatchFiniteDifferences) {
  BatchNormalization bn = built_bn(3);
  Tensor x = gradcheck::uniform({5, 3}, 48, -2, 2);
  EXPECT_TRUE(test::check_layer_gradients(bn, x, /*training=*/true));
  EXPECT_TRUE(test::check_layer_gradients(bn, x, /*training=*/false));
  BatchNormalization bn4({.dtype = DType::f64});
  Tensor x4 = gradcheck::uniform({2, 3, 2, 4}, 49);
  bn4(x4);
  EXPECT_TRUE(test::check_layer_gradients(bn4, x4, /*training=*/true));
}

TEST(BatchNormalizationTest, ConfigAndErrors) {
  clear_session();
  BatchNormalization bn({.momentum = 0.9});
  nlohmann::json c = bn->get_config();
  for (const char* key :
       {"name", "trainable", "dtype", "axis", "momentum", "epsilon", "center", "scale",
        "beta_initializer", "gamma_initializer", "moving_mean_initializer",
        "moving_variance_initializer", "beta_regularizer", "gamma_regularizer", "beta_constraint",
        "gamma_constraint", "synchronized"})
    EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_EQ(c["axis"], -1);
  EXPECT_DOUBLE_EQ(c["momentum"].get<double>(), 0.9);
  EXPECT_DOUBLE_EQ(c["epsilon"].get<double>(), 1e-3);
  EXPECT_EQ(c["gamma_initializer"], "ones");
  EXPECT_EQ(c["moving_variance_initializer"], "ones");
  EXPECT_EQ(bn->compute_output_shape({Shape{-1, 4}})[0], (Shape{-1, 4}));
  BatchNormalization bad({.axis = 3});
  EXPECT_THAT(error_message([&] {
                bad(ones({2, 3}));
              }),
              HasSubstr("Invalid axis: 3 for an input of shape (2, 3) (rank 2)"));
  EXPECT_THAT(error_message([] { BatchNormalization({.momentum = 1.5}); }),
              HasSubstr("momentum must be in [0, 1], got 1.5"));
}

TEST(LayerNormalizationTest, NormalizesEachSampleOverTheLastAxis) {
  clear_session();
  LayerNormalization ln({.dtype = DType::f64});
  Tensor x = gradcheck::uniform({4, 5}, 51, -2, 2);
  ln(x);
  EXPECT_EQ(ln->name(), "layer_normalization");
  ASSERT_EQ(ln->weights().size(), 2u);
  EXPECT_EQ(ln->gamma.name(), "layer_normalization/gamma");
  EXPECT_EQ(ln->gamma.shape(), (Shape{5}));
  ln->set_weights({gradcheck::uniform({5}, 52, 0.5, 1.5), gradcheck::uniform({5}, 53)});
  std::vector<double> xv = x.to_vector<double>(), g = ln->gamma.value().to_vector<double>(),
                      b = ln->beta.value().to_vector<double>(), want;
  for (int r = 0; r < 4; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < 5; ++c) m += xv[size_t(r * 5 + c)] / 5;
    for (int c = 0; c < 5; ++c) v += std::pow(xv[size_t(r * 5 + c)] - m, 2) / 5;
    for (int c = 0; c < 5; ++c)
      want.push_back((xv[size_t(r * 5 + c)] - m) / std::sqrt(v + 1e-3) * g[size_t(c)] +
                     b[size_t(c)]);
  }
  test::expect_tensor(ln(x), DType::f64, {4, 5}, want, 1e-12, 1e-13);
  EXPECT_EQ(ln(x, true).to_vector<double>(), ln(x).to_vector<double>());
  EXPECT_TRUE(test::check_layer_gradients(ln, x));
}

TEST(LayerNormalizationTest, SeveralAxes) {
  LayerNormalization ln({.axis = {1, 2}, .epsilon = 1e-5, .dtype = DType::f64});
  Tensor x = gradcheck::uniform({2, 3, 4}, 54);
  Tensor y = ln(x);
  EXPECT_EQ(ln->gamma.shape(), (Shape{3, 4}));
  std::vector<double> xv = x.to_vector<double>(), want;
  for (int n = 0; n < 2; ++n) {
    double m = 0, v = 0;
    for (int i = 0; i < 12; ++i) m += xv[size_t(n * 12 + i)] / 12;
    for (int i = 0; i < 12; ++i) v += std::pow(xv[size_t(n * 12 + i)] - m, 2) / 12;
    for (int i = 0; i < 12; ++i) want.push_back((xv[size_t(n * 12 + i)] - m) / std::sqrt(v + 1e-5));
  }
  test::expect_tensor(y, DType::f64, {2, 3, 4}, want, 1e-12, 1e-13);
  ln->set_weights({gradcheck::uniform({3, 4}, 55, 0.5, 1.5), gradcheck::uniform({3, 4}, 56)});
  EXPECT_TRUE(test::check_layer_gradients(ln, x));
  EXPECT_EQ(ln->get_config()["axis"], nlohmann::json({1, 2}));
}

TEST(LayerNormalizationTest, ConfigSymbolicAndErrors) {
  LayerNormalization ln;
  nlohmann::json c = ln->get_config();
  for (const char* key :
       {"name", "trainable", "dtype", "axis", "epsilon", "center", "scale", "rms_scaling",
        "beta_initializer", "gamma_initializer", "beta_regularizer", "gamma_regularizer",
        "beta_constraint", "gamma_constraint"})
    EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_EQ(c["axis"], -1);
  Tensor y = ln(test::symbolic_input({-1, 7, 6}));
  EXPECT_EQ(y.shape(), (Shape{-1, 7, 6}));
  EXPECT_EQ(ln->gamma.shape(), (Shape{6}));
  EXPECT_THAT(error_message([&] {
                ln(ones({2, 7, 5}));
              }),
              HasSubstr("expected axis 2 of input shape to have value 6"));
  LayerNormalization twice({.axis = {1, -1}});
  EXPECT_THAT(error_message([&] { twice(ones({2, 3})); }), HasSubstr("names an axis twice"));
}

}  // namespace
}  // namespace kiln
