#include "kiln/keras/models/functional.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "kiln/keras/models/input_layer.h"

namespace kiln {
namespace {

using NodePtr = std::shared_ptr<Node>;
// A value in the graph: the node that produces it and its output index.
using ValueKey = std::pair<const Node*, size_t>;

ValueKey key_of(const Tensor& t) {
  const KerasHistory* h = keras_history(t);
  KILN_ASSERT(h != nullptr, "functional graph tensor without history");
  return {h->node.get(), h->tensor_index};
}

// Position of `node` among its layer's inbound nodes (Keras' node_index).
size_t node_index(const Node& node) {
  const auto& nodes = node.layer->inbound_nodes;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].lock().get() == &node) return i;
  return 0;  // a hand-made node its layer does not list
}

// The tensor's text plus the layer that produced it.
std::string describe(const Tensor& t) {
  const KerasHistory* h = keras_history(t);
  if (!h) return t.to_string();
  return fmt::format("{} (output {} of layer \"{}\")", t.to_string(), h->tensor_index,
                     h->node->layer->name());
}

// Python's repr of a list of strings: ['a', 'b'].
std::string py_list(const std::vector<std::string>& names) {
  std::string s = "[";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + "]";
}

Json shape_json(const Shape& s) {
  Json j = Json::array();
  for (int64_t d : s) j.push_back(d == kUnknownDim ? Json(nullptr) : Json(d));
  return j;
}

// Depth-first walk from the outputs (Keras' _build_map): the nodes in post order (a node
// after the nodes producing its inputs) and each layer's first-visit index. The walk stops at
// the model's Input nodes.
class GraphWalk {
 public:
  explicit GraphWalk(std::set<const Node*> input_nodes) : input_nodes_(std::move(input_nodes)) {}

  void visit(const Tensor& t) {
    const KerasHistory* h = keras_history(t);
    if (!h)
      throw Error(
          fmt::format("functional model: tensor {} has no layer history; every tensor "
                      "in the graph must come from a layer call",
                      t.to_string()));
    const NodePtr& node = h->node;
    if (finished_.count(node.get())) return;
    if (in_progress_.count(node.get()))
      throw Error(fmt::format("Tensor {} from layer \"{}\" is part of a cycle.", t.to_string(),
                              node->layer->name()));
    layer_index.emplace(node->layer.get(), static_cast<int>(layer_index.size()));
    in_progress_.insert(node.get());
    if (!input_nodes_.count(node.get()))
      for (const Tensor& x : node->inputs) visit(x);
    in_progress_.erase(node.get());
    finished_.insert(node.get());
    post_order.push_back(node);
  }

  std::vector<NodePtr> post_order;
  std::unordered_map<const LayerImpl*, int> layer_index;

 private:
  std::set<const Node*> input_nodes_;
  std::unordered_set<const Node*> finished_, in_progress_;
};

void check_inputs_and_outputs(const std::string& model, const std::vector<Tensor>& inputs,
                              const std::vector<Tensor>& outputs) {
  if (inputs.empty())
    throw Error(
        fmt::format("Model \"{}\": `inputs` is empty; pass the tensors returned by "
                    "kiln::Input",
                    model));
  if (outputs.empty()) throw Error(fmt::format("Model \"{}\": `outputs` is empty", model));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined())
      throw Error(fmt::format("Model \"{}\": inputs[{}] is an undefined tensor", model, i));
    const KerasHistory* h = keras_history(x);
    if (!h || !dynamic_cast<const InputLayerImpl*>(h->node->layer.get())) {
      std::string what = h ? fmt::format(" made by layer \"{}\"", h->node->layer->name())
                           : (x.is_symbolic() ? " without layer history" : " (concrete)");
      throw Error(
          fmt::format("Model \"{}\": inputs[{}] must be a tensor returned by "
                      "kiln::Input, but it is {}{}",
                      model, i, x.to_string(), what));
    }
    for (size_t j = 0; j < i; ++j)
      if (key_of(inputs[j]) == key_of(x))
        throw Error(
            fmt::format("Model \"{}\": inputs[{}] and inputs[{}] are the same tensor; "
                        "pass each Input once",
                        model, j, i));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    if (!y.defined())
      throw Error(fmt::format("Model \"{}\": outputs[{}] is an undefined tensor", model, i));
    if (!keras_history(y))
      throw Error(fmt::format(
          "Model \"{}\": outputs[{}] ({}) was not produced by a layer called on tensors from "
          "kiln::Input. {}",
          model, i, y.to_string(),
          y.is_symbolic() ? "kiln ops applied directly to symbolic tensors record nothing; do "
                            "that computation inside a layer"
                          : "It is a concrete tensor."));
  }
}

