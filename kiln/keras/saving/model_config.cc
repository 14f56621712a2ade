// from_config for Sequential and functional models (Keras 3's Sequential.from_config and
// functional_from_config): the layers come back through layer_from_config, then a functional
// model's nodes are replayed (each layer called on the tensors its inbound nodes name) from
// the Inputs to the outputs.
#include <map>
#include <nlohmann/json.hpp>

#include "kiln/keras/models/functional.h"
#include "kiln/keras/models/input_layer.h"
#include "kiln/keras/models/sequential.h"
#include "kiln/keras/saving/from_config.h"

namespace kiln::saving_detail {

Layer sequential_from_config(const Json& config) {
  ConfigReader c(config, "Sequential");
  const Json& specs = c.at("layers");
  if (!specs.is_array()) c.fail("layers", "should be a list of layers");
  std::vector<Layer> layers;
  for (size_t i = 0; i < specs.size(); ++i) {
    try {
      layers.push_back(layer_from_config(specs[i]));
    } catch (const Error& e) {
      c.fail(fmt::format("layers[{}]", i), e.what());
    }
  }
  std::optional<Shape> input_shape;
  if (c.has("build_input_shape")) {
    Shape batch = layer_config::shape_entry(c, "build_input_shape");
    if (batch.rank() == 0)
      c.fail("build_input_shape", "is empty; it should start with the batch axis");
    input_shape = Shape(std::vector<int64_t>(batch.begin() + 1, batch.end()));
  }
  return Sequential(std::move(layers), input_shape, c.name());
}

namespace {

// [layer name, node index, tensor index] of a tensor in a functional config.
struct History {
  std::string layer;
  size_t node = 0, tensor = 0;
};

History history_entry(const ConfigReader& c, const std::string& where, const Json& h) {
  if (!h.is_array() || h.size() != 3 || !h[0].is_string() || !h[1].is_number_unsigned() ||
      !h[2].is_number_unsigned())
    c.fail(where,
           fmt::format("should be [layer name, node index, tensor index], got {}", h.dump()));
  return {h[0].get<std::string>(), h[1].get<size_t>(), h[2].get<size_t>()};
}

// The tensors a node's args name, in order: Keras writes one arg per tensor, or one list arg
// holding several (a merge layer's inputs); both are accepted.
void collect_args(const ConfigReader& c, const std::string& where, const Json& arg,
                  std::vector<History>& out) {
  if (arg.is_array()) {
    for (const Json& a : arg) collect_args(c, where, a, out);
    return;
  }
  if (!arg.is_object() || arg.value("class_name", "") != "__keras_tensor__" ||
      !arg.contains("config") || !arg["config"].contains("keras_history"))
    c.fail(where, fmt::format("should hold tensors ({{\"class_name\": \"__keras_tensor__\", "
                              "\"config\": {{\"keras_history\": ...}}}}), got {:.200}",
                              arg.dump()));
  out.push_back(history_entry(c, where, arg["config"]["keras_history"]));
}

struct LayerEntry {
  Layer layer;
  std::vector<std::vector<History>> nodes;   // the inputs of each inbound node
  std::vector<std::vector<Tensor>> outputs;  // the outputs of the nodes replayed so far
};

}  // namespace

Layer functional_from_config(const Json& config) {
  ConfigReader c(config, "Functional");
  const Json& specs = c.at("layers");
  if (!specs.is_array()) c.fail("layers", "should be a list of layers");
  std::vector<std::string> order;
  std::map<std::string, LayerEntry> entries;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string where = fmt::format("layers[{}]", i);
    const Json& spec = specs[i];
    if (!spec.is_object() || !spec.contains("config") || !spec["config"].is_object())
      c.fail(where, "should be {\"class_name\", \"config\", \"name\", \"inbound_nodes\"}");
    ConfigReader lc(spec["config"], spec.value("class_name", "?"));
    std::string name = spec.contains("name") && spec["name"].is_string()
                           ? spec["name"].get<std::string>()
                           : lc.name();
    if (name.empty() || entries.count(name))
      c.fail(where, fmt::format("has {} layer name \"{}\"; functional layers need unique names",
                                name.empty() ? "an empty" : "a repeated", name));
    LayerEntry e;
    if (spec.value("class_name", "") == "InputLayer") {
      Shape batch = layer_config::shape_entry(lc, "batch_shape");
      if (batch.rank() == 0) lc.fail("batch_shape", "is empty");
      if (lc.get<bool>("sparse", false))
        lc.fail("sparse", "is true; kiln's inputs are dense tensors (use sparse=false)");
      Tensor x = Input(Shape(std::vector<int64_t>(batch.begin() + 1, batch.end())),
                       layer_config::dtype_entry(lc), name);
      e.outputs.push_back({x});
    } else {
      try {
        e.layer = layer_from_config(spec);
      } catch (const Error& err) {
        c.fail(where, err.what());
      }
      const Json& inbound = spec.contains("inbound_nodes") ? spec["inbound_nodes"] : Json::array();
      if (!inbound.is_array()) c.fail(where + ".inbound_nodes", "should be a list of nodes");
      for (size_t n = 0; n < inbound.size(); ++n) {
        const std::string node_where = fmt::format("{}.inbound_nodes[{}]", where, n);
        const Json& node = inbound[n];
        const Json& args = node.is_object() && node.contains("args") ? node["args"] : node;
        std::vector<History> inputs;
        collect_args(c, node_where, args, inputs);
        if (inputs.empty()) c.fail(node_where, "has no input tensors");
        e.nodes.push_back(std::move(inputs));
      }
    }
    order.push_back(name);
    entries.emplace(name, std::move(e));
  }

