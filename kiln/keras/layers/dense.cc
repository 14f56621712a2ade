#include "kiln/keras/layers/dense.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/activations.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {

DenseImpl::DenseImpl(int64_t units, DenseOptions options)
    : LayerImpl("Dense", options.name), units_(units), options_(std::move(options)) {
  supports_masking = true;
  if (units <= 0)
    throw Error(
        fmt::format("layer \"{}\": Received an invalid value for `units`, expected a "
                    "positive integer. Received: units={}",
                    name(), units));
  use_dtype_option(options_.dtype);
  options_.activation = activations::canonical(options_.activation);
  activity_regularizer = options_.activity_regularizer;
  input_spec = {InputSpec{.min_ndim = 2}};
}

void DenseImpl::build(const Shape& input_shape) {
  int64_t in = input_shape.dim(-1);
  if (in == kUnknownDim)
    throw Error(
        fmt::format("layer \"{}\": the last dimension of the inputs to a Dense layer "
                    "should be defined. Found None. Full input shape received: {}",
                    name(), input_shape.to_string()));
  kernel = add_weight("kernel", {in, units_}, options_.kernel_initializer, true, variable_dtype(),
                      options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias = add_weight("bias", {units_}, options_.bias_initializer, true, variable_dtype(),
                      options_.bias_regularizer, options_.bias_constraint);
  input_spec = {InputSpec{.min_ndim = 2, .axes = {{-1, in}}}};
}

Tensor DenseImpl::call(const Tensor& inputs, bool) {
  Tensor y = matmul(layer_util::cast_input(inputs, compute_dtype()), read_weight(kernel));
  if (options_.use_bias) y = y + read_weight(bias);
  return activations::apply(options_.activation, y);
}

std::vector<Shape> DenseImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1 || input_shapes[0].rank() < 2)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects one input shape of rank "
                    ">= 2",
                    name()));
  Shape out = input_shapes[0];
  out[out.rank() - 1] = units_;
  return {out};
}

Json DenseImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["units"] = units_;
  c["activation"] = options_.activation;
  c["use_bias"] = options_.use_bias;
  layer_util::weight_config(c, "kernel", options_.kernel_initializer, options_.kernel_regularizer,
                            options_.kernel_constraint);
  layer_util::weight_config(c, "bias", options_.bias_initializer, options_.bias_regularizer,
                            options_.bias_constraint);
  return c;
}

Layer dense_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "Dense");
  DenseOptions o;
  common_weights(c, o);
  o.activation = c.get<std::string>("activation", o.activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  return Dense(c.get<int64_t>("units"), o);
}

Dense::Dense(int64_t units, DenseOptions options)
    : Layer(std::make_shared<DenseImpl>(units, std::move(options))) {}

}  // namespace kiln
