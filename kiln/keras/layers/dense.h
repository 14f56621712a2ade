// Dense: output = activation(inputs @ kernel + bias) (Keras' Dense).
//
// Weights, created at the first call from the input's last dimension `in`:
//   "kernel" (in, units) and, with use_bias, "bias" (units,).
// Inputs of rank >= 2: (batch, ..., in) -> (batch, ..., units); the leading axes broadcast.
// input_spec: min_ndim 2, and after build the last axis must be `in`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"

namespace kiln {

struct DenseOptions {
  std::string activation = "linear";  // see activations::names(); "" is linear
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer{};
  Regularizer bias_regularizer{};
  Regularizer activity_regularizer{};
  Constraint kernel_constraint{};  // applied after each optimizer update
  Constraint bias_constraint{};
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "dense", "dense_1", ...
};

// A densely connected layer; units must be positive.
class DenseImpl : public LayerImpl {
 public:
  DenseImpl(int64_t units, DenseOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;

  int64_t units() const { return units_; }
  const DenseOptions& options() const { return options_; }
  // Undefined until built; bias stays undefined without use_bias.
  Variable kernel, bias;

 private:
  int64_t units_;
  DenseOptions options_;
};

class Dense : public Layer {
  KILN_LAYER_HANDLE(Dense)
 public:
  explicit Dense(int64_t units, DenseOptions options = {});
};

// Keras' Dense.from_config: the layer get_config's config describes (kiln::Error naming the
// layer and the entry for a bad config).
Layer dense_from_config(const Json& config);

}  // namespace kiln