  // The tensor a history names, or nullptr while its node has not run yet.
  auto lookup = [&](const std::string& where, const History& h) -> const Tensor* {
    auto it = entries.find(h.layer);
    if (it == entries.end())
      c.fail(where, fmt::format("names layer \"{}\", which is not in the model", h.layer));
    const LayerEntry& e = it->second;
    size_t nodes = e.layer.defined() ? e.nodes.size() : 1;
    if (h.node >= nodes)
      c.fail(where, fmt::format("names node {} of layer \"{}\", which has {} node(s)", h.node,
                                h.layer, nodes));
    if (h.node >= e.outputs.size()) return nullptr;
    if (h.tensor >= e.outputs[h.node].size())
      c.fail(where, fmt::format("names output {} of layer \"{}\" node {}, which has {} output(s)",
                                h.tensor, h.layer, h.node, e.outputs[h.node].size()));
    return &e.outputs[h.node][h.tensor];
  };

  // Replay the nodes: each round runs every node whose inputs exist (Keras' loop).
  for (bool progress = true; progress;) {
    progress = false;
    for (const std::string& name : order) {
      LayerEntry& e = entries.at(name);
      while (e.layer.defined() && e.outputs.size() < e.nodes.size()) {
        std::vector<Tensor> inputs;
        const std::string where = fmt::format("layer \"{}\" node {}", name, e.outputs.size());
        for (const History& h : e.nodes[e.outputs.size()]) {
          const Tensor* t = lookup(where, h);
          if (!t) break;
          inputs.push_back(*t);
        }
        if (inputs.size() != e.nodes[e.outputs.size()].size()) break;
        try {
          e.outputs.push_back(e.layer(inputs));
        } catch (const Error& err) {
          c.fail(where, fmt::format("could not be rebuilt: {}", err.what()));
        }
        progress = true;
      }
    }
  }
  for (const std::string& name : order) {
    const LayerEntry& e = entries.at(name);
    if (e.layer.defined() && e.outputs.size() < e.nodes.size())
      c.fail("layers", fmt::format("node {} of layer \"{}\" needs tensors that no node makes (a "
                                   "cycle or a missing layer)",
                                   e.outputs.size(), name));
  }

  auto endpoints = [&](const std::string& key) {
    const Json& list = c.at(key);
    if (!list.is_array() || list.empty()) c.fail(key, "should be a non-empty list");
    std::vector<Tensor> out;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where = fmt::format("{}[{}]", key, i);
      const Tensor* t = lookup(where, history_entry(c, where, list[i]));
      if (!t) c.fail(where, "names a node that was not rebuilt");
      out.push_back(*t);
    }
    return out;
  };
  return Model(endpoints("input_layers"), endpoints("output_layers"), c.name());
}

}  // namespace kiln::saving_detail
