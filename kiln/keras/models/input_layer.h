// kiln::Input: the start of a functional model. Returns a symbolic tensor of shape
// (None, *shape) (batch dimension unknown) produced by an InputLayer.
#pragma once

#include <string>

#include "kiln/keras/layers/layer.h"

namespace kiln {

// Keras' InputLayer: built from the start, no weights, passes its input through. Its one
// inbound node has no inputs; the tensor it produces is the one kiln::Input returns (the
// layer does not hold that tensor: the tensor's history owns the node, which owns the layer).
class InputLayerImpl : public LayerImpl {
 public:
  InputLayerImpl(const Shape& batch_shape, DType dtype, std::string name);
  Tensor call(const Tensor& x, bool) override { return x; }
  Json get_config() const override;  // Keras: {"name", "batch_shape", "dtype", "sparse"}
  const Shape& batch_shape() const { return batch_shape_; }
  DType dtype() const { return dtype_; }

 private:
  Shape batch_shape_;
  DType dtype_;
};

// Keras' InputLayer.from_config: {"name", "batch_shape", "dtype"} (kiln::Error naming the layer
// and the entry for a bad config).
Layer input_layer_from_config(const Json& config);

// `shape` excludes the batch dimension: Input({28, 28, 1}) is (None, 28, 28, 1). Inner
// dimensions may be kUnknownDim. Default names: "input_layer", "input_layer_1", ...
Tensor Input(const Shape& shape, DType dtype = DType::f32, const std::string& name = "");

}  // namespace kiln
