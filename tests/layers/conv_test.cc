// Conv2D: build, input_spec errors, forward against a naive convolution, gradients, config,
// symbolic shapes, argument checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::HasSubstr;

TEST(Conv2DTest, BuildsHwioKernelAtFirstCall) {
  clear_session();
  Conv2D c(4, {3, 2});
  EXPECT_FALSE(c->built());
  Tensor y = c(ones({2, 6, 5, 3}));
  EXPECT_TRUE(c->built());
  EXPECT_EQ(c->kernel.shape(), (Shape{3, 2, 3, 4}));
  EXPECT_EQ(c->bias.shape(), (Shape{4}));
  EXPECT_EQ(c->kernel.name(), "conv2d/kernel");
  EXPECT_EQ(y.shape(), (Shape{2, 4, 4, 4}));
}

TEST(Conv2DTest, InputSpecErrors) {
  clear_session();
  Conv2D c(2, {3, 3});
  EXPECT_EQ(error_message([&] {
              c(ones({2, 5, 5}));
            }),
            "Input 0 of layer \"conv2d\" is incompatible with the layer: expected ndim=4, found "
            "ndim=3. Full shape received: (2, 5, 5)");
  c(ones({1, 5, 5, 3}));
  EXPECT_EQ(error_message([&] {
              c(ones({1, 5, 5, 2}));
            }),
            "Input 0 of layer \"conv2d\" is incompatible with the layer: expected axis -1 of input "
            "shape to have value 3, but received input with shape (1, 5, 5, 2)");
}

struct ConvLayerCase {
  Axes kernel, strides;
  std::string padding;
  Axes dilation;
  Shape input;
};

TEST(Conv2DTest, ForwardMatchesNaiveConvolution) {
  std::vector<ConvLayerCase> cases = {
      {{3, 3}, {1, 1}, "valid", {1, 1}, {2, 5, 6, 3}},
      {{3, 2}, {2, 1}, "same", {1, 1}, {1, 7, 5, 2}},
      {{2, 3}, {1, 1}, "same", {2, 1}, {2, 6, 6, 1}},
      {{3, 3}, {1, 1}, "valid", {2, 2}, {1, 7, 7, 2}},
      {{1, 1}, {2, 2}, "VALID", {1, 1}, {1, 4, 5, 3}},
  };
  for (const ConvLayerCase& cc : cases) {
    SCOPED_TRACE(cc.input.to_string() + " " + cc.padding);
    Conv2D c(3, cc.kernel,
             {.strides = cc.strides,
              .padding = cc.padding,
              .dilation_rate = cc.dilation,
              .bias_initializer = "random_normal",
              .dtype = DType::f64});
    Tensor x = gradcheck::uniform(cc.input, 21);
    Tensor y = c(x);
    Shape want_shape;
    std::vector<double> want = test::ref_conv2d(
        x.to_vector<double>(), cc.input, c->kernel.value().to_vector<double>(), c->kernel.shape(),
        cc.strides, c->options().padding, cc.dilation, &want_shape);
    std::vector<double> b = c->bias.value().to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) want[i] += b[i % 3];
    test::expect_tensor(y, DType::f64, want_shape, want, 1e-12, 1e-13);
    EXPECT_EQ(c->compute_output_shape({cc.input})[0], want_shape);
  }
}

TEST(Conv2DTest, ActivationIsApplied) {
  Conv2D c(2, {1, 1}, {.activation = "relu", .dtype = DType::f64});
  Tensor y = c(gradcheck::uniform({1, 3, 3, 2}, 22));
  for (double v : y.to_vector<double>()) EXPECT_GE(v, 0);
}

TEST(Conv2DTest, GradientsMatchFiniteDifferences) {
  Conv2D c(2, {2, 3},
           {.strides = {2, 1},
            .padding = "same",
            .bias_initializer = "random_normal",
            .dtype = DType::f64});
  Tensor x = gradcheck::uniform({2, 5, 4, 3}, 23);
  c(x);
  EXPECT_TRUE(test::check_layer_gradients(c, x));
  Conv2D dil(1, {2, 2}, {.dilation_rate = {2, 2}, .dtype = DType::f64});
  Tensor x2 = gradcheck::uniform({1, 5, 5, 2}, 24);
  dil(x2);
  EXPECT_TRUE(test::check_layer_gradients(dil, x2));
}

