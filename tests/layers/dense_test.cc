// Dense: lazy build, names, input_spec errors, forward pass against a naive reference,
// gradients, regularization losses, config, symbolic shapes, weight round trips.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::HasSubstr;

// y[b, u] = act(sum_i x[b, i] k[i, u] + bias[u]) over the rows of x.
std::vector<double> ref_dense(const std::vector<double>& x, int64_t rows, int64_t in,
                              const std::vector<double>& k, const std::vector<double>& b,
                              int64_t units, bool relu) {
  std::vector<double> y;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t u = 0; u < units; ++u) {
      double acc = b.empty() ? 0 : b[size_t(u)];
      for (int64_t i = 0; i < in; ++i) acc += x[size_t(r * in + i)] * k[size_t(i * units + u)];
      y.push_back(relu ? std::max(acc, 0.0) : acc);
    }
  return y;
}

TEST(DenseTest, BuildsLazilyOnceAtFirstCall) {
  clear_session();
  Dense d(3);
  EXPECT_FALSE(d->built());
  EXPECT_TRUE(d->weights().empty());
  EXPECT_FALSE(d->kernel.defined());
  Tensor y = d(ones({2, 5}));
  EXPECT_TRUE(d->built());
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  ASSERT_EQ(d->weights().size(), 2u);
  EXPECT_EQ(d->kernel.shape(), (Shape{5, 3}));
  EXPECT_EQ(d->bias.shape(), (Shape{3}));
  EXPECT_EQ(d->kernel.name(), "dense/kernel");
  EXPECT_EQ(d->bias.name(), "dense/bias");
  EXPECT_EQ(d->count_params(), 18);
  // Bias starts at zero (bias_initializer "zeros").
  for (double v : d->bias.value().to_vector<double>()) EXPECT_EQ(v, 0);
  const void* kernel_id = d->kernel.handle_id();
  d(ones({4, 5}));
  EXPECT_EQ(d->weights().size(), 2u);
  EXPECT_EQ(d->kernel.handle_id(), kernel_id);
}

TEST(DenseTest, WithoutBiasHasOnlyAKernel) {
  Dense d(4, {.use_bias = false});
  d(ones({1, 2}));
  ASSERT_EQ(d->weights().size(), 1u);
  EXPECT_FALSE(d->bias.defined());
}

TEST(DenseTest, DefaultNamesAreUniquePerClass) {
  clear_session();
  Dense a(2), b(2), c(2, {.name = "head"});
  Conv2D conv(1, {3, 3});
  BatchNormalization bn;
  MaxPooling2D mp;
  GlobalAveragePooling2D gap;
  LayerNormalization ln;
  Dense d(2);
  EXPECT_EQ(a->name(), "dense");
  EXPECT_EQ(b->name(), "dense_1");
  EXPECT_EQ(c->name(), "head");
  EXPECT_EQ(d->name(), "dense_2");
  EXPECT_EQ(conv->name(), "conv2d");
  EXPECT_EQ(bn->name(), "batch_normalization");
  EXPECT_EQ(mp->name(), "max_pooling2d");
  EXPECT_EQ(gap->name(), "global_average_pooling2d");
  EXPECT_EQ(ln->name(), "layer_normalization");
  EXPECT_EQ(a->class_name(), "Dense");
  clear_session();
  EXPECT_EQ(Dense(1)->name(), "dense");
}

TEST(DenseTest, InputSpecErrorsUseKerasWording) {
  clear_session();
  Dense d(3);
  EXPECT_EQ(error_message([&] { d(ones({5})); }),
            "Input 0 of layer \"dense\" is incompatible with the layer: expected min_ndim=2, "
            "found ndim=1. Full shape received: (5,)");
  EXPECT_FALSE(d->built());
  d(ones({2, 5}));
  EXPECT_EQ(error_message([&] {
              d(ones({10, 4}));
            }),
            "Input 0 of layer \"dense\" is incompatible with the layer: expected axis -1 of input "
            "shape to have value 5, but received input with shape (10, 4)");
  // Symbolic inputs are checked too.
  EXPECT_THAT(error_message([&] {
                d(test::symbolic_input({-1, 4}));
              }),
              HasSubstr("received input with shape (None, 4)"));
}

