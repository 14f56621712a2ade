// kiln::Input: the start of a functional model. Returns a symbolic tensor of shape
// (None, *shape) (batch dimension unknown) produced by an InputLayer.
#pragma once

#include <string>

#include "frontend/layers/layer.h"

namespace kiln {

class InputLayerImpl : public LayerImpl {
 public:
  InputLayerImpl(const Shape& batch_shape, DType dtype, std::string name);
  Tensor call(const Tensor& x, bool training) override { return x; }
  Json get_config() const override;
  const Shape& batch_shape() const { return batch_shape_; }
  DType dtype() const { return dtype_; }
  // The symbolic tensor this layer produces.
  const Tensor& output() const { return output_; }

 private:
  Shape batch_shape_;
  DType dtype_;
  Tensor output_;
};

// `shape` excludes the batch dimension: Input({28, 28, 1}) is (None, 28, 28, 1).
Tensor Input(const Shape& shape, DType dtype = DType::f32, const std::string& name = "");

}  // namespace kiln
