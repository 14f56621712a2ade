// Keras 3's serialized configs <-> kiln's (keras/saving/keras_config.h).
#include "kiln/keras/saving/keras_config.h"

#include <fmt/format.h>

#include <set>

#include "kiln/keras/saving/from_config.h"
#include "kiln/keras/saving/keras_weights.h"

namespace kiln::saving_detail {
namespace {

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw Error(fmt::format("{} {}", where, what));
}

const std::set<std::string> kMergeLayers = {"Add",     "Subtract", "Multiply",    "Average",
                                            "Maximum", "Minimum",  "Concatenate", "Dot"};

bool keras_module(const Json& spec) {
  if (!spec.contains("module") || spec["module"].is_null()) return true;
  if (!spec["module"].is_string()) return false;
  const std::string m = spec["module"].get<std::string>();
  return m == "keras" || m.rfind("keras.", 0) == 0;
}

// Does kiln have a factory for the custom class `name` (custom objects of the call, enclosing
// scopes, the registry; never a built-in class of the same name)?
bool has_custom_factory(const std::string& name, const CustomObjects& custom_objects) {
  if (custom_objects.count(name)) return true;
  return has_custom_layer_factory(name);
}

// A functional model's [name, node, tensor] entry written alone for one input or output.
Json endpoint_list(const Json& j) {
  if (j.is_array() && j.size() == 3 && j[0].is_string()) return Json::array({j});
  return j;
}

Json convert_functional(const Json& config, const CustomObjects& custom, const std::string& where) {
  Json out = config;
  if (!out.contains("layers") || !out["layers"].is_array()) refuse(where, "has no \"layers\" list");
  for (size_t i = 0; i < out["layers"].size(); ++i) {
    Json& layer = out["layers"][i];
    const std::string lw = fmt::format("{}.layers[{}]", where, i);
    Json converted = kiln_layer_spec_from_keras(layer, custom);
    if (layer.contains("inbound_nodes") && layer["inbound_nodes"].is_array()) {
      for (size_t n = 0; n < layer["inbound_nodes"].size(); ++n) {
        const Json& node = layer["inbound_nodes"][n];
        if (!node.is_object() || !node.contains("kwargs")) continue;
        for (const auto& [key, value] : node["kwargs"].items()) {
          if (value.is_null()) continue;
          if (converted["class_name"] == "MultiHeadAttention" && value.is_boolean() &&
              (key == "use_causal_mask" || key == "return_attention_scores")) {
            // Call-time flags of Keras, construction-time options of kiln's layer: every node
            // must agree (kiln's layer computes one way).
            Json& option = converted["config"][key];
            if (n > 0 && option.is_boolean() && option != value)
              refuse(fmt::format("{} inbound_nodes[{}]", lw, n),
                     fmt::format("calls the layer with {}={} where an earlier call used {}; "
                                 "kiln's MultiHeadAttention computes one of them",
                                 key, value.dump(), option.dump()));
            option = value;
            continue;
          }
          refuse(fmt::format("{} (layer \"{}\") inbound_nodes[{}]", lw,
                             layer["config"].value("name", "?"), n),
                 fmt::format("calls the layer with {}={:.200}; kiln replays a node from its input "
                             "tensors only and refuses call arguments rather than drop them",
                             key, value.dump()));
        }
      }
    }
    converted["inbound_nodes"] = layer.value("inbound_nodes", Json::array());
    if (layer.contains("name")) converted["name"] = layer["name"];
    layer = std::move(converted);
  }
  for (const char* key : {"input_layers", "output_layers"})
    if (out.contains(key)) out[key] = endpoint_list(out[key]);
  return out;
}

}  // namespace

