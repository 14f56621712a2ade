// Merging layers: elementwise merges and Concatenate, shape checks, symbolic inputs, gradients.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::HasSubstr;

TEST(MergingTest, ElementwiseMergesMatchPlainLoops) {
  Tensor a = gradcheck::uniform({2, 3}, 81), b = gradcheck::uniform({2, 3}, 82),
         c = gradcheck::uniform({2, 3}, 83);
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(),
                      cv = c.to_vector<double>();
  auto ref = [&](auto f) {
    std::vector<double> out;
    for (size_t i = 0; i < av.size(); ++i) out.push_back(f(av[i], bv[i], cv[i]));
    return out;
  };
  test::expect_tensor(Add()({a, b, c}), DType::f64, {2, 3},
                      ref([](double x, double y, double z) { return x + y + z; }), 1e-15);
  test::expect_tensor(Multiply()({a, b, c}), DType::f64, {2, 3},
                      ref([](double x, double y, double z) { return x * y * z; }), 1e-15);
  test::expect_tensor(Average()({a, b, c}), DType::f64, {2, 3},
                      ref([](double x, double y, double z) { return (x + y + z) / 3; }), 1e-15);
  test::expect_tensor(Maximum()({a, b, c}), DType::f64, {2, 3},
                      ref([](double x, double y, double z) {
                        return std::max({x, y, z});
                      }),
                      0);
  test::expect_tensor(Minimum()({a, b, c}), DType::f64, {2, 3},
                      ref([](double x, double y, double z) {
                        return std::min({x, y, z});
                      }),
                      0);
  test::expect_tensor(Subtract()({a, b}), DType::f64, {2, 3},
                      ref([](double x, double y, double) { return x - y; }), 0);
}

TEST(MergingTest, NamesAndShapeErrors) {
  clear_session();
  Add add;
  EXPECT_EQ(add->name(), "add");
  EXPECT_EQ(Add()->name(), "add_1");
  EXPECT_EQ(Subtract()->name(), "subtract");
  EXPECT_EQ(error_message([&] {
              add({ones({2, 3})});
            }),
            "layer \"add\": A merge layer should be called on a list of at least 2 inputs. Got 1 "
            "inputs. Full input_shape received: [(2, 3)]");
  EXPECT_EQ(error_message([&] {
              add({ones({2, 3}), ones({2, 4})});
            }),
            "layer \"add\": Inputs have incompatible shapes. Received shapes (2, 3) and (2, 4)");
  EXPECT_EQ(error_message([&] {
              add({ones({2, 3}), ones({5, 3})});
            }),
            "layer \"add\": Cannot merge tensors with different batch sizes. Received tensors "
            "with shapes [(2, 3), (5, 3)]");
  EXPECT_THAT(error_message([] {
                Subtract()({ones({2}), ones({2}), ones({2})});
              }),
              HasSubstr("A `Subtract` layer should be called on exactly 2 inputs"));
  // Size-1 dimensions broadcast, as in Keras.
  EXPECT_EQ(add({ones({2, 3}), ones({2, 1})}).shape(), (Shape{2, 3}));
}

TEST(MergingTest, SymbolicInputsAndGradients) {
  Add add;
  Tensor y = add({test::symbolic_input({-1, 4}), test::symbolic_input({-1, 4})});
  EXPECT_EQ(y.shape(), (Shape{-1, 4}));
  EXPECT_EQ(add->compute_output_shape({Shape{-1, 4}, Shape{-1, 4}})[0], (Shape{-1, 4}));
  Tensor a = gradcheck::uniform({2, 3}, 84), b = gradcheck::uniform({2, 3}, 85, 2, 3);
  for (Layer layer : {Layer(Add()), Layer(Subtract()), Layer(Multiply()), Layer(Average()),
                      Layer(Maximum()), Layer(Minimum())}) {
    SCOPED_TRACE(layer->class_name());
    EXPECT_GRADIENTS([&](const std::vector<Tensor>& xs) { return layer(xs)[0]; }, {a, b});
  }
}

TEST(ConcatenateTest, JoinsAlongTheAxis) {
  clear_session();
  Concatenate cat;
  EXPECT_EQ(cat->name(), "concatenate");
  Tensor a = gradcheck::uniform({2, 2}, 86), b = gradcheck::uniform({2, 3}, 87);
  std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), want;
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 2; ++c) want.push_back(av[size_t(r * 2 + c)]);
    for (int c = 0; c < 3; ++c) want.push_back(bv[size_t(r * 3 + c)]);
  }
  test::expect_tensor(cat({a, b}), DType::f64, {2, 5}, want, 0);
  EXPECT_GRADIENTS([&](const std::vector<Tensor>& xs) { return cat(xs); }, {a, b});
  Concatenate rows({.axis = 0});
  EXPECT_EQ(rows({a, a, a}).shape(), (Shape{6, 2}));
  EXPECT_EQ(rows->get_config()["axis"], 0);
  EXPECT_EQ(cat->get_config()["axis"], -1);
}

TEST(ConcatenateTest, SymbolicShapesAndErrors) {
  clear_session();
  Concatenate cat;
  Tensor y = cat({test::symbolic_input({-1, 3}), test::symbolic_input({-1, 4})});
  EXPECT_EQ(y.shape(), (Shape{-1, 7}));
  EXPECT_EQ(cat->compute_output_shape({Shape{-1, 3}, Shape{-1, 4}})[0], (Shape{-1, 7}));
  EXPECT_EQ(Concatenate({.axis = 0})->compute_output_shape({Shape{-1, 3}, Shape{2, 3}})[0],
            (Shape{-1, 3}));
  EXPECT_EQ(error_message([&] {
              cat({ones({2, 3}), ones({3, 3})});
            }),
            "layer \"concatenate\": A `Concatenate` layer requires inputs with matching shapes "
            "except for the concatenation axis. Received: input_shape=[(2, 3), (3, 3)] and "
            "axis=-1");
  EXPECT_THAT(error_message([&] {
                cat({ones({2, 3}), ones({2, 3, 1})});
              }),
              HasSubstr("requires inputs with matching shapes"));
}

}  // namespace
}  // namespace kiln
