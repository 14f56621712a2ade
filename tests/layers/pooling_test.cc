// Pooling layers: forward against naive pooling, gradients, input_spec, config, shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::HasSubstr;

struct PoolingLayerCase {
  Axes pool, strides;
  std::string padding;
  Shape input;
};

const std::vector<PoolingLayerCase>& pooling_layer_cases() {
  static const std::vector<PoolingLayerCase> c = {
      {{2, 2}, {}, "valid", {2, 4, 6, 3}},
      {{3, 3}, {2, 2}, "same", {1, 5, 7, 2}},
      {{2, 3}, {1, 2}, "valid", {2, 5, 5, 1}},
      {{2, 2}, {}, "same", {1, 5, 5, 2}},
  };
  return c;
}

TEST(PoolingTest, MaxAndAverageMatchNaivePooling) {
  for (const PoolingLayerCase& pc : pooling_layer_cases()) {
    SCOPED_TRACE(pc.input.to_string() + " " + pc.padding);
    Tensor x = gradcheck::distinct(pc.input, 31);
    Axes strides = pc.strides.empty() ? pc.pool : pc.strides;
    for (bool is_max : {true, false}) {
      Layer layer =
          is_max ? Layer(MaxPooling2D(pc.pool, {.strides = pc.strides, .padding = pc.padding}))
                 : Layer(AveragePooling2D(pc.pool, {.strides = pc.strides, .padding = pc.padding}));
      Shape want_shape;
      std::vector<double> want = test::ref_pool2d(x.to_vector<double>(), pc.input, pc.pool, strides,
                                                  pc.padding, is_max, &want_shape);
      test::expect_tensor(layer(x), DType::f64, want_shape, want, 1e-13, 1e-15);
      EXPECT_EQ(layer->compute_output_shape({pc.input})[0], want_shape);
    }
  }
}

TEST(PoolingTest, GradientsMatchFiniteDifferences) {
  for (const PoolingLayerCase& pc : pooling_layer_cases()) {
    SCOPED_TRACE(pc.input.to_string() + " " + pc.padding);
    Tensor x = gradcheck::distinct(pc.input, 32, -1, 0.05);
    MaxPooling2D mp(pc.pool, {.strides = pc.strides, .padding = pc.padding});
    AveragePooling2D ap(pc.pool, {.strides = pc.strides, .padding = pc.padding});
    EXPECT_TRUE(test::check_layer_gradients(mp, x));
    EXPECT_TRUE(test::check_layer_gradients(ap, x));
  }
}

TEST(PoolingTest, DefaultsAndConfig) {
  clear_session();
  MaxPooling2D mp;
  EXPECT_EQ(mp->pool_size(), (Axes{2, 2}));
  EXPECT_EQ(mp->strides(), (Axes{2, 2}));
  EXPECT_EQ(mp->padding(), "valid");
  nlohmann::json c = mp->get_config();
  for (const char* key : {"name", "trainable", "pool_size", "padding", "strides", "data_format"})
    EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_EQ(c["name"], "max_pooling2d");
  EXPECT_EQ(c["strides"], nlohmann::json({2, 2}));
  AveragePooling2D ap({3, 3}, {.strides = {1, 1}, .padding = "SAME"});
  EXPECT_EQ(ap->name(), "average_pooling2d");
  EXPECT_EQ(ap->get_config()["padding"], "same");
  EXPECT_EQ(ap->get_config()["strides"], nlohmann::json({1, 1}));
  EXPECT_TRUE(ap->weights().empty());
}

TEST(PoolingTest, InputSpecAndArgumentErrors) {
  clear_session();
  MaxPooling2D mp;
  EXPECT_EQ(error_message([&] {
              mp(ones({4, 4, 1}));
            }),
            "Input 0 of layer \"max_pooling2d\" is incompatible with the layer: expected ndim=4, "
            "found ndim=3. Full shape received: (4, 4, 1)");
  EXPECT_THAT(error_message([] {
                MaxPooling2D({2, 0});
              }),
              HasSubstr("The `pool_size` argument must be a tuple of 2 positive integers"));
  EXPECT_THAT(error_message([] {
                AveragePooling2D({2, 2}, {.padding = "full"});
              }),
              HasSubstr("invalid padding \"full\""));
}

TEST(PoolingTest, SymbolicInputWithUnknownBatch) {
  MaxPooling2D mp;
  Tensor y = mp(test::symbolic_input({-1, 28, 28, 8}));
  EXPECT_EQ(y.shape(), (Shape{-1, 14, 14, 8}));
  EXPECT_EQ(mp->compute_output_shape({Shape{-1, 7, 7, 8}})[0], (Shape{-1, 3, 3, 8}));
  GlobalAveragePooling2D gap;
  EXPECT_EQ(gap(test::symbolic_input({-1, 7, 7, 8})).shape(), (Shape{-1, 8}));
  EXPECT_EQ(gap->compute_output_shape({Shape{-1, 7, 7, 8}})[0], (Shape{-1, 8}));
}

TEST(GlobalPoolingTest, AverageAndMaxOverSpatialAxes) {
  Shape s{2, 3, 4, 5};
  Tensor x = gradcheck::distinct(s, 33);
  std::vector<double> v = x.to_vector<double>(), avg, mx;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 5; ++c) {
      double sum = 0, m = -1e300;
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t w = 0; w < 4; ++w) {
          sum += test::at4(v, s, n, h, w, c);
          m = std::max(m, test::at4(v, s, n, h, w, c));
        }
      avg.push_back(sum / 12);
      mx.push_back(m);
    }
  clear_session();
  GlobalAveragePooling2D gap;
  EXPECT_EQ(gap->name(), "global_average_pooling2d");
  test::expect_tensor(gap(x), DType::f64, {2, 5}, avg, 1e-13);
  GlobalAveragePooling2D keep({.keepdims = true});
  test::expect_tensor(keep(x), DType::f64, {2, 1, 1, 5}, avg, 1e-13);
  EXPECT_EQ(keep->compute_output_shape({s})[0], (Shape{2, 1, 1, 5}));
  GlobalMaxPooling2D gmp;
  EXPECT_EQ(gmp->name(), "global_max_pooling2d");
  test::expect_tensor(gmp(x), DType::f64, {2, 5}, mx, 0);
  EXPECT_TRUE(test::check_layer_gradients(gap, x));
  EXPECT_TRUE(test::check_layer_gradients(gmp, x));
  nlohmann::json c = keep->get_config();
  EXPECT_EQ(c["keepdims"], true);
  EXPECT_EQ(c["data_format"], "channels_last");
  EXPECT_THAT(error_message([&] {
                gap(ones({2, 3}));
              }),
              HasSubstr("expected ndim=4, found ndim=2"));
}

}  // namespace
}  // namespace kiln
