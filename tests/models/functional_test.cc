// Functional models: graph mapping (layer order by depth, then first use), shared layers,
// several inputs and outputs, nested models, concrete runs checked against calling the
// layers by hand, and the construction and call errors.
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
using ::testing::StartsWith;

std::vector<std::string> names(const Model& m) {
  std::vector<std::string> out;
  for (const Layer& l : m->layers()) out.push_back(l->name());
  return out;
}

FunctionalImpl& functional(const Model& m) { return dynamic_cast<FunctionalImpl&>(m.get()); }

TEST(Input, SymbolicTensorFromAnInputLayer) {
  clear_session();
  Tensor x = Input({784});
  Tensor y = Input({28, 28, 1}, DType::f64, "pixels");
  EXPECT_TRUE(x.is_symbolic());
  EXPECT_EQ(x.shape().to_string(), "(None, 784)");
  EXPECT_EQ(y.shape().to_string(), "(None, 28, 28, 1)");
  EXPECT_EQ(y.dtype(), DType::f64);
  const KerasHistory* h = keras_history(x);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->tensor_index, 0u);
  EXPECT_TRUE(h->node->inputs.empty());
  auto* layer = dynamic_cast<InputLayerImpl*>(h->node->layer.get());
  ASSERT_NE(layer, nullptr);
  EXPECT_EQ(layer->name(), "input_layer");
  EXPECT_EQ(layer->class_name(), "InputLayer");
  EXPECT_TRUE(layer->built());
  EXPECT_EQ(layer->get_config().dump(),
            R"({"batch_shape":[null,784],"dtype":"float32","name":"input_layer","sparse":false})");
  EXPECT_EQ(keras_history(y)->node->layer->name(), "pixels");
  EXPECT_EQ(keras_history(Input({3}))->node->layer->name(), "input_layer_1");
  EXPECT_THAT(error_message([] {
                Input({1, 2, 3, 4, 5, 6});
              }),
              HasSubstr("with the batch dimension"));
}

TEST(Functional, DiamondOrderConnectionsAndValues) {
  clear_session();
  Tensor x = Input({4});
  Tensor a = ScaleBias(2)(x);
  Tensor b = ScaleBias(3)(x);
  Tensor c = Add()({a, b});
  Model model(x, c);
  EXPECT_EQ(model->name(), "functional");
  EXPECT_EQ(model->class_name(), "Functional");
  EXPECT_THAT(names(model), ElementsAre("input_layer", "scale_bias", "scale_bias_1", "add"));
  EXPECT_THAT(functional(model).layer_depths(), ElementsAre(2, 1, 1, 0));
  EXPECT_THAT(model->layer_connections(), ElementsAre("-", "input_layer[0][0]", "input_layer[0][0]",
                                                      "scale_bias[0][0], scale_bias_1[0][0]"));
  EXPECT_THAT(model->layer_output_shapes(),
              ElementsAre("(None, 4)", "(None, 4)", "(None, 4)", "(None, 4)"));
  EXPECT_FALSE(functional(model).sequential_like());
  EXPECT_EQ(model->weights().size(), 4u);
  // (2x + 0.5) + (3x + 0.5) = 5x + 1
  Tensor out = model(tensor({1.f, 2.f, 3.f, 4.f, 0.f, -1.f, 0.5f, 2.f}, Shape{2, 4}));
  test::expect_tensor(out, DType::f32, Shape{2, 4}, {6, 11, 16, 21, 1, -4, 3.5, 11});
}

// Layers at the same depth keep the order in which the walk from the outputs met them.
TEST(Functional, LayersOrderedByDepthThenFirstUse) {
  clear_session();
  Tensor x = Input({3});
  ScaleBias a1(1, "a1"), a2(1, "a2"), b(1, "b");
  Tensor long_branch = a2(a1(x));
  Tensor short_branch = b(x);
  Model m1(x, Add()({long_branch, short_branch}));
  EXPECT_THAT(names(m1), ElementsAre("input_layer", "a1", "a2", "b", "add"));
  EXPECT_THAT(functional(m1).layer_depths(), ElementsAre(3, 2, 1, 1, 0));
  Model m2(x, Add()({short_branch, long_branch}));
  EXPECT_THAT(names(m2), ElementsAre("input_layer", "a1", "b", "a2", "add_1"));
}

