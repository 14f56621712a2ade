#include "kiln/keras/layers/activations.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"

namespace kiln {
namespace activations {
namespace {

using Fn = std::function<Tensor(const Tensor&)>;

Tensor elu(const Tensor& x) { return where(greater(x, scalar(0, x.dtype())), x, exp(x) - 1.0); }

const std::map<std::string, Fn>& table() {
  static const std::map<std::string, Fn> t = {
      {"linear", [](const Tensor& x) { return x; }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"relu6", [](const Tensor& x) { return minimum(relu(x), scalar(6, x.dtype())); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      // Keras 3: relu6(x + 3) / 6.
      {"hard_sigmoid",
       [](const Tensor& x) { return minimum(relu(x + 3.0), scalar(6, x.dtype())) / 6.0; }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"gelu", [](const Tensor& x) { return gelu(x, /*approximate=*/false); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }},
      {"elu", elu},
      {"selu",
       [](const Tensor& x) {
         constexpr double kAlpha = 1.67326324235437728481, kScale = 1.05070098735548049342;
         return where(greater(x, scalar(0, x.dtype())), x, (exp(x) - 1.0) * kAlpha) * kScale;
       }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"softsign", [](const Tensor& x) { return x / (abs(x) + 1.0); }},
      {"silu", [](const Tensor& x) { return x * sigmoid(x); }},
      {"swish", [](const Tensor& x) { return x * sigmoid(x); }},
      {"mish", [](const Tensor& x) { return x * tanh(softplus(x)); }},
      {"exponential", [](const Tensor& x) { return exp(x); }},
  };
  return t;
}

}  // namespace

const std::vector<std::string>& names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& [name, fn] : table()) v.push_back(name);
    return v;
  }();
  return n;
}

std::string canonical(const std::string& name) {
  if (name.empty()) return "linear";
  if (!table().count(name))
    throw Error(
        fmt::format("Could not interpret activation function identifier: \"{}\". Valid "
                    "activations are: {}",
                    name, fmt::join(names(), ", ")));
  return name;
}

Tensor apply(const std::string& name, const Tensor& x) { return table().at(canonical(name))(x); }

}  // namespace activations

ActivationImpl::ActivationImpl(const std::string& activation, ActivationOptions options)
    : LayerImpl("Activation", std::move(options.name)),
      activation_(activations::canonical(activation)) {
  supports_masking = true;
}

Tensor ActivationImpl::call(const Tensor& x, bool) { return activations::apply(activation_, x); }

Json ActivationImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["activation"] = activation_;
  return c;
}

Layer activation_from_config(const Json& config) {
  ConfigReader c(config, "Activation");
  return Activation(c.get<std::string>("activation"), ActivationOptions{.name = c.name()});
}

Activation::Activation(const std::string& activation, ActivationOptions options)
    : Layer(std::make_shared<ActivationImpl>(activation, std::move(options))) {}

}  // namespace kiln