TEST(DenseTest, InvalidArgumentsThrow) {
  EXPECT_THAT(error_message([] { Dense(0); }),
              HasSubstr("Received an invalid value for `units`, expected a positive integer. "
                        "Received: units=0"));
  EXPECT_THAT(error_message([] { Dense(2, {.activation = "relux"}); }),
              HasSubstr("Could not interpret activation function identifier: \"relux\""));
  EXPECT_THAT(error_message([] { Dense(2, {.kernel_initializer = "nope"}); }),
              HasSubstr("unknown initializer \"nope\""));
}

TEST(DenseTest, ForwardMatchesNaiveReference) {
  Dense d(4, {.activation = "relu", .bias_initializer = "random_normal", .dtype = DType::f64});
  Tensor x = gradcheck::uniform({3, 5}, 1);
  Tensor y = d(x);
  ASSERT_EQ(y.dtype(), DType::f64);
  std::vector<double> want =
      ref_dense(x.to_vector<double>(), 3, 5, d->kernel.value().to_vector<double>(),
                d->bias.value().to_vector<double>(), 4, true);
  test::expect_tensor(y, DType::f64, {3, 4}, want, 1e-12, 1e-14);
}

TEST(DenseTest, AppliesToTheLastAxisOfHigherRankInputs) {
  Dense d(3, {.bias_initializer = "random_uniform", .dtype = DType::f64});
  Tensor x = gradcheck::uniform({2, 4, 5}, 2);
  Tensor y = d(x);
  std::vector<double> want =
      ref_dense(x.to_vector<double>(), 8, 5, d->kernel.value().to_vector<double>(),
                d->bias.value().to_vector<double>(), 3, false);
  test::expect_tensor(y, DType::f64, {2, 4, 3}, want, 1e-12, 1e-14);
}

TEST(DenseTest, CastsInputsToItsDtype) {
  Dense d(2);
  Tensor y = d(ones({1, 3}, DType::f64));
  EXPECT_EQ(y.dtype(), DType::f32);
}

TEST(DenseTest, GradientsMatchFiniteDifferences) {
  Dense d(3, {.activation = "tanh", .bias_initializer = "random_normal", .dtype = DType::f64});
  Tensor x = gradcheck::uniform({4, 5}, 3);
  d(x);
  EXPECT_TRUE(test::check_layer_gradients(d, x));
  Dense d3(2, {.dtype = DType::f64});
  Tensor x3 = gradcheck::uniform({2, 3, 4}, 4);
  d3(x3);
  EXPECT_TRUE(test::check_layer_gradients(d3, x3));
}

TEST(DenseTest, RegularizationLossesAppearInLosses) {
  Dense d(2, {.bias_initializer = "random_uniform",
              .kernel_regularizer = regularizers::l2(0.1),
              .bias_regularizer = regularizers::l1(0.2),
              .activity_regularizer = regularizers::l2(0.01),
              .dtype = DType::f64});
  Tensor x = gradcheck::uniform({4, 3}, 5);
  Tensor y = d(x);
  std::vector<Tensor> losses = d->losses();
  ASSERT_EQ(losses.size(), 3u);
  double activity = 0, kernel = 0, bias = 0;
  for (double v : y.to_vector<double>()) activity += v * v;
  for (double v : d->kernel.value().to_vector<double>()) kernel += v * v;
  for (double v : d->bias.value().to_vector<double>()) bias += std::abs(v);
  // The activity loss of the last call (Keras 3: not divided by the batch size), then the
  // weight penalties in weight order.
  EXPECT_NEAR(losses[0].item<double>(), 0.01 * activity, 1e-12);
  EXPECT_NEAR(losses[1].item<double>(), 0.1 * kernel, 1e-12);
  EXPECT_NEAR(losses[2].item<double>(), 0.2 * bias, 1e-12);
  // A new call replaces the activity loss rather than adding one.
  d(x);
  EXPECT_EQ(d->losses().size(), 3u);
}

