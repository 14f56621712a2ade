// Functional models (Keras' Functional): Model(inputs, outputs) maps the DAG of layer calls
// recorded on symbolic tensors (nodes by depth, layers in order — Keras' _map_graph_network),
// rejects cycles and outputs not connected to the inputs, and runs the nodes in order on
// concrete inputs (run_internal_graph). Several inputs and outputs, shared layers and nested
// models (a model called like a layer) are supported.
//
// Ordering: the depth of a node is 0 for the nodes producing the outputs and otherwise
// 1 + the largest depth of the nodes consuming its outputs; a layer's depth is the largest
// depth of its nodes. Nodes run (and layers are listed) by decreasing depth, so InputLayers
// come first; ties between layers keep the order in which a depth-first walk from the
// outputs first met them. Every layer, InputLayers included, is tracked as a sublayer.
#pragma once

#include <vector>

#include "kiln/keras/layers/node.h"
#include "kiln/keras/models/model.h"

namespace kiln {

class FunctionalImpl : public ModelImpl {
 public:
  // Throws kiln::Error if an input was not made by kiln::Input, an output has no layer
  // history, the graph has a cycle, an output needs an Input that is not in `inputs`
  // ("Graph disconnected: ..."), or two layers share a name.
  FunctionalImpl(std::vector<Tensor> inputs, std::vector<Tensor> outputs, std::string name);

  // Runs the nodes on concrete or symbolic inputs (count and shapes checked against the
  // Inputs; the batch dimension and other unknown dimensions may take any size).
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  std::vector<Layer> layers() const override { return layers_; }
  // Depth of each layer of layers() (Keras' operations_by_depth): 0 for the output layers.
  const std::vector<int>& layer_depths() const { return layer_depths_; }
  // Per layer: the output types of its last node in this model, as "(None, 64)".
  std::vector<std::string> layer_output_shapes() const override;
  // Per layer, Keras' "Connected to": "<layer>[node index][tensor index]" for every input of
  // every node of the layer in this model, joined by ", "; "-" for InputLayers.
  std::vector<std::string> layer_connections() const override;
  // {"name", "trainable", "layers": [{"class_name", "config", "name", "inbound_nodes"}],
  //  "input_layers": [[name, node, tensor]], "output_layers": [...]} (Keras 3's form).
  Json get_config() const override;

  // Keras' summary test: one node per depth, no node with several inputs, no shared layer.
  // Such models print without the "Connected to" column.
  bool sequential_like() const;

  // The Input layers' names and the names of the layers that produce the outputs (Keras).
  std::vector<std::string> input_names() const override;
  std::vector<std::string> output_names() const override;

  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<Tensor>& outputs() const { return outputs_; }

 private:
  std::vector<Tensor> inputs_, outputs_;
  std::vector<std::shared_ptr<Node>> nodes_in_order_;  // by decreasing depth (run order)
  std::vector<int> node_depths_;                       // parallel to nodes_in_order_
  std::vector<Layer> layers_;                          // by depth, then first use
  std::vector<int> layer_depths_;                      // parallel to layers_
};

}  // namespace kiln