TEST(Functional, SharedLayerHasTwoNodesAndOneSetOfWeights) {
  clear_session();
  ScaleBias shared(2);
  Tensor x = Input({3});
  Tensor y = shared(shared(x));
  Model model(x, y);
  EXPECT_THAT(names(model), ElementsAre("input_layer", "scale_bias"));
  // A shared layer takes the depth of its deepest node (Keras).
  EXPECT_THAT(functional(model).layer_depths(), ElementsAre(2, 1));
  EXPECT_EQ(shared->inbound_nodes.size(), 2u);
  EXPECT_EQ(model->weights().size(), 2u);
  EXPECT_EQ(model->count_params(), 6);
  EXPECT_THAT(model->layer_connections(), ElementsAre("-", "input_layer[0][0], scale_bias[0][0]"));
  EXPECT_FALSE(functional(model).sequential_like());
  // 2 * (2x + 0.5) + 0.5 = 4x + 1.5
  test::expect_tensor(model(tensor({1.f, 0.f, -1.f}, Shape{1, 3})), DType::f32, Shape{1, 3},
                      {5.5, 1.5, -2.5});
}

TEST(Functional, SharedDenseOnTwoInputs) {
  clear_session();
  Dense d(3);
  Tensor x1 = Input({4}), x2 = Input({4});
  Model model({x1, x2}, {Add()({d(x1), d(x2)})});
  EXPECT_EQ(model->count_params(), 4 * 3 + 3);
  EXPECT_EQ(model->weights().size(), 2u);
  Tensor a = random_normal({5, 4}, 1), b = random_normal({5, 4}, 2);
  std::vector<Tensor> out = model({a, b});
  ASSERT_EQ(out.size(), 1u);
  expect_same(out[0], d(a) + d(b));
}

TEST(Functional, MultipleInputsAndOutputs) {
  clear_session();
  Tensor x1 = Input({3}), x2 = Input({2});
  Dense da(4), db(4), head(1, {.activation = "sigmoid"});
  ScaleBias side(3);
  Layer split = test::Split();
  Tensor s = Add()({da(x1), db(x2)});
  std::vector<Tensor> parts = split(std::vector<Tensor>{s});
  Tensor o1 = head(parts[0]);
  Tensor o2 = side(parts[1]);
  Model model({x1, x2}, {o1, o2, parts[0]});
  EXPECT_THAT(names(model), ElementsAre("input_layer", "input_layer_1", "dense", "dense_1", "add",
                                        "split", "dense_2", "scale_bias"));
  EXPECT_EQ(model->layer_connections()[6], "split[0][0]");
  EXPECT_EQ(model->layer_connections()[7], "split[0][1]");
  EXPECT_EQ(model->layer_output_shapes()[5], "[(None, 4), (None, 4)]");

  Tensor a = random_normal({6, 3}, 3), b = random_normal({6, 2}, 4);
  std::vector<Tensor> out = model({a, b});
  ASSERT_EQ(out.size(), 3u);
  Tensor sum = da(a) + db(b);
  expect_same(out[0], head(sum));
  expect_same(out[1], side(-sum));
  expect_same(out[2], sum);
  EXPECT_THAT(model->compute_output_shape({{-1, 3}, {-1, 2}}),
              ElementsAre(Shape{-1, 1}, Shape{-1, 4}, Shape{-1, 4}));
  EXPECT_THAT(model->compute_output_shape({{7, 3}, {7, 2}}),
              ElementsAre(Shape{7, 1}, Shape{7, 4}, Shape{7, 4}));
}

TEST(Functional, InputsNoOutputNeedsStillBelongToTheModel) {
  clear_session();
  Tensor x = Input({2}), unused = Input({5});
  Model model({x, unused}, {ScaleBias()(x)});
  EXPECT_THAT(names(model), ElementsAre("input_layer", "input_layer_1", "scale_bias"));
  std::vector<Tensor> out = model({ones({1, 2}), zeros({1, 5})});
  test::expect_tensor(out[0], DType::f32, Shape{1, 2}, {2.5, 2.5});
}

