// Every built-in class name -> its factory: the layers' from_config functions (each in its
// layer's .cc, beside get_config), the wrappers' with layer_from_config for the layers they
// hold, and the model factories (model_config.cc).
#include <nlohmann/json.hpp>

#include "kiln/keras/layers/layers.h"
#include "kiln/keras/models/input_layer.h"
#include "kiln/keras/saving/from_config.h"

namespace kiln::saving_detail {
namespace {

// How a wrapper's from_config makes the layers it holds: through the registry.
Layer inner_from_config(const Json& spec) { return layer_from_config(spec); }

// A factory for a from_config function that serves several classes.
LayerFactory for_class(Layer (*from_config)(const Json&, const std::string&),
                       std::string class_name) {
  return [from_config, class_name](const Json& j) { return from_config(j, class_name); };
}

}  // namespace

const std::map<std::string, LayerFactory>& builtin_layer_factories() {
  static const std::map<std::string, LayerFactory> table = {
      {"Activation", activation_from_config},
      {"Add", for_class(merge_from_config, "Add")},
      {"Average", for_class(merge_from_config, "Average")},
      {"AveragePooling1D", for_class(pooling1d_from_config, "AveragePooling1D")},
      {"AveragePooling2D", for_class(pooling2d_from_config, "AveragePooling2D")},
      {"BatchNormalization", batch_normalization_from_config},
      {"Bidirectional",
       [](const Json& j) { return bidirectional_from_config(j, inner_from_config); }},
      {"Concatenate", concatenate_from_config},
      {"Conv1D", conv1d_from_config},
      {"Conv2D", conv2d_from_config},
      {"Dense", dense_from_config},
      {"Dropout", dropout_from_config},
      {"Embedding", embedding_from_config},
      {"Flatten", flatten_from_config},
      {"Functional", functional_from_config},
      {"GRU", for_class(recurrent_from_config, "GRU")},
      {"GlobalAveragePooling1D", for_class(global_pooling1d_from_config, "GlobalAveragePooling1D")},
      {"GlobalAveragePooling2D", for_class(global_pooling2d_from_config, "GlobalAveragePooling2D")},
      {"GlobalMaxPooling1D", for_class(global_pooling1d_from_config, "GlobalMaxPooling1D")},
      {"GlobalMaxPooling2D", for_class(global_pooling2d_from_config, "GlobalMaxPooling2D")},
      {"InputLayer", input_layer_from_config},
      {"LSTM", for_class(recurrent_from_config, "LSTM")},
      {"LSTMCell", for_class(recurrent_cell_from_config, "LSTM")},
      {"GRUCell", for_class(recurrent_cell_from_config, "GRU")},
      {"RNN", [](const Json& j) { return rnn_from_config(j, inner_from_config); }},
      {"SimpleRNNCell", for_class(recurrent_cell_from_config, "SimpleRNN")},
      {"LayerNormalization", layer_normalization_from_config},
      {"Masking", masking_from_config},
      {"MaxPooling1D", for_class(pooling1d_from_config, "MaxPooling1D")},
      {"MaxPooling2D", for_class(pooling2d_from_config, "MaxPooling2D")},
      {"Maximum", for_class(merge_from_config, "Maximum")},
      {"Minimum", for_class(merge_from_config, "Minimum")},
      {"MultiHeadAttention", multi_head_attention_from_config},
      {"Multiply", for_class(merge_from_config, "Multiply")},
      {"PositionEmbedding", position_embedding_from_config},
      {"Reshape", reshape_from_config},
      {"Sequential", sequential_from_config},
      {"SimpleRNN", for_class(recurrent_from_config, "SimpleRNN")},
      {"Subtract", for_class(merge_from_config, "Subtract")},
      {"TimeDistributed",
       [](const Json& j) { return time_distributed_from_config(j, inner_from_config); }},
  };
  return table;
}

}  // namespace kiln::saving_detail
