// Functional models (Keras' Functional): Model(inputs, outputs) maps the DAG of layer calls
// recorded on symbolic tensors (nodes by depth, layers in order — Keras' _map_graph_network),
// rejects cycles and outputs not connected to the inputs, and runs the nodes in order on
// concrete inputs (run_internal_graph). Several inputs and outputs, shared layers and nested
// models (a model called like a layer) are supported.
#pragma once

#include <vector>

#include "frontend/layers/node.h"
#include "frontend/models/model.h"

namespace kiln {

class FunctionalImpl : public ModelImpl {
 public:
  FunctionalImpl(std::vector<Tensor> inputs, std::vector<Tensor> outputs, std::string name);

  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  std::vector<Layer> layers() const override;
  std::vector<std::string> layer_output_shapes() const override;
  std::vector<std::string> layer_connections() const override;
  Json get_config() const override;

  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<Tensor>& outputs() const { return outputs_; }

 private:
  std::vector<Tensor> inputs_, outputs_;
  std::vector<std::shared_ptr<Node>> nodes_in_order_;  // by decreasing depth (run order)
  std::vector<Layer> layers_;                          // by depth, then first use
};

}  // namespace kiln