TEST(Functional, NestedFunctionalModel) {
  clear_session();
  Tensor xi = Input({4});
  Dense inner_dense(3, {.activation = "relu"});
  Model inner(xi, inner_dense(xi));
  Tensor x = Input({4});
  Tensor h = inner(x);
  Dense head(2);
  Model outer(x, head(h), "outer");
  EXPECT_THAT(names(outer), ElementsAre("input_layer_1", "functional", "dense_1"));
  EXPECT_EQ(outer->layer_output_shapes()[1], "(None, 3)");
  // Calling `inner` on outer's tensors recorded a node on `inner` only.
  EXPECT_EQ(inner->inbound_nodes.size(), 1u);
  EXPECT_EQ(inner_dense->inbound_nodes.size(), 1u);
  EXPECT_EQ(outer->weights().size(), 4u);
  EXPECT_EQ(outer->count_params(), 4 * 3 + 3 + 3 * 2 + 2);
  Tensor v = random_normal({5, 4}, 7);
  expect_same(outer(v), head(inner_dense(v)));
}

TEST(Functional, SequentialInsideFunctional) {
  clear_session();
  Dense d1(8, {.activation = "tanh"}), d2(4);
  Sequential seq({d1, d2});
  Tensor x = Input({3});
  Model model(x, ScaleBias()(seq(x)));
  EXPECT_THAT(names(model), ElementsAre("input_layer", "sequential", "scale_bias"));
  EXPECT_THAT(model->layer_output_shapes(), ElementsAre("(None, 3)", "(None, 4)", "(None, 4)"));
  EXPECT_THAT(seq->layer_output_shapes(), ElementsAre("(None, 8)", "(None, 4)"));
  EXPECT_TRUE(d1->inbound_nodes.empty());
  EXPECT_EQ(model->count_params(), 3 * 8 + 8 + 8 * 4 + 4 + 8);
  Tensor v = random_normal({2, 3}, 11);
  Tensor by_hand = d2(d1(v)) * 2.0 + 0.5;
  expect_same(model(v), by_hand);
}

TEST(Functional, TrainingFlagReachesNestedLayers) {
  clear_session();
  Tensor xi = Input({2});
  Model inner(xi, test::TrainingProbe()(xi));
  Tensor x = Input({2});
  Model outer(x, inner(x));
  Tensor v = tensor({1.f, 3.f}, Shape{1, 2});
  test::expect_tensor(outer(v, false), DType::f32, Shape{1, 2}, {1, 3});
  test::expect_tensor(outer(v, true), DType::f32, Shape{1, 2}, {2, 6});
}

TEST(Functional, GradientsReachEveryWeight) {
  clear_session();
  Tensor x = Input({3});
  Model model(x, Dense(1)(Dense(4, {.activation = "relu"})(x)));
  GradientTape tape;
  Tensor loss = sum(square(model(random_normal({8, 3}, 5))));
  std::vector<Tensor> grads = tape.gradient(loss, model->trainable_weights());
  ASSERT_EQ(grads.size(), 4u);
  for (size_t i = 0; i < grads.size(); ++i) {
    ASSERT_TRUE(grads[i].defined()) << i;
    EXPECT_EQ(grads[i].shape(), model->trainable_weights()[i].shape());
  }
}

