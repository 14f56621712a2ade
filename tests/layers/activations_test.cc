// activations::apply against scalar formulas, the Activation layer, and name errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double softplus_ref(double x) { return std::log1p(std::exp(x)); }

const std::map<std::string, std::function<double(double)>>& elementwise_refs() {
  static const std::map<std::string, std::function<double(double)>> m = {
      {"linear", [](double x) { return x; }},
      {"relu", [](double x) { return std::max(x, 0.0); }},
      {"relu6", [](double x) { return std::min(std::max(x, 0.0), 6.0); }},
      {"sigmoid", sigmoid_ref},
      {"hard_sigmoid", [](double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"leaky_relu", [](double x) { return x > 0 ? x : 0.2 * x; }},
      {"elu", [](double x) { return x > 0 ? x : std::expm1(x); }},
      {"selu",
       [](double x) {
         return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * std::expm1(x));
       }},
      {"softplus", softplus_ref},
      {"softsign", [](double x) { return x / (1 + std::abs(x)); }},
      {"silu", [](double x) { return x * sigmoid_ref(x); }},
      {"swish", [](double x) { return x * sigmoid_ref(x); }},
      {"mish", [](double x) { return x * std::tanh(softplus_ref(x)); }},
      {"exponential", [](double x) { return std::exp(x); }},
  };
  return m;
}

TEST(ActivationsTest, ElementwiseActivationsMatchFormulas) {
  Tensor x = gradcheck::away_from_zero({3, 7}, 11, 0.1, 4.0);
  std::vector<double> xv = x.to_vector<double>();
  for (const auto& [name, f] : elementwise_refs()) {
    SCOPED_TRACE(name);
    std::vector<double> want;
    for (double v : xv) want.push_back(f(v));
    test::expect_tensor(activations::apply(name, x), DType::f64, {3, 7}, want, 1e-12, 1e-14);
  }
}

TEST(ActivationsTest, SoftmaxAndLogSoftmaxUseTheLastAxis) {
  Tensor x = gradcheck::uniform({2, 3}, 12, -2, 2);
  std::vector<double> v = x.to_vector<double>(), soft, logsoft;
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int c = 0; c < 3; ++c) s += std::exp(v[size_t(r * 3 + c)]);
    for (int c = 0; c < 3; ++c) {
      soft.push_back(std::exp(v[size_t(r * 3 + c)]) / s);
      logsoft.push_back(v[size_t(r * 3 + c)] - std::log(s));
    }
  }
  test::expect_tensor(activations::apply("softmax", x), DType::f64, {2, 3}, soft, 1e-12);
  test::expect_tensor(activations::apply("log_softmax", x), DType::f64, {2, 3}, logsoft, 1e-12);
}

TEST(ActivationsTest, EveryNameHasAReferenceOrIsSoftmax) {
  for (const std::string& n : activations::names())
    EXPECT_TRUE(elementwise_refs().count(n) || n == "softmax" || n == "log_softmax") << n;
  EXPECT_EQ(activations::canonical(""), "linear");
}

TEST(ActivationsTest, UnknownNameListsTheValidOnes) {
  std::string msg = test::error_message([] { activations::apply("rleu", ones({2})); });
  EXPECT_THAT(msg, HasSubstr("Could not interpret activation function identifier: \"rleu\""));
  EXPECT_THAT(msg, HasSubstr("relu"));
  EXPECT_THAT(msg, HasSubstr("softmax"));
  EXPECT_THAT(msg, HasSubstr("gelu"));
}

TEST(ActivationsTest, GradientsMatchFiniteDifferences) {
  Tensor x = gradcheck::away_from_zero({2, 5}, 13, 0.1, 2.0);
  for (const std::string& name : activations::names()) {
    SCOPED_TRACE(name);
    EXPECT_GRADIENTS([&](const std::vector<Tensor>& xs) { return activations::apply(name, xs[0]); },
                     {x});
  }
}

TEST(ActivationLayerTest, AppliesItsActivationAndHasKerasConfig) {
  clear_session();
  Activation act("relu");
  EXPECT_EQ(act->name(), "activation");
  test::expect_tensor(act(tensor<float>({-1, 2}, {1, 2})), DType::f32, {1, 2}, {0, 2});
  EXPECT_TRUE(act->weights().empty());
  nlohmann::json c = act->get_config();
  EXPECT_EQ(c["activation"], "relu");
  EXPECT_EQ(c["name"], "activation");
  EXPECT_EQ(c["trainable"], true);
  Tensor y = act(test::symbolic_input({-1, 4}));
  EXPECT_EQ(y.shape(), (Shape{-1, 4}));
  EXPECT_EQ(act->compute_output_shape({Shape{-1, 4}})[0], (Shape{-1, 4}));
  EXPECT_THAT(test::error_message([] { Activation("nope"); }),
              HasSubstr("Could not interpret activation function identifier"));
}

}  // namespace
}  // namespace kiln