TEST(DenseTest, ConfigHasKerasKeys) {
  clear_session();
  Dense d(7, {.activation = "relu", .kernel_regularizer = regularizers::l2(0.5)});
  nlohmann::json c = d->get_config();
  for (const char* key : {"name", "trainable", "dtype", "units", "activation", "use_bias",
                          "kernel_initializer", "bias_initializer", "kernel_regularizer",
                          "bias_regularizer", "kernel_constraint", "bias_constraint"})
    EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_EQ(c["name"], "dense");
  EXPECT_EQ(c["units"], 7);
  EXPECT_EQ(c["activation"], "relu");
  EXPECT_EQ(c["use_bias"], true);
  // Keras 3's serialized DTypePolicy.
  EXPECT_EQ(c["dtype"], Json::parse(R"({"module": "keras", "class_name": "DTypePolicy",
                                        "config": {"name": "float32"}, "registered_name": null})"));
  EXPECT_EQ(c["kernel_initializer"], "glorot_uniform");
  EXPECT_EQ(c["bias_initializer"], "zeros");
  EXPECT_EQ(c["kernel_regularizer"]["class_name"], "L2");
  EXPECT_DOUBLE_EQ(c["kernel_regularizer"]["config"]["l2"].get<double>(), 0.5);
  EXPECT_TRUE(c["bias_regularizer"].is_null());
  EXPECT_FALSE(c.contains("activity_regularizer"));
  EXPECT_EQ(Dense(1)->get_config()["activation"], "linear");
  EXPECT_EQ(Dense(1, {.activation = ""})->get_config()["activation"], "linear");
}

TEST(DenseTest, SymbolicInputsWithUnknownBatch) {
  Dense d(3);
  EXPECT_EQ(d->compute_output_shape({Shape{-1, 7, 5}})[0], (Shape{-1, 7, 3}));
  EXPECT_FALSE(d->built());  // pure shape computation
  Tensor y = d(test::symbolic_input({-1, 5}));
  EXPECT_TRUE(y.is_symbolic());
  EXPECT_EQ(y.shape(), (Shape{-1, 3}));
  EXPECT_TRUE(d->built());
  EXPECT_EQ(d->kernel.shape(), (Shape{5, 3}));
}

TEST(DenseTest, UnknownLastDimensionCannotBuild) {
  clear_session();
  Dense d(3);
  EXPECT_THAT(error_message([&] {
                d(test::symbolic_input({-1, -1}));
              }),
              HasSubstr("layer \"dense\": the last dimension of the inputs to a Dense layer "
                        "should be defined. Found None"));
}

TEST(DenseTest, GetSetWeightsRoundTripAndSizeErrors) {
  clear_session();
  Dense d(2);
  d(ones({1, 3}));
  std::vector<Tensor> w = d->get_weights();
  ASSERT_EQ(w.size(), 2u);
  Tensor k = tensor<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor b = tensor<float>({0.5f, -0.5f});
  d->set_weights({k, b});
  EXPECT_EQ(d->get_weights()[0].to_vector<float>(), k.to_vector<float>());
  test::expect_tensor(d(ones({1, 3})), DType::f32, {1, 2}, {9.5, 11.5});
  EXPECT_EQ(error_message([&] { d->set_weights({k}); }),
            "set_weights: layer \"dense\" has 2 weights, but 1 values were given");
  EXPECT_THAT(error_message([&] {
                d->set_weights({zeros({2, 3}), b});
              }),
              HasSubstr("set_weights: weight 0 (dense/kernel) is f32[3,2], the value given is "
                        "f32[2,3]"));
  d->set_weights(w);
  EXPECT_EQ(d->get_weights()[0].to_vector<float>(), w[0].to_vector<float>());
}

TEST(DenseTest, TrainableFlagMovesWeights) {
  Dense d(2);
  d(ones({1, 3}));
  EXPECT_EQ(d->trainable_weights().size(), 2u);
  EXPECT_EQ(d->non_trainable_weights().size(), 0u);
  d->set_trainable(false);
  EXPECT_EQ(d->trainable_weights().size(), 0u);
  EXPECT_EQ(d->non_trainable_weights().size(), 2u);
  EXPECT_EQ(d->get_config()["trainable"], false);
}

}  // namespace
}  // namespace kiln