// This model's nodes of `layer`, in the order of the layer's inbound nodes.
std::vector<const Node*> nodes_of(const std::vector<NodePtr>& nodes, const LayerImpl* layer) {
  std::vector<const Node*> out;
  for (const NodePtr& n : nodes)
    if (n->layer.get() == layer) out.push_back(n.get());
  std::sort(out.begin(), out.end(),
            [](const Node* a, const Node* b) { return node_index(*a) < node_index(*b); });
  return out;
}

}  // namespace

FunctionalImpl::FunctionalImpl(std::vector<Tensor> inputs, std::vector<Tensor> outputs,
                               std::string name)
    : ModelImpl("Functional", std::move(name)),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)) {
  autocast = false;  // Keras' Functional does not convert its inputs; its layers do
  check_inputs_and_outputs(this->name(), inputs_, outputs_);
  std::set<const Node*> input_nodes;
  for (const Tensor& x : inputs_) input_nodes.insert(key_of(x).first);
  GraphWalk walk(input_nodes);
  for (const Tensor& y : outputs_) walk.visit(y);

  // Depths (Keras' map_graph): consumers are seen before producers in reverse post order.
  std::unordered_map<const Node*, int> node_depth;
  std::unordered_map<const LayerImpl*, int> layer_depth;
  for (auto it = walk.post_order.rbegin(); it != walk.post_order.rend(); ++it) {
    const Node* n = it->get();
    int& ld = layer_depth[n->layer.get()];
    int depth = std::max(node_depth[n], ld);  // a shared layer keeps its deepest depth
    ld = depth;
    node_depth[n] = depth;
    for (const Tensor& x : n->inputs) {
      int& pd = node_depth[key_of(x).first];
      pd = std::max(pd, depth + 1);
    }
  }
  // Inputs no output depends on still belong to the model (depth 0, listed first there).
  std::vector<NodePtr> nodes = walk.post_order;
  for (const Tensor& x : inputs_) {
    const NodePtr& n = keras_history(x)->node;
    if (layer_depth.count(n->layer.get())) continue;
    layer_depth[n->layer.get()] = 0;
    walk.layer_index[n->layer.get()] = -1;
    node_depth[n.get()] = 0;
    nodes.push_back(n);
  }

  std::stable_sort(nodes.begin(), nodes.end(), [&](const NodePtr& a, const NodePtr& b) {
    return node_depth[a.get()] > node_depth[b.get()];
  });
  std::vector<std::shared_ptr<LayerImpl>> layers;
  for (const NodePtr& n : nodes)
    if (std::find(layers.begin(), layers.end(), n->layer) == layers.end())
      layers.push_back(n->layer);
  std::stable_sort(layers.begin(), layers.end(), [&](const auto& a, const auto& b) {
    int da = layer_depth[a.get()], db = layer_depth[b.get()];
    if (da != db) return da > db;
    return walk.layer_index[a.get()] < walk.layer_index[b.get()];
  });

  // Every input of every node must be computable from `inputs` (Keras' "Graph disconnected").
  std::set<ValueKey> computable;
  for (const Tensor& x : inputs_) computable.insert(key_of(x));
  std::vector<std::string> accessed;
  for (const NodePtr& n : nodes) {
    if (n->inputs.empty()) continue;  // an Input: only the listed ones provide values
    for (const Tensor& x : n->inputs)
      if (!computable.count(key_of(x)))
        throw Error(fmt::format(
            "Graph disconnected: cannot find value for tensor {} at layer \"{}\". The following "
            "previous layers were accessed without issue: {}. Pass every kiln::Input the outputs "
            "depend on in the model's inputs.",
            describe(x), n->layer->name(), py_list(accessed)));
    accessed.push_back(n->layer->name());
    for (size_t i = 0; i < n->output_types.size(); ++i) computable.insert({n.get(), i});
  }
  for (const Tensor& y : outputs_)
    if (!computable.count(key_of(y)))
      throw Error(
          fmt::format("Graph disconnected: cannot find value for output tensor {}; it "
                      "comes from an Input that is not among the model's inputs",
                      describe(y)));

  std::map<std::string, int> name_counts;
  for (const auto& l : layers) ++name_counts[l->name()];
  for (const auto& [layer_name, count] : name_counts)
    if (count > 1)
      throw Error(
          fmt::format("The name \"{}\" is used {} times in the model. All layer names "
                      "should be unique.",
                      layer_name, count));

  for (const NodePtr& n : nodes) node_depths_.push_back(node_depth[n.get()]);
  nodes_in_order_ = std::move(nodes);
  for (const auto& l : layers) {
    layers_.emplace_back(l);
    layer_depths_.push_back(layer_depth[l.get()]);
    track_layer(layers_.back());
  }
  built_ = true;
}