Json kiln_layer_spec_from_keras(const Json& spec, const CustomObjects& custom) {
  if (!spec.is_object() || !spec.contains("class_name") || !spec["class_name"].is_string() ||
      !spec.contains("config") || !spec["config"].is_object())
    throw Error(
        fmt::format("a layer should be {{\"class_name\": ..., \"config\": {{...}}}}; got {:.200}",
                    spec.dump()));
  const std::string cls = spec["class_name"].get<std::string>();
  const std::string name = spec["config"].value("name", std::string("?"));
  const std::string where = fmt::format("layer \"{}\" ({})", name, cls);
  Json out{{"class_name", cls}, {"config", spec["config"]}};
  if (!keras_module(spec)) {
    // A custom object: its factory is found by registered name ("package>Class") or class.
    std::string registered = spec.contains("registered_name") && spec["registered_name"].is_string()
                                 ? spec["registered_name"].get<std::string>()
                                 : cls;
    if (has_custom_factory(registered, custom)) {
      out["class_name"] = registered;
    } else if (!has_custom_factory(cls, custom)) {
      throw Error(fmt::format(
          "{} is a custom object (module \"{}\", registered name \"{}\") that kiln has no factory "
          "for; pass one in custom_objects (load_model(path, {{.custom_objects = {{{{\"{}\", "
          "factory}}}}}})) or register it with kiln::register_layer_class",
          where, spec["module"].dump(), registered, cls));
    }
    return out;
  }
  Json& c = out["config"];
  // Keras' initializer objects ({"class_name": "GlorotUniform", "config": {"seed": ...}}) by the
  // names kiln's initializer entries read ("glorot_uniform"); their arguments only shape the
  // values a variable starts from, which the weights file replaces.
  for (auto& [key, value] : c.items()) {
    const bool initializer =
        key.size() >= 11 && key.compare(key.size() - 11, 11, "initializer") == 0;
    if (initializer && value.is_object() && value.contains("class_name") &&
        value["class_name"].is_string())
      value = keras_snake_case(value["class_name"].get<std::string>());
  }
  if (cls == "Sequential") {
    if (!c.contains("layers") || !c["layers"].is_array()) refuse(where, "has no \"layers\" list");
    for (size_t i = 0; i < c["layers"].size(); ++i) {
      try {
        c["layers"][i] = kiln_layer_spec_from_keras(c["layers"][i], custom);
      } catch (const Error& e) {
        refuse(fmt::format("{}: layers[{}]:", where, i), e.what());
      }
    }
  } else if (cls == "Functional") {
    c = convert_functional(c, custom, where);
  } else if (cls == "MultiHeadAttention") {
    // attention_axes [1] is Keras' computed default for [batch, sequence, features] inputs, the
    // only inputs kiln's MultiHeadAttention takes; use_gate=false is Keras' plain attention.
    if (c.contains("attention_axes") &&
        (c["attention_axes"] == Json::array({1}) || c["attention_axes"] == Json::array({-2})))
      c["attention_axes"] = nullptr;
    if (c.contains("use_gate") && c["use_gate"] == false) c.erase("use_gate");
  } else if (cls == "Bidirectional" || cls == "TimeDistributed" || cls == "RNN") {
    for (const char* key : {"layer", "backward_layer", "cell"})
      if (c.contains(key) && c[key].is_object())
        c[key] = kiln_layer_spec_from_keras(c[key], custom);
  }
  return out;
}

Json keras_layer_spec_from_kiln(const Json& spec) {
  Json out = spec;
  const std::string cls = spec.value("class_name", "");
  if (cls == "Functional") {
    out["module"] = "keras.src.models.functional";
    out["registered_name"] = "Functional";
  } else if (cls == "Sequential") {
    out["module"] = "keras";
    out["registered_name"] = nullptr;
  } else if (builtin_layer_factories().count(cls)) {
    out["module"] = "keras.layers";
    out["registered_name"] = nullptr;
  } else {
    // A layer class registered with kiln: Keras needs it as a custom object too.
    out["module"] = "kiln.custom";
    out["registered_name"] = cls;
  }
  Json& c = out["config"];
  if (!c.is_object()) return out;
  if (cls == "Sequential" && c.contains("layers") && c["layers"].is_array()) {
    for (Json& l : c["layers"]) l = keras_layer_spec_from_kiln(l);
  } else if (cls == "Functional" && c.contains("layers") && c["layers"].is_array()) {
    for (Json& l : c["layers"]) {
      const std::string lc = l.value("class_name", "");
      if (l.contains("inbound_nodes") && l["inbound_nodes"].is_array()) {
        for (Json& node : l["inbound_nodes"]) {
          if (!node.is_object() || !node.contains("args") || !node["args"].is_array()) continue;
          // Keras' merge layers take their inputs as one list argument.
          if (kMergeLayers.count(lc) && node["args"].size() > 1)
            node["args"] = Json::array({node["args"]});
          // Keras passes MultiHeadAttention's causal mask and score output at call time.
          if (lc == "MultiHeadAttention" && l["config"].is_object())
            for (const char* key : {"use_causal_mask", "return_attention_scores"})
              if (l["config"].value(key, false)) node["kwargs"][key] = true;
        }
      }
      if (lc == "MultiHeadAttention" && l["config"].is_object()) {
        l["config"].erase("use_causal_mask");
        l["config"].erase("return_attention_scores");
      }
      Json converted = keras_layer_spec_from_kiln(
          Json{{"class_name", l["class_name"]}, {"config", l["config"]}});
      l["config"] = converted["config"];
      l["module"] = converted["module"];
      l["registered_name"] = converted["registered_name"];
    }
  } else if (cls == "Bidirectional" || cls == "TimeDistributed" || cls == "RNN") {
    for (const char* key : {"layer", "backward_layer", "cell"})
      if (c.contains(key) && c[key].is_object()) c[key] = keras_layer_spec_from_kiln(c[key]);
  }
  return out;
}

