// Every Keras argument of a built-in layer is honoured or refused (the argument walk): for
// every built-in layer and every entry of its get_config, a non-default value either
// round-trips through layer_from_config (it is read and honoured) or is refused with a
// kiln::Error naming the layer and the argument. (Channels-first and constraints:
// keras_arguments_test.cc.)
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/keras/saving/from_config.h"
#include "kiln/kiln.h"
#include "tests/saving/saving_test_util.h"

namespace kiln {
namespace {

// The smallest config of each built-in class (its required arguments).
Json minimal_config(const std::string& cls) {
  static const std::map<std::string, Json> required = {
      {"Activation", {{"activation", "relu"}}},
      {"Bidirectional", {{"layer", {{"class_name", "LSTM"}, {"config", {{"units", 2}}}}}}},
      {"Conv1D", {{"filters", 2}, {"kernel_size", 3}}},
      {"Conv2D", {{"filters", 2}, {"kernel_size", {3, 3}}}},
      {"Dense", {{"units", 3}}},
      {"Dropout", {{"rate", 0.5}}},
      {"Embedding", {{"input_dim", 5}, {"output_dim", 3}}},
      {"GRU", {{"units", 3}}},
      {"GRUCell", {{"units", 3}}},
      {"InputLayer", {{"batch_shape", {nullptr, 3}}}},
      {"LSTM", {{"units", 3}}},
      {"LSTMCell", {{"units", 3}}},
      {"MultiHeadAttention", {{"num_heads", 2}, {"key_dim", 3}}},
      {"PositionEmbedding", {{"sequence_length", 4}}},
      {"Reshape", {{"target_shape", {2, 2}}}},
      {"RNN", {{"cell", {{"class_name", "GRUCell"}, {"config", {{"units", 2}}}}}}},
      {"SimpleRNN", {{"units", 3}}},
      {"SimpleRNNCell", {{"units", 3}}},
      {"TimeDistributed", {{"layer", {{"class_name", "Dense"}, {"config", {{"units", 2}}}}}}},
  };
  auto it = required.find(cls);
  return it == required.end() ? Json::object() : it->second;
}

// A value other than `d` (the default the layer writes) for entry `key`, in the form kiln's
// get_config writes it; null when the entry is not walked (names, wrapped layers).
Json other_value(const std::string& key, const Json& d) {
  auto ends_with = [&](const std::string& s) {
    return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
  };
  if (key == "name" || key == "layer" || key == "backward_layer" || key == "cell") return nullptr;
  if (d.is_boolean()) return !d.get<bool>();
  if (d.is_number_integer()) return d.get<int64_t>() + 1;
  if (d.is_number_float()) return d.get<double>() == 0 ? 0.25 : d.get<double>() / 2;
  if (d.is_array()) {
    Json a = Json::array();
    for (const Json& e : d) a.push_back(e.is_number_integer() ? Json(e.get<int64_t>() + 1) : e);
    return a;
  }
  if (d.is_string()) {
    const std::string s = d.get<std::string>();
    if (key == "padding") return s == "valid" ? "same" : "valid";
    if (key == "data_format") return "channels_first";
    if (key == "activation" || key == "recurrent_activation") return s == "relu" ? "tanh" : "relu";
    if (key == "merge_mode") return "sum";
    if (key == "dtype") return s == "float64" ? "float32" : "float64";
    if (ends_with("initializer")) return s == "zeros" ? "ones" : "zeros";
    return "kiln_test_value";
  }
  if (key == "dtype" && d.is_object())  // Keras 3's serialized DTypePolicy
    return DTypePolicy(d["config"]["name"] == "float64" ? "float32" : "float64").serialize();
  if (d.is_null() || d.is_object()) {
    if (ends_with("_constraint")) return constraints::max_norm(3).config();
    if (ends_with("_regularizer")) return Json{{"class_name", "L2"}, {"config", {{"l2", 0.25}}}};
    if (key == "seed") return 7;
    if (key == "output_shape") return Json::array({5});
    if (key == "attention_axes") return Json::array({1});
    if (key == "noise_shape") return Json::array({1, 1});
    if (d.is_null()) return 3;
  }
  return nullptr;
}

TEST(ArgumentWalk, EveryConfigEntryIsHonouredOrRefused) {
  // What kiln refuses (each with a kiln::Error naming the layer and the argument); every other
  // entry of every built-in layer's config round-trips a non-default value.
  const std::set<std::string> expected_refused = {
      "Conv1D.groups",
      "Conv2D.groups",
      "Dropout.noise_shape",
      "GRU.stateful",
      "InputLayer.sparse",
      "LSTM.stateful",
      "LayerNormalization.rms_scaling",
      "MultiHeadAttention.attention_axes",
      "RNN.dtype",
      "RNN.stateful",
      "SimpleRNN.stateful",
  };
  std::set<std::string> refused, walked;
  for (const auto& [cls, factory] : saving_detail::builtin_layer_factories()) {
    if (cls == "Sequential" || cls == "Functional") continue;
    clear_session();
    Json spec{{"class_name", cls}, {"config", minimal_config(cls)}};
    spec["config"]["name"] = "walked";
    Json base = layer_from_config(spec)->get_config();
    for (const auto& [key, d] : base.items()) {
      Json v = other_value(key, d);
      if (v.is_null()) continue;
      const std::string id = cls + "." + key;
      walked.insert(id);
      Json config = base;
      config[key] = v;
      try {
        Json back = layer_from_config({{"class_name", cls}, {"config", config}})->get_config();
        EXPECT_EQ(back[key], v) << id << ": accepted but not written back (dropped?)";
      } catch (const Error& e) {
        refused.insert(id);
        const std::string msg = e.what();
        EXPECT_NE(msg.find("\"walked\""), std::string::npos) << id << ": " << msg;
        EXPECT_NE(msg.find(key), std::string::npos) << id << ": " << msg;
      }
    }
    // An argument the layer does not have at all is refused too.
    Json config = base;
    config["kiln_no_such_argument"] = 2;
    EXPECT_THROW(layer_from_config({{"class_name", cls}, {"config", config}}), Error) << cls;
    // Null is Keras' "default" for any entry and is accepted.
    config["kiln_no_such_argument"] = nullptr;
    EXPECT_NO_THROW(layer_from_config({{"class_name", cls}, {"config", config}})) << cls;
  }
  EXPECT_EQ(refused, expected_refused);
  // The walk saw the entries this issue is about.
  for (const char* id :
       {"Conv2D.data_format", "Conv1D.data_format", "MaxPooling2D.data_format",
        "GlobalAveragePooling1D.data_format", "Flatten.data_format", "Dense.kernel_constraint",
        "Embedding.embeddings_constraint", "LSTM.recurrent_constraint",
        "BatchNormalization.synchronized", "MultiHeadAttention.bias_constraint"})
    EXPECT_TRUE(walked.count(id)) << id;
}

TEST(ArgumentWalk, IssueExamplesFromConfig) {
  // Refused with the layer, the argument, the value and what to do.
  try {
    layer_from_config(Json::parse(R"({"class_name": "Conv2D", "config": {"name": "c7",
        "filters": 4, "kernel_size": [3, 3], "groups": 2}})"));
    FAIL() << "groups=2 was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* part : {"\"c7\"", "Conv2D", "groups=2", "groups=1", "Remove"}) {
      EXPECT_NE(msg.find(part), std::string::npos) << part << " in: " << msg;
    }
  }
  // Keras' defaults of entries kiln does not write are accepted (a Keras 3 InputLayer config).
  EXPECT_NO_THROW(layer_from_config(Json::parse(R"({"class_name": "InputLayer", "config":
      {"batch_shape": [null, 3], "dtype": "float32", "sparse": false, "ragged": false,
       "name": "input_layer"}})")));
  // BatchNormalization(synchronized=True): single process, the same statistics.
  BatchNormalization a(BatchNormalizationOptions{.synchronized = true}), b;
  Tensor x = random_uniform({6, 3}, 9, -1.0, 1.0);
  EXPECT_EQ(a(x, true).to_vector<float>(), b(x, true).to_vector<float>());
  EXPECT_EQ(a->get_config()["synchronized"], true);
}

}  // namespace
}  // namespace kiln
