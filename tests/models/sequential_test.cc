// Sequential models (built at once from an input shape, or on the first call) and subclassed
// models (a ModelImpl subclass that tracks its layers and overrides call).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/kiln.h"
#include "tests/models/model_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using test::expect_same;
using test::ScaleBias;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Sequential, WithInputShapeBuildsAtOnce) {
  clear_session();
  Dense d1(64, {.activation = "relu"}), d2(10);
  Sequential model({d1, d2}, Shape{784});
  EXPECT_EQ(model->name(), "sequential");
  EXPECT_EQ(model->class_name(), "Sequential");
  EXPECT_TRUE(model->built());
  EXPECT_TRUE(d1->built());
  EXPECT_TRUE(d2->built());
  EXPECT_THAT(model->layer_output_shapes(), ElementsAre("(None, 64)", "(None, 10)"));
  EXPECT_EQ(model->count_params(), 784 * 64 + 64 + 64 * 10 + 10);
  EXPECT_EQ(model->weights().size(), 4u);
  EXPECT_TRUE(d1->inbound_nodes.empty());  // the build records no functional nodes
  Tensor x = random_normal({3, 784}, 1);
  expect_same(model(x), d2(d1(x)));
  EXPECT_EQ(Sequential()->name(), "sequential_1");
  Json c = model->get_config();
  EXPECT_EQ(c["build_input_shape"].dump(), "[null,784]");
  EXPECT_EQ(c["layers"][1]["class_name"], "Dense");
}

TEST(Sequential, WithoutInputShapeBuildsOnFirstCall) {
  clear_session();
  ScaleBias a(2), b(3);
  Sequential model({a, b});
  EXPECT_FALSE(model->built());
  EXPECT_FALSE(a->built());
  EXPECT_THAT(model->layer_output_shapes(), ElementsAre("?", "?"));
  EXPECT_EQ(model->count_params(), 0);
  // 3 * (2x + 0.5) + 0.5 = 6x + 2
  Tensor y = model(tensor({1.f, 2.f, 0.f, 1.f, 1.f, -1.f}, Shape{2, 3}));
  test::expect_tensor(y, DType::f32, Shape{2, 3}, {8, 14, 2, 8, 8, -4});
  EXPECT_TRUE(model->built());
  EXPECT_EQ(model->count_params(), 12);
  // Keras 3 also shows the batch size the model was first called with.
  EXPECT_THAT(model->layer_output_shapes(), ElementsAre("(2, 3)", "(2, 3)"));
}

TEST(Sequential, AddLayers) {
  clear_session();
  Sequential built({}, Shape{4});
  built.add(Dense(8));
  built.add(Dense(2));
  EXPECT_THAT(built->layer_output_shapes(), ElementsAre("(None, 8)", "(None, 2)"));
  EXPECT_EQ(built->count_params(), 4 * 8 + 8 + 8 * 2 + 2);

  Sequential lazy;
  lazy.add(ScaleBias());
  lazy(ones({1, 5}));
  lazy.add(ScaleBias());
  EXPECT_THAT(lazy->layer_output_shapes(), ElementsAre("(1, 5)", "?"));
  test::expect_tensor(lazy(ones({1, 2, 5})), DType::f32, Shape{1, 2, 5},
                      std::vector<double>(10, 5.5));
  EXPECT_THAT(lazy->layer_output_shapes(), ElementsAre("(1, 2, 5)", "(1, 2, 5)"));
}

TEST(Sequential, InsideSequential) {
  clear_session();
  Dense d1(5), d2(3), d3(2);
  Sequential inner({d1, d2});
  Sequential outer({inner, d3}, Shape{4});
  EXPECT_THAT(outer->layer_output_shapes(), ElementsAre("(None, 3)", "(None, 2)"));
  EXPECT_EQ(outer->weights().size(), 6u);
  Tensor x = random_normal({2, 4}, 3);
  expect_same(outer(x), d3(d2(d1(x))));
}

TEST(SequentialErrors, Messages) {
  clear_session();
  EXPECT_THAT(error_message([] { Sequential({test::Split()}, Shape{3}); }),
              HasSubstr("All layers in a Sequential model should have a single output tensor. "
                        "For multi-output layers, use the functional API. Layer \"split\" "
                        "returned 2 outputs."));
  Sequential lazy({test::Split()});
  EXPECT_THAT(error_message([&] {
                lazy(ones({1, 3}));
              }),
              HasSubstr("should have a single output tensor"));
  EXPECT_THAT(error_message([] {
                Sequential({ScaleBias(1, "x"), ScaleBias(1, "x")});
              }),
              HasSubstr("All layers added to a Sequential model should have unique names. Name "
                        "\"x\" is already the name of a layer in this model."));
  EXPECT_THAT(error_message([] {
                Sequential()(ones({1, 2}));
              }),
              HasSubstr("has no layers; add some with add()"));
  EXPECT_THAT(error_message([] {
                Sequential({ScaleBias()})({ones({1, 2}), ones({1, 2})});
              }),
              HasSubstr("takes one input, but it was called with 2"));
  EXPECT_THAT(error_message([] { Sequential().add(Layer()); }),
              HasSubstr("cannot add an empty layer handle"));
}

// A subclassed model: layers created with track(...) in the constructor, call overridden.
class MyModelImpl : public ModelImpl {
 public:
  MyModelImpl()
      : ModelImpl("MyModel"),
        hidden(track(Dense(8, {.activation = "relu"}))),
        out(track(Dense(2))) {}
  Tensor call(const Tensor& x, bool training) override { return out(hidden(x, training)); }
  Dense hidden, out;
};

TEST(Subclassed, TracksLayersAndComputes) {
  clear_session();
  auto impl = std::make_shared<MyModelImpl>();
  Model model(impl);
  EXPECT_EQ(model->name(), "my_model");
  EXPECT_EQ(model->class_name(), "MyModel");
  ASSERT_EQ(model->layers().size(), 2u);
  EXPECT_EQ(model->layers()[0]->name(), "dense");
  EXPECT_THAT(model->layer_output_shapes(), ElementsAre("?", "?"));
  EXPECT_TRUE(model->weights().empty());

  Tensor x = random_normal({3, 4}, 9);
  Tensor y = model(x);
  EXPECT_EQ(model->weights().size(), 4u);
  EXPECT_EQ(model->count_params(), 4 * 8 + 8 + 8 * 2 + 2);
  expect_same(y, impl->out(impl->hidden(x)));
  // After a call, shapes come from the shapes the layers were built with (Keras).
  EXPECT_THAT(model->layer_output_shapes(), ElementsAre("(3, 8)", "(3, 2)"));
  EXPECT_EQ(model->weights()[0].name(), "dense/kernel");
}

TEST(Subclassed, UsableInsideAFunctionalModel) {
  clear_session();
  auto impl = std::make_shared<MyModelImpl>();
  Model sub(impl);
  Tensor x = Input({4});
  Model model(x, sub(x));
  EXPECT_TRUE(impl->hidden->inbound_nodes.empty());  // its layers record no nodes
  EXPECT_EQ(sub->inbound_nodes.size(), 1u);
  EXPECT_EQ(model->layer_output_shapes()[1], "(None, 2)");
  EXPECT_EQ(model->count_params(), sub->count_params());
  Tensor v = random_normal({2, 4}, 4);
  expect_same(model(v), impl->out(impl->hidden(v)));
}

}  // namespace
}  // namespace kiln
