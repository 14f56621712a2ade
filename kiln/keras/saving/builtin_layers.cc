// from_config for every built-in layer: each factory reads back what the layer's get_config
// writes (keras/layers/*.cc) and calls the layer's constructor with it.
#include <nlohmann/json.hpp>

#include "kiln/keras/layers/layers.h"
#include "kiln/keras/models/input_layer.h"
#include "kiln/keras/saving/from_config.h"

namespace kiln::saving_detail {

// ---------------------------------------------------------------- shared entries

Initializer initializer_entry(const ConfigReader& c, const std::string& key,
                              const Initializer& fallback) {
  if (!c.has(key)) return fallback;
  const Json& v = c.at(key);
  std::string name;
  std::map<std::string, double> args;
  std::optional<int64_t> seed;
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    // Keras' serialized form: every entry of its config is honoured or refused.
    name = v["class_name"].get<std::string>();
    if (v.contains("config") && !v["config"].is_null()) {
      if (!v["config"].is_object())
        c.fail(key, fmt::format("has a config that is not an object: {}", v["config"].dump()));
      for (const auto& [k, x] : v["config"].items()) {
        if (k == "seed") {
          if (x.is_number_integer())
            seed = x.get<int64_t>();
          else if (!x.is_null())
            c.fail(key, fmt::format("has a seed that is not an integer or null: {}", x.dump()));
        } else if (x.is_number()) {
          args[k] = x.get<double>();
        } else {
          c.fail(key, fmt::format("has an argument \"{}\" kiln's initializers cannot take: {}", k,
                                  x.dump()));
        }
      }
    }
  } else {
    c.fail(key, fmt::format("should be an initializer name such as \"glorot_uniform\", got {}",
                            v.dump()));
  }
  try {
    return initializer_from_keras(name, args, seed);
  } catch (const Error& e) {
    c.fail(key, e.what());
  }
}

Regularizer regularizer_entry(const ConfigReader& c, const std::string& key) {
  if (!c.has(key)) return {};
  const Json& v = c.at(key);
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string() ||
      !v.contains("config") || !v["config"].is_object())
    c.fail(key, fmt::format("should be null or {{\"class_name\": \"L1\" | \"L2\" | \"L1L2\", "
                            "\"config\": {{...}}}}, got {}",
                            v.dump()));
  const std::string kind = v["class_name"].get<std::string>();
  ConfigReader r(v["config"], kind);
  double l1 = r.get<double>("l1", 0.0), l2 = r.get<double>("l2", 0.0);
  if (kind == "L1") return regularizers::l1(r.get<double>("l1"));
  if (kind == "L2") return regularizers::l2(r.get<double>("l2"));
  if (kind == "L1L2") return regularizers::l1_l2(l1, l2);
  c.fail(key,
         fmt::format("has an unknown regularizer class \"{}\" (expected L1, L2 or L1L2)", kind));
}

Constraint constraint_entry(const ConfigReader& c, const std::string& key) {
  if (!c.has(key)) return {};
  try {
    return Constraint::from_config(c.at(key));
  } catch (const Error& e) {
    c.fail(key, e.what());
  }
}

DType dtype_entry(const ConfigReader& c, const std::string& key) {
  if (!c.has(key)) return DType::f32;
  const Json& v = c.at(key);
  // Keras 3 may write a DTypePolicy object: {"class_name": "DTypePolicy", "config": {"name"}}.
  std::string name;
  if (v.is_string())
    name = v.get<std::string>();
  else if (v.is_object() && v.contains("config") && v["config"].contains("name") &&
           v["config"]["name"].is_string())
    name = v["config"]["name"].get<std::string>();
  else
    c.fail(key, fmt::format("should be a dtype name such as \"float32\", got {}", v.dump()));
  try {
    return parse_dtype(name);
  } catch (const Error& e) {
    c.fail(key, e.what());
  }
}