// ---------------------------------------------------------------- compile config

namespace {

struct KerasLoss {
  const char* keras;  // Keras' class
  const char* kiln;   // kiln's name
};
constexpr KerasLoss kLosses[] = {
    {"BinaryCrossentropy", "binary_crossentropy"},
    {"CategoricalCrossentropy", "categorical_crossentropy"},
    {"SparseCategoricalCrossentropy", "sparse_categorical_crossentropy"},
    {"MeanSquaredError", "mean_squared_error"},
    {"MeanAbsoluteError", "mean_absolute_error"},
    {"Huber", "huber"},
};

// Keras' loss object -> kiln's name or {"class_name", "config": {"from_logits", ...}}.
Json loss_from_keras(const Json& j, const std::string& where) {
  if (j.is_null() || j.is_string()) return j;
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string())
    refuse(where,
           fmt::format("should be a loss name or a Keras loss object, got {:.200}", j.dump()));
  if (!keras_module(j))
    refuse(where, fmt::format("is a custom loss ({:.200}); load the model with compile = false and "
                              "compile it with your loss",
                              j.dump()));
  const std::string cls = j["class_name"].get<std::string>();
  std::string name = keras_snake_case(cls);
  for (const KerasLoss& l : kLosses)
    if (cls == l.keras) name = l.kiln;
  Json out_config = Json::object();
  const Json config = j.value("config", Json::object());
  for (const auto& [key, value] : config.items()) {
    if (key == "name" || key == "dtype" || value.is_null()) continue;
    if (key == "from_logits" || key == "ignore_class") {
      out_config[key] = value;
      continue;
    }
    if ((key == "reduction" && value == "sum_over_batch_size") ||
        (key == "label_smoothing" && value.is_number() && value.get<double>() == 0) ||
        (key == "axis" && value == -1) || (key == "delta" && value == 1.0 && cls == "Huber"))
      continue;
    refuse(where + ".config." + key,
           fmt::format("is {:.200}; kiln's {} computes Keras' default only; load the model with "
                       "compile = false and compile it with a loss kiln has",
                       value.dump(), name));
  }
  if (out_config.empty()) return name;
  return Json{{"class_name", name}, {"config", out_config}};
}

Json metric_from_keras(const Json& j, const std::string& where) {
  if (j.is_string() || j.is_null()) return j;
  if (j.is_array()) {
    Json out = Json::array();
    for (size_t i = 0; i < j.size(); ++i)
      out.push_back(metric_from_keras(j[i], fmt::format("{}[{}]", where, i)));
    return out;
  }
  if (j.is_object() && !j.contains("class_name")) {
    Json out = Json::object();
    for (const auto& [k, v] : j.items()) out[k] = metric_from_keras(v, where + "." + k);
    return out;
  }
  if (!j.is_object() || !j["class_name"].is_string() || !keras_module(j))
    refuse(where, fmt::format("is a metric kiln cannot rebuild ({:.200}); load the model with "
                              "compile = false and compile it with your metrics",
                              j.dump()));
  const std::string name = keras_snake_case(j["class_name"].get<std::string>());
  // (A named copy: iterating items() of the temporary would outlive it.)
  const Json config = j.value("config", Json::object());
  for (const auto& [key, value] : config.items())
    if (key != "name" && key != "dtype" && !value.is_null())
      refuse(where + ".config." + key,
             fmt::format("is {:.200}; kiln rebuilds metrics by name only; load the model with "
                         "compile = false and compile it with your metrics",
                         value.dump()));
  return name;
}

