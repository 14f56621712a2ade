// layer_from_config: every built-in layer class comes back with the same config, custom layers
// come back through the registry and custom_objects, and bad configs are clear errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "kiln/keras/saving/from_config.h"
#include "kiln/kiln.h"
#include "tests/saving/saving_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::scaled_from_config;
using test::ScaledImpl;
using ::testing::HasSubstr;

// One layer of every built-in class, with options away from their defaults where a class has
// them, so a factory that dropped an entry would change the config.
std::vector<Layer> one_of_each() {
  RecurrentOptions rnn{.recurrent_activation = "hard_sigmoid",
                       .use_bias = false,
                       .kernel_regularizer = regularizers::l2(0.01),
                       .dropout = 0.25,
                       .seed = 7,
                       .return_sequences = true,
                       .go_backwards = true};
  return {
      Dense(3, {.activation = "relu",
                .kernel_initializer = "he_normal",
                .kernel_regularizer = regularizers::l1_l2(0.1, 0.2),
                .activity_regularizer = regularizers::l1(0.5),
                .dtype = DType::f64}),
      Conv2D(4, {3, 2}, {.strides = {2, 1}, .padding = "same", .use_bias = false}),
      Conv1D(5, 3, {.padding = "causal", .dilation_rate = 2, .activation = "tanh"}),
      Dropout(0.3, {.seed = 11}),
      Embedding(10, 4, {.mask_zero = true}),
      PositionEmbedding(12),
      Masking({.mask_value = -1.5}),
      Add(),
      Subtract(),
      Multiply(),
      Average(),
      Maximum(),
      Minimum(),
      Concatenate({.axis = 1}),
      BatchNormalization({.axis = 1, .momentum = 0.9, .center = false}),
      LayerNormalization({.axis = {-2, -1}, .epsilon = 1e-5}),
      MaxPooling2D({3, 3}, {.strides = {1, 2}, .padding = "same"}),
      AveragePooling2D({2, 1}),
      MaxPooling1D(3, {.strides = 2}),
      AveragePooling1D(2, {.padding = "same"}),
      GlobalAveragePooling2D({.keepdims = true}),
      GlobalMaxPooling2D(),
      GlobalAveragePooling1D(),
      GlobalMaxPooling1D({.keepdims = true}),
      SimpleRNN(4, rnn),
      LSTM(3, {.unit_forget_bias = false, .return_state = true}),
      GRU(2, {.reset_after = false, .recurrent_dropout = 0.1}),
      MultiHeadAttention(
          2, 4,
          {.value_dim = 3, .dropout = 0.1, .output_shape = 6, .seed = 3, .use_causal_mask = true}),
      Flatten(),
      Reshape({2, -1}),
      Activation("gelu"),
      TimeDistributed(Dense(2)),
      Bidirectional(LSTM(3, {.return_sequences = true}), {.merge_mode = "sum"}),
      SimpleRNNCell(3),
      LSTMCell(2, {.unit_forget_bias = false}),
      GRUCell(2, {.reset_after = false}),
      RNN(LSTMCell(2), {.return_sequences = true, .go_backwards = true}),
      Sequential({Dense(2), Dense(1)}, Shape{3}),
  };
}

TEST(LayerFromConfig, EveryBuiltInLayerComesBackWithTheSameConfig) {
  clear_session();
  std::set<std::string> classes;
  for (const Layer& layer : one_of_each()) {
    Json spec = serialize_layer(layer);
    Layer back = layer_from_config(spec);
    EXPECT_EQ(back->class_name(), layer->class_name());
    EXPECT_EQ(back->get_config(), layer->get_config()) << layer->class_name();
    classes.insert(layer->class_name());
  }
  // Every built-in class but Functional (its own test below) and InputLayer (rebuilt as part of
  // a functional model) is in the list.
  std::set<std::string> builtin;
  for (const auto& [name, factory] : saving_detail::builtin_layer_factories())
    if (name != "Functional" && name != "InputLayer") builtin.insert(name);
  EXPECT_EQ(classes, builtin);
}