std::vector<Tensor> FunctionalImpl::call_many(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() != inputs_.size())
    throw Error(fmt::format("Layer \"{}\" expects {} input(s), but it received {} input tensors",
                            name(), inputs_.size(), inputs.size()));
  std::map<ValueKey, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& want = inputs_[i].shape();
    const Shape& got = inputs[i].shape();
    bool ok = want.rank() == got.rank();
    for (int d = 0; ok && d < want.rank(); ++d)
      ok = want[d] == kUnknownDim || got[d] == kUnknownDim || want[d] == got[d];
    if (!ok)
      throw Error(
          fmt::format("Model \"{}\" was passed incompatible inputs. For input \"{}\", "
                      "expected shape {}, but received instead a tensor with shape {}.",
                      name(), keras_history(inputs_[i])->node->layer->name(), want.to_string(),
                      got.to_string()));
    Tensor v = inputs[i];
    // Layers run below must not record nodes on the caller's graph.
    if (v.is_placeholder()) v = Tensor::symbolic(v.type(), nullptr).with_keras_mask(v.keras_mask());
    values[key_of(inputs_[i])] = v;
  }
  for (const NodePtr& n : nodes_in_order_) {
    if (n->inputs.empty()) continue;
    std::vector<Tensor> args;
    for (const Tensor& x : n->inputs) {
      auto it = values.find(key_of(x));
      KILN_ASSERT(it != values.end(), "functional model: node input computed out of order");
      args.push_back(it->second);
    }
    std::vector<Tensor> outs = n->layer->invoke(args, training);
    if (outs.size() != n->output_types.size())
      throw Error(
          fmt::format("Model \"{}\": layer \"{}\" returned {} outputs, but {} when the "
                      "model was built",
                      name(), n->layer->name(), outs.size(), n->output_types.size()));
    for (size_t i = 0; i < outs.size(); ++i) values[{n.get(), i}] = outs[i];
  }
  std::vector<Tensor> results;
  for (const Tensor& y : outputs_) results.push_back(values.at(key_of(y)));
  return results;
}

std::vector<Shape> FunctionalImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != inputs_.size())
    throw Error(fmt::format("Layer \"{}\" expects {} input(s), but it received {} input shapes",
                            name(), inputs_.size(), input_shapes.size()));
  bool same = true;
  for (size_t i = 0; i < inputs_.size(); ++i) same = same && inputs_[i].shape() == input_shapes[i];
  std::vector<Shape> out;
  if (same) {
    for (const Tensor& y : outputs_) out.push_back(y.shape());
    return out;
  }
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs_.size(); ++i)
    xs.push_back(Tensor::symbolic({inputs_[i].dtype(), input_shapes[i]}, nullptr));
  for (const Tensor& y : call_many(xs, false)) out.push_back(y.shape());
  return out;
}

