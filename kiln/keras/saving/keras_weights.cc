// The places of a kiln model's variables in a Keras 3 weights file (keras/saving/
// keras_weights.h).
#include "kiln/keras/saving/keras_weights.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "kiln/keras/models/input_layer.h"

namespace kiln::saving_detail {
namespace {

std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "/" + b; }

// The weights of `layer` that none of its sublayers own, trainable ones first (Keras'
// _trainable_variables + _non_trainable_variables).
std::vector<Variable> own_weights(const Layer& layer) {
  std::set<const void*> inner;
  for (const Layer& s : layer->sublayers())
    for (const Variable& v : s->weights()) inner.insert(v.handle_id());
  std::vector<Variable> trainable, frozen;
  for (const Variable& v : layer->weights()) {
    if (inner.count(v.handle_id())) continue;
    (v.trainable() ? trainable : frozen).push_back(v);
  }
  trainable.insert(trainable.end(), frozen.begin(), frozen.end());
  return trainable;
}

class Walker {
 public:
  KerasWeightLayout layout;

  void layer(const Layer& l, const std::string& path) {
    const std::string& cls = l->class_name();
    if (dynamic_cast<const ModelImpl*>(l.ptr().get())) return model(l, path);
    if (cls == "LSTM" || cls == "GRU" || cls == "SimpleRNN") {
      group(path, l->name());
      return vars(own_weights(l), join(path, "cell"), l->name() + "_cell");
    }
    if (cls == "RNN" && l->sublayers().size() == 1) {  // layers.RNN: its cell's, under cell/
      group(path, l->name());
      const Layer& cell = l->sublayers()[0];
      return vars(cell->weights(), join(path, "cell"), cell->name());
    }
    if (cls == "LSTMCell" || cls == "GRUCell" || cls == "SimpleRNNCell")
      return vars(l->weights(), path, l->name());  // a cell alone: its loop's weights
    if (cls == "MultiHeadAttention") {
      group(path, l->name());
      std::vector<Variable> w = own_weights(l);
      // kiln: query, key, value, attention_output, each kernel (+ bias).
      if (w.size() % 4 != 0)
        throw Error(fmt::format("layer \"{}\" (MultiHeadAttention) has {} weights; expected 4 or 8",
                                l->name(), w.size()));
      const size_t per = w.size() / 4;
      const char* parts[] = {"query_dense", "key_dense", "value_dense", "output_dense"};
      const char* names[] = {"query", "key", "value", "attention_output"};
      for (size_t i = 0; i < 4; ++i)
        vars(std::vector<Variable>(w.begin() + long(i * per), w.begin() + long((i + 1) * per)),
             join(path, parts[i]), names[i]);
      group(join(path, "_dropout_layer"), "dropout");
      group(join(path, "_softmax"), "softmax");
      return;
    }
    if (cls == "Bidirectional" && l->sublayers().size() == 2) {
      vars(own_weights(l), path, l->name());
      layer(l->sublayers()[0], join(path, "forward_layer"));
      layer(l->sublayers()[1], join(path, "backward_layer"));
      return;
    }
    if (cls == "TimeDistributed" && l->sublayers().size() == 1) {
      vars(own_weights(l), path, l->name());
      return layer(l->sublayers()[0], join(path, "layer"));
    }
    vars(own_weights(l), path, l->name());
    if (!l->sublayers().empty()) container(l->sublayers(), join(path, "layers"));
  }

 private:
  std::set<const void*> seen_;

  void group(const std::string& path, const std::string& name) {
    layout.groups.push_back({join(path, "vars"), name});
  }

  void vars(const std::vector<Variable>& vs, const std::string& path, const std::string& name) {
    group(path, name);
    size_t i = 0;
    for (const Variable& v : vs) {
      const std::string key = fmt::format("{}/{}", join(path, "vars"), i++);
      if (seen_.insert(v.handle_id()).second) layout.variables.push_back({key, v});
    }
  }

  void model(const Layer& l, const std::string& path) {
    const auto& m = static_cast<const ModelImpl&>(*l.ptr());
    // The model's own variables: those outside its layers.
    std::set<const void*> in_layers;
    for (const Layer& s : m.layers())
      for (const Variable& v : s->weights()) in_layers.insert(v.handle_id());
    std::vector<Variable> own;
    for (const Variable& v : m.weights())
      if (!in_layers.count(v.handle_id())) own.push_back(v);
    vars(own, path, m.name());
    std::vector<Layer> layers;
    for (const Layer& s : m.layers())
      // Keras' Sequential.layers leaves the InputLayer out (Functional lists it).
      if (!(l->class_name() == "Sequential" && s->class_name() == "InputLayer"))
        layers.push_back(s);
    container(layers, join(path, "layers"));
  }

  void container(const std::vector<Layer>& layers, const std::string& path) {
    std::map<std::string, int> used;
    for (const Layer& s : layers) {
      std::string name = keras_snake_case(s->class_name());
      auto [it, fresh] = used.emplace(name, 0);
      if (!fresh) name = fmt::format("{}_{}", name, ++it->second);
      layer(s, join(path, name));
    }
  }
};

}  // namespace

std::string keras_snake_case(const std::string& class_name) {
  static const std::regex non_word(R"(\W+)"), upper_word("(.)([A-Z][a-z]+)"),
      lower_upper("([a-z])([A-Z])");
  std::string s = std::regex_replace(class_name, non_word, "");
  s = std::regex_replace(s, upper_word, "$1_$2");
  s = std::regex_replace(s, lower_upper, "$1_$2");
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

KerasWeightLayout keras_weight_layout(const ModelImpl& model) {
  Walker w;
  Layer self(std::const_pointer_cast<LayerImpl>(model.shared_from_this()));
  w.layer(self, "");
  return std::move(w.layout);
}

std::string KerasOptimizerEntry::describe() const {
  switch (kind) {
    case Kind::iterations:
      return "iterations";
    case Kind::learning_rate:
      return "learning_rate";
    case Kind::slot:
      break;
  }
  return fmt::format("{} of {}", slot, owner.name());
}

std::vector<KerasOptimizerEntry> keras_optimizer_layout(const OptimizerImpl& optimizer,
                                                        const std::vector<Variable>& trainable) {
  using Kind = KerasOptimizerEntry::Kind;
  std::vector<KerasOptimizerEntry> out{{Kind::iterations, {}, ""}};
  if (!optimizer.schedule()) out.push_back({Kind::learning_rate, {}, ""});
  const Json config = optimizer.get_config();
  auto number = [&](const char* key) {
    return config.contains(key) && config[key].is_number() ? config[key].get<double>() : 0.0;
  };
  auto flag = [&](const char* key) { return config.value(key, false); };
  auto block = [&](std::initializer_list<const char*> slots) {
    for (const Variable& v : trainable)
      for (const char* s : slots) out.push_back({Kind::slot, v, s});
  };
  const std::string cls = optimizer.class_name();
  if (cls == "Adam" || cls == "AdamW") {
    block({"momentum", "velocity"});
    if (flag("amsgrad")) block({"velocity_hat"});
  } else if (cls == "SGD") {
    if (number("momentum") != 0) block({"momentum"});
  } else if (cls == "RMSprop") {
    block({"velocity"});
    if (number("momentum") > 0) block({"momentum"});
    if (flag("centered")) block({"average_gradient"});
  } else {
    throw Error(fmt::format(
        "optimizer \"{}\" ({}): kiln knows the Keras file layout of SGD, Adam, AdamW and "
        "RMSprop only; save with include_optimizer = false",
        optimizer.name(), cls));
  }
  return out;
}

}  // namespace kiln::saving_detail