TEST(LayerFromConfig, TrainableFlagComesBack) {
  Dense d(2);
  d->set_trainable(false);
  EXPECT_FALSE(layer_from_config(serialize_layer(d))->trainable());
}

TEST(LayerFromConfig, FunctionalModelComesBackWithTheSameConfig) {
  clear_session();
  Tensor a = Input({4}, DType::f32, "a"), b = Input({4}, DType::f32, "b");
  Dense shared(3, {.name = "shared"});
  Tensor y = Concatenate()({shared(a), shared(b)});
  Model m({a, b}, {Dense(1)(y), y}, "two_in_two_out");
  Layer back = layer_from_config(serialize_layer(m));
  EXPECT_EQ(back->get_config(), m->get_config());
}

TEST(LayerFromConfig, CustomLayerNeedsAFactory) {
  Layer layer(std::make_shared<ScaledImpl>(2.5, "scale"));
  Json spec = serialize_layer(layer);
  std::string e = error_of([&] { layer_from_config(spec); });
  EXPECT_THAT(e, HasSubstr("unknown layer class \"Scaled\" (layer \"scale\")"));
  EXPECT_THAT(e, HasSubstr("register_layer_class"));

  Layer from_objects = layer_from_config(spec, {{"Scaled", scaled_from_config}});
  EXPECT_EQ(from_objects->get_config(), layer->get_config());

  register_layer_class("Scaled", scaled_from_config);
  EXPECT_EQ(layer_from_config(spec)->get_config(), layer->get_config());
  unregister_layer_class("Scaled");
  EXPECT_THAT(error_of([&] { layer_from_config(spec); }), HasSubstr("unknown layer class"));
}

TEST(LayerFromConfig, CustomLayerInsideAWrapperUsesTheCallsCustomObjects) {
  TimeDistributed td(Layer(std::make_shared<ScaledImpl>(3, "inner")));
  Layer back = layer_from_config(serialize_layer(td), {{"Scaled", scaled_from_config}});
  EXPECT_EQ(back->get_config(), td->get_config());
}

TEST(LayerFromConfig, BuiltInNamesCannotBeRegistered) {
  EXPECT_THAT(error_of([] { register_layer_class("Dense", scaled_from_config); }),
              HasSubstr("\"Dense\" is a built-in layer class"));
}

TEST(LayerFromConfig, BadEntriesNameTheLayerAndTheEntry) {
  Json spec = serialize_layer(Dense(3, {.name = "d"}));
  spec["config"]["units"] = "ten";
  EXPECT_EQ(error_of([&] { layer_from_config(spec); }),
            "layer \"d\" (Dense): config entry \"units\" should be an integer, got \"ten\"");
  spec["config"].erase("units");
  EXPECT_EQ(error_of([&] { layer_from_config(spec); }),
            "layer \"d\" (Dense): config entry \"units\" is missing");
  spec = serialize_layer(Dense(3, {.name = "d"}));
  spec["config"]["kernel_initializer"] = "nonsense";
  EXPECT_THAT(error_of([&] { layer_from_config(spec); }),
              HasSubstr("layer \"d\" (Dense): config entry \"kernel_initializer\" unknown "
                        "initializer \"nonsense\""));
  EXPECT_THAT(error_of([] { layer_from_config(Json::array()); }),
              HasSubstr("a layer should be serialized as {\"class_name\""));
}

TEST(LayerFromConfig, FunctionalConfigNamingAMissingLayerIsAnError) {
  clear_session();
  Tensor x = Input({2}, DType::f32, "x");
  Model m(x, Dense(1, {.name = "out"})(x));
  Json spec = serialize_layer(m);
  spec["config"]["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"][0] =
      "ghost";
  EXPECT_THAT(error_of([&] { layer_from_config(spec); }),
              HasSubstr("names layer \"ghost\", which is not in the model"));
}

}  // namespace
}  // namespace kiln
