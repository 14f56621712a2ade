// Functional-model bookkeeping (Keras' Node and _keras_history): calling a layer on symbolic
// tensors records a Node; each output remembers its node and output index.
// Ownership runs one way (tensor -> node -> layer and input tensors), so there are no cycles.
#pragma once

#include <memory>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

class LayerImpl;

struct Node {
  std::shared_ptr<LayerImpl> layer;
  std::vector<Tensor> inputs;  // symbolic tensors the layer was called on (none for Input)
  std::vector<TensorType> output_types;
  // The layer's compute_mask on the symbolic inputs (undefined where an output has no mask):
  // Keras' node output masks. Runs pass masks on through keras_mask() on the real tensors.
  std::vector<Tensor> output_masks;
  bool training = false;
};

struct KerasHistory : detail::SymbolicInfo {
  KerasHistory(std::shared_ptr<Node> n, size_t i) : node(std::move(n)), tensor_index(i) {}
  std::shared_ptr<Node> node;
  size_t tensor_index;
};

// The history of a symbolic tensor made by a layer call, or nullptr.
inline const KerasHistory* keras_history(const Tensor& t) {
  return dynamic_cast<const KerasHistory*>(t.symbolic_info());
}

}  // namespace kiln