Json optimizer_from_keras(const Json& j) {
  const std::string where = "compile_config.optimizer";
  if (!j.is_object() || !j.contains("class_name") || !j["class_name"].is_string() ||
      !j.contains("config") || !j["config"].is_object())
    refuse(where, fmt::format("should be a Keras optimizer object, got {:.200}", j.dump()));
  if (!keras_module(j))
    refuse(where, fmt::format("is a custom optimizer ({}); load the model with compile = false",
                              j["class_name"].dump()));
  const std::string cls = j["class_name"].get<std::string>();
  static const std::map<std::string, std::set<std::string>> honoured = {
      {"SGD", {"momentum", "nesterov"}},
      {"Adam", {"beta_1", "beta_2", "epsilon", "amsgrad"}},
      {"AdamW", {"beta_1", "beta_2", "epsilon", "amsgrad", "weight_decay"}},
      {"RMSprop", {"rho", "momentum", "epsilon", "centered"}},
  };
  auto it = honoured.find(cls);
  if (it == honoured.end())
    refuse(where + ".class_name",
           fmt::format("is \"{}\"; kiln rebuilds SGD, Adam, AdamW and RMSprop; load the model "
                       "with compile = false and compile it with your optimizer",
                       cls));
  static const std::set<std::string> common = {"name", "learning_rate", "clipnorm", "clipvalue",
                                               "global_clipnorm"};
  for (const auto& [key, value] : j["config"].items()) {
    if (common.count(key) || it->second.count(key) || value.is_null()) continue;
    if ((key == "use_ema" && value == false) || key == "ema_momentum" ||
        key == "ema_overwrite_frequency")
      continue;  // EMA settings without use_ema change nothing
    refuse(where + ".config." + key,
           fmt::format("is {:.200}; kiln's {} does not compute it and refuses it rather than "
                       "train differently. Load the model with compile = false",
                       value.dump(), cls));
  }
  return Json{{"class_name", cls}, {"config", j["config"]}};
}

}  // namespace

Json kiln_compile_config_from_keras(const Json& c) {
  if (!c.is_object()) refuse("compile_config", "should be an object");
  Json out = Json::object();
  for (const auto& [key, value] : c.items()) {
    const std::string where = "compile_config." + key;
    if (key == "optimizer") {
      out[key] = optimizer_from_keras(value);
    } else if (key == "loss") {
      if (value.is_array()) {
        out[key] = Json::array();
        for (size_t i = 0; i < value.size(); ++i)
          out[key].push_back(loss_from_keras(value[i], fmt::format("{}[{}]", where, i)));
      } else if (value.is_object() && !value.contains("class_name")) {
        out[key] = Json::object();
        for (const auto& [k, v] : value.items()) out[key][k] = loss_from_keras(v, where + "." + k);
      } else {
        out[key] = loss_from_keras(value, where);
      }
    } else if (key == "metrics" || key == "weighted_metrics") {
      out[key] = metric_from_keras(value, where);
    } else if (key == "loss_weights" || key == "run_eagerly") {
      out[key] = value;
    } else if (key == "jit_compile" || key == "auto_scale_loss") {
      // How Keras compiles the step (XLA or not) and loss scaling under a mixed policy (kiln
      // refuses mixed policies where the layers' dtypes are read): no other result here.
    } else if (key == "steps_per_execution") {
      if (value != 1 && !value.is_null())
        refuse(where, fmt::format("is {}; kiln runs one batch per step (use 1)", value.dump()));
    } else if (!value.is_null()) {
      refuse(where, fmt::format("is {:.200}, a compile argument kiln does not know", value.dump()));
    }
  }
  return out;
}

Json keras_compile_config_from_kiln(const Json& c) {
  Json out = c;
  if (c.contains("optimizer") && c["optimizer"].is_object()) {
    out["optimizer"]["module"] = "keras.optimizers";
    out["optimizer"]["registered_name"] = nullptr;
  }
  auto loss = [](const Json& l) {
    if (!l.is_object() || !l.contains("class_name")) return l;
    std::string cls = l["class_name"].get<std::string>();
    for (const KerasLoss& k : kLosses)
      if (cls == k.kiln) cls = k.keras;
    return Json{{"module", "keras.losses"},
                {"class_name", cls},
                {"config", l.value("config", Json::object())},
                {"registered_name", nullptr}};
  };
  if (c.contains("loss")) {
    const Json& l = c["loss"];
    if (l.is_array()) {
      out["loss"] = Json::array();
      for (const Json& e : l) out["loss"].push_back(loss(e));
    } else if (l.is_object() && !l.contains("class_name")) {
      for (const auto& [k, v] : l.items()) out["loss"][k] = loss(v);
    } else {
      out["loss"] = loss(l);
    }
  }
  out["steps_per_execution"] = 1;
  return out;
}

}  // namespace kiln::saving_detail
