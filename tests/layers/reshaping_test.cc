// Flatten and Reshape: values, unknown batch dimensions, errors, config, gradients.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::HasSubstr;

TEST(FlattenTest, KeepsTheBatchDimension) {
  clear_session();
  Flatten f;
  EXPECT_EQ(f->name(), "flatten");
  Tensor x = gradcheck::uniform({2, 3, 4}, 71);
  Tensor y = f(x);
  test::expect_tensor(y, DType::f64, {2, 12}, x.to_vector<double>(), 0);
  test::expect_tensor(f(ones({5})), DType::f32, {5, 1}, std::vector<double>(5, 1.0));
  EXPECT_TRUE(test::check_layer_gradients(f, x));
  EXPECT_EQ(f->get_config()["data_format"], "channels_last");
}

TEST(FlattenTest, UnknownBatchDimension) {
  Flatten f;
  Tensor y = f(test::symbolic_input({-1, 7, 7, 8}));
  EXPECT_TRUE(y.is_symbolic());
  EXPECT_EQ(y.shape(), (Shape{-1, 392}));
  EXPECT_EQ(f->compute_output_shape({Shape{-1, 4, 5}})[0], (Shape{-1, 20}));
  EXPECT_EQ(f(test::symbolic_input({3, -1})).shape(), (Shape{3, -1}));
  EXPECT_THAT(error_message([&] {
                f(test::symbolic_input({-1, -1, 2}));
              }),
              HasSubstr("the batch dimension and another dimension are both unknown"));
  EXPECT_THAT(error_message([&] { f(scalar(1)); }), HasSubstr("expected min_ndim=1, found ndim=0"));
}

TEST(ReshapeTest, ReshapesAllButTheBatchDimension) {
  clear_session();
  Reshape r({3, 4});
  EXPECT_EQ(r->name(), "reshape");
  Tensor x = gradcheck::uniform({2, 12}, 72);
  test::expect_tensor(r(x), DType::f64, {2, 3, 4}, x.to_vector<double>(), 0);
  EXPECT_TRUE(test::check_layer_gradients(r, x));
  Reshape inferred({-1, 2});
  test::expect_tensor(inferred(x), DType::f64, {2, 6, 2}, x.to_vector<double>(), 0);
  EXPECT_EQ(inferred->get_config()["target_shape"], nlohmann::json({-1, 2}));
}

TEST(ReshapeTest, UnknownBatchDimension) {
  Reshape r({-1, 4});
  EXPECT_EQ(r(test::symbolic_input({-1, 2, 6})).shape(), (Shape{-1, 3, 4}));
  EXPECT_EQ(r->compute_output_shape({Shape{-1, 8}})[0], (Shape{-1, 2, 4}));
  Reshape fixed({6});
  EXPECT_EQ(fixed(test::symbolic_input({-1, 2, 3})).shape(), (Shape{-1, 6}));
}

TEST(ReshapeTest, Errors) {
  clear_session();
  Reshape r({5});
  EXPECT_EQ(error_message([&] {
              r(ones({2, 6}));
            }),
            "layer \"reshape\": The total size of the tensor must be unchanged. Received: "
            "input_shape=(2, 6), target_shape=(5); the input has 6 elements per batch entry");
  EXPECT_THAT(error_message([&] {
                Reshape({4, -1})(ones({2, 6}));
              }),
              HasSubstr("The total size of the tensor must be unchanged"));
  EXPECT_THAT(error_message([] { Reshape({-1, -1}); }), HasSubstr("at most one -1"));
  EXPECT_THAT(error_message([] { Reshape(Axes{0, 2}); }), HasSubstr("invalid target_shape (0, 2)"));
}

}  // namespace
}  // namespace kiln