std::vector<std::string> FunctionalImpl::layer_output_shapes() const {
  std::vector<std::string> out;
  for (const Layer& layer : layers_) {
    std::vector<const Node*> nodes = nodes_of(nodes_in_order_, layer.ptr().get());
    std::vector<Shape> shapes;
    for (const TensorType& t : nodes.back()->output_types) shapes.push_back(t.shape);
    out.push_back(detail::summary_shape_text(shapes));
  }
  return out;
}

std::vector<std::string> FunctionalImpl::layer_connections() const {
  std::vector<std::string> out;
  for (const Layer& layer : layers_) {
    std::string s;
    for (const Node* n : nodes_of(nodes_in_order_, layer.ptr().get()))
      for (const Tensor& x : n->inputs) {
        const KerasHistory* h = keras_history(x);
        if (!s.empty()) s += ", ";
        s += fmt::format("{}[{}][{}]", h->node->layer->name(), node_index(*h->node),
                         h->tensor_index);
      }
    out.push_back(s.empty() ? "-" : s);
  }
  return out;
}

bool FunctionalImpl::sequential_like() const {
  std::map<int, std::vector<const Node*>> by_depth;
  for (size_t i = 0; i < nodes_in_order_.size(); ++i)
    by_depth[node_depths_[i]].push_back(nodes_in_order_[i].get());
  for (const auto& [depth, nodes] : by_depth)
    if (nodes.size() > 1 || nodes[0]->inputs.size() > 1) return false;
  std::set<const LayerImpl*> seen;
  for (const NodePtr& n : nodes_in_order_)
    if (!seen.insert(n->layer.get()).second) return false;  // a shared layer
  return true;
}

Json FunctionalImpl::get_config() const {
  // Node indices count only this model's nodes of a layer (Keras' node_reindexing_map).
  auto history = [&](const Tensor& t) {
    const KerasHistory* h = keras_history(t);
    std::vector<const Node*> nodes = nodes_of(nodes_in_order_, h->node->layer.get());
    size_t index = std::find(nodes.begin(), nodes.end(), h->node.get()) - nodes.begin();
    return Json::array({h->node->layer->name(), index, h->tensor_index});
  };
  Json layers = Json::array();
  for (const Layer& layer : layers_) {
    Json inbound = Json::array();
    for (const Node* n : nodes_of(nodes_in_order_, layer.ptr().get())) {
      if (n->inputs.empty()) continue;
      Json args = Json::array();
      for (const Tensor& x : n->inputs)
        args.push_back({{"class_name", "__keras_tensor__"},
                        {"config",
                         {{"shape", shape_json(x.shape())},
                          {"dtype", std::string(dtype_name(x.dtype()))},
                          {"keras_history", history(x)}}}});
      inbound.push_back({{"args", args}, {"kwargs", Json::object()}});
    }
    layers.push_back({{"class_name", layer->class_name()},
                      {"config", layer->get_config()},
                      {"name", layer->name()},
                      {"inbound_nodes", inbound}});
  }
  Json config = LayerImpl::get_config();
  config["layers"] = layers;
  config["input_layers"] = Json::array();
  for (const Tensor& x : inputs_) config["input_layers"].push_back(history(x));
  config["output_layers"] = Json::array();
  for (const Tensor& y : outputs_) config["output_layers"].push_back(history(y));
  return config;
}

Model::Model(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
             const std::string& name)
    : Model(std::make_shared<FunctionalImpl>(inputs, outputs, name)) {}

std::vector<std::string> FunctionalImpl::input_names() const {
  std::vector<std::string> names;
  for (const Tensor& t : inputs_) names.push_back(keras_history(t)->node->layer->name());
  return names;
}

std::vector<std::string> FunctionalImpl::output_names() const {
  std::vector<std::string> names;
  for (const Tensor& t : outputs_) names.push_back(keras_history(t)->node->layer->name());
  return names;
}

}  // namespace kiln
