// Activation functions by Keras name, and the Activation layer.
//
// activations::apply(name, x) computes Keras 3's activation of that name with its default
// arguments ("" means "linear"). Unknown names throw kiln::Error listing the valid ones.
// Every activation is made of kiln ops, so it differentiates and runs on symbolic tensors.
#pragma once

#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"

namespace kiln {

namespace activations {

// The valid names: linear, relu, relu6, sigmoid, hard_sigmoid, tanh, softmax (last axis),
// log_softmax (last axis), gelu (exact, erf-based: Keras 3's approximate=False), leaky_relu
// (negative_slope 0.2), elu (alpha 1), selu, softplus, softsign, silu, swish (= silu), mish,
// exponential.
const std::vector<std::string>& names();
// The name as stored in configs: "" becomes "linear". Throws for an unknown name.
std::string canonical(const std::string& name);
Tensor apply(const std::string& name, const Tensor& x);

}  // namespace activations

struct ActivationOptions {
  std::string name{};  // layer name; empty: "activation", "activation_1", ...
};

// Applies a named activation to its input (Keras' Activation layer). No weights.
class ActivationImpl : public LayerImpl {
 public:
  explicit ActivationImpl(const std::string& activation, ActivationOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  Json get_config() const override;  // + "activation"
  const std::string& activation() const { return activation_; }

 private:
  std::string activation_;
};

class Activation : public Layer {
  KILN_LAYER_HANDLE(Activation)
 public:
  explicit Activation(const std::string& activation, ActivationOptions options = {});
};

// Keras' Activation.from_config: the layer get_config's config describes (kiln::Error naming
// the layer and the entry for a bad config). Every built-in layer has such a function
// (keras/layers/layer_config.h reads the entries; keras/saving/ maps class names to them).
Layer activation_from_config(const Json& config);

}  // namespace kiln