TEST(Functional, GetConfigFollowsKeras) {
  clear_session();
  Tensor x = Input({4});
  Model model(x, Dense(2)(x), "net");
  Json c = model->get_config();
  EXPECT_EQ(c["name"], "net");
  EXPECT_EQ(c["input_layers"].dump(), R"([["input_layer",0,0]])");
  EXPECT_EQ(c["output_layers"].dump(), R"([["dense",0,0]])");
  ASSERT_EQ(c["layers"].size(), 2u);
  EXPECT_EQ(c["layers"][0]["class_name"], "InputLayer");
  EXPECT_TRUE(c["layers"][0]["inbound_nodes"].empty());
  EXPECT_EQ(c["layers"][1]["class_name"], "Dense");
  EXPECT_EQ(c["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"].dump(),
            R"(["input_layer",0,0])");
  EXPECT_EQ(c["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["shape"].dump(), "[null,4]");
}

TEST(FunctionalErrors, CycleIsReported) {
  clear_session();
  Tensor x = Input({2});
  auto layer = std::make_shared<test::ScaleBiasImpl>(1.0, "loop");
  auto node = std::make_shared<Node>();
  node->layer = layer;
  node->output_types = {x.type()};
  layer->inbound_nodes.push_back(node);
  Tensor y = Tensor::symbolic(x.type(), std::make_shared<KerasHistory>(node, 0));
  node->inputs = {y};  // the node consumes its own output
  std::string msg = error_message([&] { Model(x, y); });
  node->inputs.clear();  // break the ownership cycle
  EXPECT_THAT(msg, HasSubstr("from layer \"loop\" is part of a cycle."));
  EXPECT_THAT(msg, StartsWith("Tensor <Tensor shape=(None, 2) dtype=float32 symbolic>"));
}

TEST(FunctionalErrors, GraphDisconnected) {
  clear_session();
  Tensor x1 = Input({3}), x2 = Input({3});
  Tensor y = Add()({ScaleBias()(x1), ScaleBias()(x2)});
  EXPECT_THAT(error_message([&] { Model(x1, y); }),
              StartsWith("Graph disconnected: cannot find value for tensor <Tensor shape=(None, "
                         "3) dtype=float32 symbolic> (output 0 of layer \"input_layer_1\") at "
                         "layer \"scale_bias_1\". The following previous layers were accessed "
                         "without issue: ['scale_bias']."));
  EXPECT_THAT(error_message([&] { Model(x1, x2); }),
              HasSubstr("Graph disconnected: cannot find value for output tensor"));
}

TEST(FunctionalErrors, BadInputsAndOutputs) {
  clear_session();
  Tensor x = Input({3});
  Tensor h = ScaleBias()(x);
  EXPECT_THAT(error_message([&] { Model(h, ScaleBias()(h)); }),
              HasSubstr("inputs[0] must be a tensor returned by kiln::Input, but it is <Tensor "
                        "shape=(None, 3) dtype=float32 symbolic> made by layer \"scale_bias\""));
  EXPECT_THAT(error_message([&] {
                Model(ones({1, 3}), h);
              }),
              HasSubstr("inputs[0] must be a tensor returned by kiln::Input"));
  EXPECT_THAT(error_message([&] { Model(x, relu(h)); }),
              HasSubstr("outputs[0] (<Tensor shape=(None, 3) dtype=float32 symbolic>) was not "
                        "produced by a layer called on tensors from kiln::Input. kiln ops"));
  EXPECT_THAT(error_message([&] {
                Model(std::vector<Tensor>{x, x}, {h});
              }),
              HasSubstr("inputs[0] and inputs[1] are the same tensor"));
  EXPECT_THAT(error_message([&] { Model(std::vector<Tensor>{}, {h}); }),
              HasSubstr("`inputs` is empty"));
}

TEST(FunctionalErrors, DuplicateLayerNames) {
  clear_session();
  Tensor x = Input({3});
  Tensor y = ScaleBias(1, "same")(ScaleBias(1, "same")(x));
  EXPECT_THAT(error_message([&] { Model(x, y); }),
              HasSubstr("The name \"same\" is used 2 times in the model. All layer names should "
                        "be unique."));
}

TEST(FunctionalErrors, CallChecksInputCountAndShapes) {
  clear_session();
  Tensor x1 = Input({3}), x2 = Input({2});
  Model model({x1, x2}, {ScaleBias()(x1)}, "two");
  EXPECT_THAT(error_message([&] {
                model({ones({1, 3})});
              }),
              HasSubstr("Layer \"two\" expects 2 input(s), but it received 1 input tensors"));
  EXPECT_THAT(error_message([&] {
                model({ones({1, 3}), ones({1, 5})});
              }),
              HasSubstr("Model \"two\" was passed incompatible inputs. For input "
                        "\"input_layer_1\", expected shape (None, 2), but received instead a "
                        "tensor with shape (1, 5)."));
  EXPECT_THAT(error_message([&] {
                model({ones({3}), ones({1, 2})});
              }),
              HasSubstr("expected shape (None, 3), but received instead a tensor with shape "
                        "(3,)"));
}

}  // namespace
}  // namespace kiln