TEST(Conv2DTest, SymbolicInputWithUnknownBatch) {
  Conv2D c(8, {3, 3}, {.strides = {2, 2}, .padding = "same"});
  EXPECT_EQ(c->compute_output_shape({Shape{-1, 28, 28, 1}})[0], (Shape{-1, 14, 14, 8}));
  EXPECT_FALSE(c->built());
  Tensor y = c(test::symbolic_input({-1, 28, 28, 1}));
  EXPECT_TRUE(y.is_symbolic());
  EXPECT_EQ(y.shape(), (Shape{-1, 14, 14, 8}));
  EXPECT_EQ(c->kernel.shape(), (Shape{3, 3, 1, 8}));
}

TEST(Conv2DTest, RegularizationLosses) {
  Conv2D c(2, {2, 2},
           {.bias_initializer = "ones",
            .kernel_regularizer = regularizers::l1_l2(0.1, 0.2),
            .bias_regularizer = regularizers::l2(0.3),
            .dtype = DType::f64});
  c(ones({1, 3, 3, 1}, DType::f64));
  std::vector<Tensor> losses = c->losses();
  ASSERT_EQ(losses.size(), 2u);
  double l1 = 0, l2 = 0;
  for (double v : c->kernel.value().to_vector<double>()) {
    l1 += std::abs(v);
    l2 += v * v;
  }
  EXPECT_NEAR(losses[0].item<double>(), 0.1 * l1 + 0.2 * l2, 1e-12);
  EXPECT_NEAR(losses[1].item<double>(), 0.3 * 2, 1e-12);
}

TEST(Conv2DTest, ConfigHasKerasKeys) {
  clear_session();
  Conv2D c(16, {3, 5}, {.strides = {1, 2}, .padding = "Same"});
  nlohmann::json cfg = c->get_config();
  for (const char* key :
       {"name", "trainable", "dtype", "filters", "kernel_size", "strides", "padding", "data_format",
        "dilation_rate", "groups", "activation", "use_bias", "kernel_initializer",
        "bias_initializer", "kernel_regularizer", "bias_regularizer", "kernel_constraint",
        "bias_constraint"})
    EXPECT_TRUE(cfg.contains(key)) << key;
  EXPECT_EQ(cfg["filters"], 16);
  EXPECT_EQ(cfg["kernel_size"], nlohmann::json({3, 5}));
  EXPECT_EQ(cfg["strides"], nlohmann::json({1, 2}));
  EXPECT_EQ(cfg["padding"], "same");
  EXPECT_EQ(cfg["data_format"], "channels_last");
  EXPECT_EQ(cfg["dilation_rate"], nlohmann::json({1, 1}));
  EXPECT_EQ(cfg["activation"], "linear");
}

TEST(Conv2DTest, InvalidArgumentsThrow) {
  EXPECT_THAT(error_message([] {
                Conv2D(0, {3, 3});
              }),
              HasSubstr("Invalid value for argument `filters`"));
  EXPECT_THAT(error_message([] { Conv2D(1, {3}); }),
              HasSubstr("The `kernel_size` argument must be a tuple of 2 positive integers. "
                        "Received: kernel_size=(3)"));
  EXPECT_THAT(error_message([] {
                Conv2D(1, {3, 3}, {.strides = {0, 1}});
              }),
              HasSubstr("Received: strides=(0, 1)"));
  EXPECT_THAT(error_message([] {
                Conv2D(1, {3, 3}, {.padding = "causal"});
              }),
              HasSubstr("invalid padding \"causal\"; expected \"valid\" or \"same\""));
  EXPECT_THAT(error_message([] {
                Conv2D(1, {3, 3}, {.strides = {2, 2}, .dilation_rate = {2, 1}});
              }),
              HasSubstr("`strides > 1` not supported in conjunction with `dilation_rate > 1`"));
}

}  // namespace
}  // namespace kiln