Shape shape_entry(const ConfigReader& c, const std::string& key) {
  const Json& v = c.at(key);
  if (!v.is_array()) c.fail(key, fmt::format("should be a list of dimensions, got {}", v.dump()));
  if (v.size() > size_t(kMaxRank))
    c.fail(key, fmt::format("has {} dimensions; kiln supports at most {}", v.size(), kMaxRank));
  Shape s;
  for (const Json& d : v) {
    if (d.is_null())
      s.push_back(kUnknownDim);
    else if (d.is_number_integer() && d.get<int64_t>() >= 0)
      s.push_back(d.get<int64_t>());
    else
      c.fail(key, fmt::format("should hold sizes >= 0 or null, got {}", v.dump()));
  }
  return s;
}

namespace {

// A Keras "tuple" entry of one integer ([3]) or the integer itself (3).
int64_t single(const ConfigReader& c, const std::string& key, int64_t fallback) {
  if (!c.has(key)) return fallback;
  const Json& v = c.at(key);
  if (v.is_array() && v.size() == 1 && v[0].is_number_integer()) return v[0].get<int64_t>();
  return c.get<int64_t>(key);
}

// A (height, width) entry: [2, 2], or one integer for both.
Axes pair(const ConfigReader& c, const std::string& key, Axes fallback) {
  if (!c.has(key)) return fallback;
  if (c.at(key).is_number_integer()) return {c.get<int64_t>(key), c.get<int64_t>(key)};
  return c.get<Axes>(key);
}

// The entries every weighted layer's options share.
template <typename Options>
void common_weights(const ConfigReader& c, Options& o) {
  o.name = c.name();
  o.dtype = dtype_entry(c);
  o.kernel_initializer = initializer_entry(c, "kernel_initializer", o.kernel_initializer);
  o.bias_initializer = initializer_entry(c, "bias_initializer", o.bias_initializer);
  o.kernel_regularizer = regularizer_entry(c, "kernel_regularizer");
  o.bias_regularizer = regularizer_entry(c, "bias_regularizer");
  o.activity_regularizer = regularizer_entry(c, "activity_regularizer");
  o.kernel_constraint = constraint_entry(c, "kernel_constraint");
  o.bias_constraint = constraint_entry(c, "bias_constraint");
}

// Keras' data_format entry: "channels_last" or "channels_first"; absent or null: channels_last
// (Keras' image_data_format() default).
std::string data_format_entry(const ConfigReader& c) {
  return c.get<std::string>("data_format", "channels_last");
}

Layer dense(const Json& config) {
  ConfigReader c(config, "Dense");
  DenseOptions o;
  common_weights(c, o);
  o.activation = c.get<std::string>("activation", o.activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  return Dense(c.get<int64_t>("units"), o);
}

Layer conv2d(const Json& config) {
  ConfigReader c(config, "Conv2D");
  Conv2DOptions o;
  common_weights(c, o);
  o.strides = pair(c, "strides", o.strides);
  o.padding = c.get<std::string>("padding", o.padding);
  o.dilation_rate = pair(c, "dilation_rate", o.dilation_rate);
  o.activation = c.get<std::string>("activation", o.activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  o.data_format = data_format_entry(c);
  return Conv2D(c.get<int64_t>("filters"), pair(c, "kernel_size", {}), o);
}

Layer conv1d(const Json& config) {
  ConfigReader c(config, "Conv1D");
  Conv1DOptions o;
  common_weights(c, o);
  o.strides = single(c, "strides", o.strides);
  o.padding = c.get<std::string>("padding", o.padding);
  o.dilation_rate = single(c, "dilation_rate", o.dilation_rate);
  o.activation = c.get<std::string>("activation", o.activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  o.data_format = data_format_entry(c);
  return Conv1D(c.get<int64_t>("filters"), single(c, "kernel_size", 0), o);
}

Layer embedding(const Json& config) {
  ConfigReader c(config, "Embedding");
  EmbeddingOptions o;
  o.name = c.name();
  o.dtype = dtype_entry(c);
  o.embeddings_initializer =
      initializer_entry(c, "embeddings_initializer", o.embeddings_initializer);
  o.embeddings_regularizer = regularizer_entry(c, "embeddings_regularizer");
  o.embeddings_constraint = constraint_entry(c, "embeddings_constraint");
  o.activity_regularizer = regularizer_entry(c, "activity_regularizer");
  o.mask_zero = c.get<bool>("mask_zero", o.mask_zero);
  return Embedding(c.get<int64_t>("input_dim"), c.get<int64_t>("output_dim"), o);
}

Layer position_embedding(const Json& config) {
  ConfigReader c(config, "PositionEmbedding");
  PositionEmbeddingOptions o;
  o.name = c.name();
  o.dtype = dtype_entry(c);
  o.initializer = initializer_entry(c, "initializer", o.initializer);
  return PositionEmbedding(c.get<int64_t>("sequence_length"), o);
}

// The arguments of a recurrent step (a cell's config; a recurrent layer's config has them too).
RecurrentOptions cell_options(const ConfigReader& c) {
  RecurrentOptions o;
  common_weights(c, o);
  o.recurrent_initializer = initializer_entry(c, "recurrent_initializer", o.recurrent_initializer);
  o.recurrent_regularizer = regularizer_entry(c, "recurrent_regularizer");
  o.recurrent_constraint = constraint_entry(c, "recurrent_constraint");
  o.activation = c.get<std::string>("activation", o.activation);
  o.recurrent_activation = c.get<std::string>("recurrent_activation", o.recurrent_activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  o.unit_forget_bias = c.get<bool>("unit_forget_bias", o.unit_forget_bias);
  o.reset_after = c.get<bool>("reset_after", o.reset_after);
  o.dropout = c.get<double>("dropout", o.dropout);
  o.recurrent_dropout = c.get<double>("recurrent_dropout", o.recurrent_dropout);
  o.seed = c.optional<int64_t>("seed");
  return o;
}

// The sequence options of a recurrent layer or an RNN (RecurrentOptions or RNNOptions);
// stateful is refused.
template <typename Options>
void read_sequence_options(const ConfigReader& c, Options& o) {
  o.return_sequences = c.get<bool>("return_sequences", o.return_sequences);
  o.return_state = c.get<bool>("return_state", o.return_state);
  o.go_backwards = c.get<bool>("go_backwards", o.go_backwards);
  o.zero_output_for_mask = c.get<bool>("zero_output_for_mask", o.zero_output_for_mask);
  o.unroll = c.get<bool>("unroll", o.unroll);
  if (c.get<bool>("stateful", false)) c.fail("stateful", "is true; kiln has no stateful RNNs");
}

Layer recurrent(const Json& config, const std::string& class_name) {
  ConfigReader c(config, class_name);
  RecurrentOptions o = cell_options(c);
  read_sequence_options(c, o);
  const int64_t units = c.get<int64_t>("units");
  if (class_name == "LSTM") return LSTM(units, o);
  if (class_name == "GRU") return GRU(units, o);
  return SimpleRNN(units, o);
}

// SimpleRNNCell / LSTMCell / GRUCell: `kind` is the layer of the same step.
Layer recurrent_cell(const Json& config, const std::string& kind) {
  ConfigReader c(config, kind + "Cell");
  RecurrentOptions o = cell_options(c);
  const int64_t units = c.get<int64_t>("units");
  if (kind == "LSTM") return LSTMCell(units, o);
  if (kind == "GRU") return GRUCell(units, o);
  return SimpleRNNCell(units, o);
}

Layer multi_head_attention(const Json& config) {
  ConfigReader c(config, "MultiHeadAttention");
  MultiHeadAttentionOptions o;
  common_weights(c, o);
  o.value_dim = c.optional<int64_t>("value_dim");
  o.dropout = c.get<double>("dropout", o.dropout);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  if (c.has("output_shape")) o.output_shape = single(c, "output_shape", 0);
  if (c.has("attention_axes"))
    c.fail("attention_axes", "is set; kiln attends over the sequence axis only (use null)");
  o.seed = c.optional<int64_t>("seed");
  o.use_causal_mask = c.get<bool>("use_causal_mask", o.use_causal_mask);
  o.return_attention_scores = c.get<bool>("return_attention_scores", o.return_attention_scores);
  return MultiHeadAttention(c.get<int64_t>("num_heads"), c.get<int64_t>("key_dim"), o);
}

Layer batch_normalization(const Json& config) {
  ConfigReader c(config, "BatchNormalization");
  BatchNormalizationOptions o;
  o.name = c.name();
  o.dtype = dtype_entry(c);
  o.axis = c.get<int>("axis", o.axis);
  o.momentum = c.get<double>("momentum", o.momentum);
  o.epsilon = c.get<double>("epsilon", o.epsilon);
  o.center = c.get<bool>("center", o.center);
  o.scale = c.get<bool>("scale", o.scale);
  o.beta_initializer = initializer_entry(c, "beta_initializer", o.beta_initializer);
  o.gamma_initializer = initializer_entry(c, "gamma_initializer", o.gamma_initializer);
  o.moving_mean_initializer =
      initializer_entry(c, "moving_mean_initializer", o.moving_mean_initializer);
  o.moving_variance_initializer =
      initializer_entry(c, "moving_variance_initializer", o.moving_variance_initializer);
  o.beta_regularizer = regularizer_entry(c, "beta_regularizer");
  o.gamma_regularizer = regularizer_entry(c, "gamma_regularizer");
  o.beta_constraint = constraint_entry(c, "beta_constraint");
  o.gamma_constraint = constraint_entry(c, "gamma_constraint");
  o.synchronized = c.get<bool>("synchronized", o.synchronized);
  return BatchNormalization(o);
}

Layer layer_normalization(const Json& config) {
  ConfigReader c(config, "LayerNormalization");
  LayerNormalizationOptions o;
  o.name = c.name();
  o.dtype = dtype_entry(c);
  if (c.has("axis"))
    o.axis = c.at("axis").is_array() ? c.get<Axes>("axis") : Axes{c.get<int64_t>("axis")};
  o.epsilon = c.get<double>("epsilon", o.epsilon);
  o.center = c.get<bool>("center", o.center);
  o.scale = c.get<bool>("scale", o.scale);
  if (c.get<bool>("rms_scaling", false)) c.fail("rms_scaling", "is true; kiln has no RMS scaling");
  o.beta_initializer = initializer_entry(c, "beta_initializer", o.beta_initializer);
  o.gamma_initializer = initializer_entry(c, "gamma_initializer", o.gamma_initializer);
  o.beta_regularizer = regularizer_entry(c, "beta_regularizer");
  o.gamma_regularizer = regularizer_entry(c, "gamma_regularizer");
  o.beta_constraint = constraint_entry(c, "beta_constraint");
  o.gamma_constraint = constraint_entry(c, "gamma_constraint");
  return LayerNormalization(o);
}

Layer pooling2d(const Json& config, const std::string& class_name) {
  ConfigReader c(config, class_name);
  Pooling2DOptions o;
  o.name = c.name();
  o.strides = pair(c, "strides", {});
  o.padding = c.get<std::string>("padding", o.padding);
  o.data_format = data_format_entry(c);
  Axes pool = pair(c, "pool_size", {2, 2});
  if (class_name == "MaxPooling2D") return MaxPooling2D(pool, o);
  return AveragePooling2D(pool, o);
}

Layer pooling1d(const Json& config, const std::string& class_name) {
  ConfigReader c(config, class_name);
  Pooling1DOptions o;
  o.name = c.name();
  if (c.has("strides")) o.strides = single(c, "strides", 0);
  o.padding = c.get<std::string>("padding", o.padding);
  o.data_format = data_format_entry(c);
  int64_t pool = single(c, "pool_size", 2);
  if (class_name == "MaxPooling1D") return MaxPooling1D(pool, o);
  return AveragePooling1D(pool, o);
}

template <typename L, typename Options>
Layer global_pooling(const Json& config, const char* class_name) {
  ConfigReader c(config, class_name);
  Options o;
  o.name = c.name();
  o.keepdims = c.get<bool>("keepdims", o.keepdims);
  o.data_format = data_format_entry(c);
  return L(o);
}

template <typename L>
Layer merge(const Json& config, const char* class_name) {
  ConfigReader c(config, class_name);
  return L(MergeOptions{.name = c.name()});
}

Layer concatenate(const Json& config) {
  ConfigReader c(config, "Concatenate");
  return Concatenate(ConcatenateOptions{.axis = c.get<int>("axis", -1), .name = c.name()});
}

Layer activation(const Json& config) {
  ConfigReader c(config, "Activation");
  return Activation(c.get<std::string>("activation"), ActivationOptions{.name = c.name()});
}

Layer dropout(const Json& config) {
  ConfigReader c(config, "Dropout");
  if (c.has("noise_shape")) c.fail("noise_shape", "is set; kiln's Dropout has no noise_shape");
  return Dropout(c.get<double>("rate"),
                 DropoutOptions{.seed = c.optional<int64_t>("seed"), .name = c.name()});
}

Layer masking(const Json& config) {
  ConfigReader c(config, "Masking");
  return Masking(MaskingOptions{.mask_value = c.get<double>("mask_value", 0.0), .name = c.name()});
}

Layer flatten(const Json& config) {
  ConfigReader c(config, "Flatten");
  return Flatten(FlattenOptions{.data_format = data_format_entry(c), .name = c.name()});
}

Layer reshape(const Json& config) {
  ConfigReader c(config, "Reshape");
  return Reshape(c.get<Axes>("target_shape"), ReshapeOptions{.name = c.name()});
}

// The inner layer of a wrapper: {"class_name", "config"} under `key`.
Layer inner_layer(const ConfigReader& c, const std::string& key) {
  try {
    return layer_from_config(c.at(key));
  } catch (const Error& e) {
    c.fail(key, fmt::format("does not describe a layer: {}", e.what()));
  }
}

Layer time_distributed(const Json& config) {
  ConfigReader c(config, "TimeDistributed");
  return TimeDistributed(inner_layer(c, "layer"), TimeDistributedOptions{.name = c.name()});
}

Layer bidirectional(const Json& config) {
  ConfigReader c(config, "Bidirectional");
  BidirectionalOptions o;
  o.name = c.name();
  o.merge_mode = c.get<std::string>("merge_mode", o.merge_mode);
  if (c.has("backward_layer")) o.backward_layer = inner_layer(c, "backward_layer");
  // The constructor names its copy of the layer "forward_<name>": give it back the name the
  // layer had before, so the rebuilt forward layer has the saved name.
  Json forward = c.at("layer");
  if (forward.is_object() && forward.contains("config") && forward["config"].is_object()) {
    std::string name = forward["config"].value("name", "");
    if (name.rfind("forward_", 0) == 0) forward["config"]["name"] = name.substr(8);
  }
  ConfigReader f(Json{{"name", c.name()}, {"layer", forward}}, "Bidirectional");
  return Bidirectional(inner_layer(f, "layer"), o);
}

}  // namespace

Layer rnn_from_config(const Json& config, const Layer* given_cell) {
  ConfigReader c(config, "RNN");
  RNNOptions o;
  o.name = c.name();
  read_sequence_options(c, o);
  if (given_cell == nullptr && c.at("cell").is_array())
    c.fail("cell",
           "is a list of cells (StackedRNNCells); kiln's RNN runs one cell: stack RNN "
           "layers with return_sequences=True instead");
  RNN rnn(given_cell != nullptr ? *given_cell : inner_layer(c, "cell"), o);
  // The RNN computes in its cell's dtype.
  const DType cell_dtype =
      static_cast<const RecurrentCellImpl&>(rnn->cell().impl()).loop().options().dtype;
  if (c.has("dtype") && !c.at("dtype").is_null() && dtype_entry(c) != cell_dtype)
    c.fail("dtype", "differs from its cell's; give the dtype to the cell (LSTMCell(..., dtype=))");
  return rnn;
}

namespace {

Layer input_layer(const Json& config) {
  ConfigReader c(config, "InputLayer");
  Shape batch = shape_entry(c, "batch_shape");
  if (batch.rank() == 0) c.fail("batch_shape", "is empty; it should start with the batch axis");
  return Layer(std::make_shared<InputLayerImpl>(batch, dtype_entry(c), c.name()));
}

}  // namespace

const std::map<std::string, LayerFactory>& builtin_layer_factories() {
  static const std::map<std::string, LayerFactory> table = {
      {"Activation", activation},
      {"Add", [](const Json& j) { return merge<Add>(j, "Add"); }},
      {"Average", [](const Json& j) { return merge<Average>(j, "Average"); }},
      {"AveragePooling1D", [](const Json& j) { return pooling1d(j, "AveragePooling1D"); }},
      {"AveragePooling2D", [](const Json& j) { return pooling2d(j, "AveragePooling2D"); }},
      {"BatchNormalization", batch_normalization},
      {"Bidirectional", bidirectional},
      {"Concatenate", concatenate},
      {"Conv1D", conv1d},
      {"Conv2D", conv2d},
      {"Dense", dense},
      {"Dropout", dropout},
      {"Embedding", embedding},
      {"Flatten", flatten},
      {"Functional", functional_from_config},
      {"GRU", [](const Json& j) { return recurrent(j, "GRU"); }},
      {"GlobalAveragePooling1D",
       [](const Json& j) {
         return global_pooling<GlobalAveragePooling1D, GlobalPooling1DOptions>(
             j, "GlobalAveragePooling1D");
       }},
      {"GlobalAveragePooling2D",
       [](const Json& j) {
         return global_pooling<GlobalAveragePooling2D, GlobalPooling2DOptions>(
             j, "GlobalAveragePooling2D");
       }},
      {"GlobalMaxPooling1D",
       [](const Json& j) {
         return global_pooling<GlobalMaxPooling1D, GlobalPooling1DOptions>(j, "GlobalMaxPooling1D");
       }},
      {"GlobalMaxPooling2D",
       [](const Json& j) {
         return global_pooling<GlobalMaxPooling2D, GlobalPooling2DOptions>(j, "GlobalMaxPooling2D");
       }},
      {"InputLayer", input_layer},
      {"LSTM", [](const Json& j) { return recurrent(j, "LSTM"); }},
      {"LSTMCell", [](const Json& j) { return recurrent_cell(j, "LSTM"); }},
      {"GRUCell", [](const Json& j) { return recurrent_cell(j, "GRU"); }},
      {"RNN", [](const Json& j) { return rnn_from_config(j); }},
      {"SimpleRNNCell", [](const Json& j) { return recurrent_cell(j, "SimpleRNN"); }},
      {"LayerNormalization", layer_normalization},
      {"Masking", masking},
      {"MaxPooling1D", [](const Json& j) { return pooling1d(j, "MaxPooling1D"); }},
      {"MaxPooling2D", [](const Json& j) { return pooling2d(j, "MaxPooling2D"); }},
      {"Maximum", [](const Json& j) { return merge<Maximum>(j, "Maximum"); }},
      {"Minimum", [](const Json& j) { return merge<Minimum>(j, "Minimum"); }},
      {"MultiHeadAttention", multi_head_attention},
      {"Multiply", [](const Json& j) { return merge<Multiply>(j, "Multiply"); }},
      {"PositionEmbedding", position_embedding},
      {"Reshape", reshape},
      {"Sequential", sequential_from_config},
      {"SimpleRNN", [](const Json& j) { return recurrent(j, "SimpleRNN"); }},
      {"Subtract", [](const Json& j) { return merge<Subtract>(j, "Subtract"); }},
      {"TimeDistributed", time_distributed},
  };
  return table;
}

}  // namespace kiln::saving_detail
