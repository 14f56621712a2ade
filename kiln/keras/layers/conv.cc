#include "kiln/keras/layers/conv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "kiln/keras/layers/activations.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {
namespace {

// TensorFlow's output length of one spatial dimension (-1 stays unknown).
int64_t conv_output_length(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                           const std::string& padding) {
  if (in == kUnknownDim) return kUnknownDim;
  if (padding == "same") return (in + stride - 1) / stride;
  int64_t effective = (kernel - 1) * dilation + 1;
  return in < effective ? 0 : (in - effective) / stride + 1;
}

}  // namespace

Conv2DImpl::Conv2DImpl(int64_t filters, Axes kernel_size, Conv2DOptions options)
    : LayerImpl("Conv2D", options.name),
      filters_(filters),
      kernel_size_(std::move(kernel_size)),
      options_(std::move(options)) {
  use_dtype_option(options_.dtype);
  if (filters <= 0)
    throw Error(
        fmt::format("layer \"{}\": Invalid value for argument `filters`. Expected a "
                    "strictly positive value. Received filters={}",
                    name(), filters));
  layer_util::pair_arg(name(), "kernel_size", kernel_size_);
  layer_util::pair_arg(name(), "strides", options_.strides);
  layer_util::pair_arg(name(), "dilation_rate", options_.dilation_rate);
  options_.padding = layer_util::padding_arg(name(), options_.padding);
  options_.activation = activations::canonical(options_.activation);
  bool strided = options_.strides[0] > 1 || options_.strides[1] > 1;
  bool dilated = options_.dilation_rate[0] > 1 || options_.dilation_rate[1] > 1;
  if (strided && dilated)
    throw Error(fmt::format(
        "layer \"{}\": `strides > 1` not supported in conjunction with "
        "`dilation_rate > 1`. Received: strides=({}) and dilation_rate=({})",
        name(), fmt::join(options_.strides, ", "), fmt::join(options_.dilation_rate, ", ")));
  options_.data_format = layer_util::channels_first_arg(name(), options_.data_format)
                             ? "channels_first"
                             : "channels_last";
  activity_regularizer = options_.activity_regularizer;
  input_spec = {InputSpec{.ndim = 4}};
}

void Conv2DImpl::build(const Shape& input_shape) {
  const bool first = options_.data_format == "channels_first";
  const int64_t channels = layer_util::known_channels(
      name(), first ? layer_util::shape_to_channels_last(input_shape) : input_shape);
  kernel = add_weight("kernel", {kernel_size_[0], kernel_size_[1], channels, filters_},
                      options_.kernel_initializer, true, variable_dtype(),
                      options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias = add_weight("bias", {filters_}, options_.bias_initializer, true, variable_dtype(),
                      options_.bias_regularizer, options_.bias_constraint);
  input_spec = {InputSpec{.ndim = 4, .axes = {{first ? 1 : -1, channels}}}};
}

Tensor Conv2DImpl::call(const Tensor& inputs, bool) {
  // channels_first: the NHWC convolution between two transposes (Keras' kernel layout in both).
  const bool first = options_.data_format == "channels_first";
  Tensor x = layer_util::cast_input(inputs, compute_dtype());
  if (first) x = layer_util::to_channels_last(x);
  Tensor y =
      conv2d(x, read_weight(kernel), options_.strides, options_.padding, options_.dilation_rate);
  if (options_.use_bias) y = y + read_weight(bias);
  y = activations::apply(options_.activation, y);
  return first ? layer_util::to_channels_first(y) : y;
}

std::vector<Shape> Conv2DImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1 || input_shapes[0].rank() != 4)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects one input shape of rank "
                    "4 (batch, height, width, channels; channels first with "
                    "data_format \"channels_first\")",
                    name()));
  const bool first = options_.data_format == "channels_first";
  const Shape s = first ? layer_util::shape_to_channels_last(input_shapes[0]) : input_shapes[0];
  Shape out = s;
  for (int i = 0; i < 2; ++i)
    out[1 + i] = conv_output_length(s[1 + i], kernel_size_[size_t(i)], options_.strides[size_t(i)],
                                    options_.dilation_rate[size_t(i)], options_.padding);
  out[3] = filters_;
  return {first ? layer_util::shape_to_channels_first(out) : out};
}

Json Conv2DImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["filters"] = filters_;
  c["kernel_size"] = kernel_size_;
  c["strides"] = options_.strides;
  c["padding"] = options_.padding;
  c["data_format"] = options_.data_format;
  c["dilation_rate"] = options_.dilation_rate;
  c["groups"] = 1;
  c["activation"] = options_.activation;
  c["use_bias"] = options_.use_bias;
  layer_util::weight_config(c, "kernel", options_.kernel_initializer, options_.kernel_regularizer,
                            options_.kernel_constraint);
  layer_util::weight_config(c, "bias", options_.bias_initializer, options_.bias_regularizer,
                            options_.bias_constraint);
  return c;
}

Layer conv2d_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "Conv2D");
  Conv2DOptions o;
  common_weights(c, o);
  o.strides = pair(c, "strides", o.strides);
  o.padding = c.get<std::string>("padding", o.padding);
  o.dilation_rate = pair(c, "dilation_rate", o.dilation_rate);
  o.activation = c.get<std::string>("activation", o.activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  o.data_format = data_format_entry(c);
  return Conv2D(c.get<int64_t>("filters"), pair(c, "kernel_size", {}), o);
}

Conv2D::Conv2D(int64_t filters, Axes kernel_size, Conv2DOptions options)
    : Layer(std::make_shared<Conv2DImpl>(filters, std::move(kernel_size), std::move(options))) {}

// ---------------------------------------------------------------- Conv1D

Conv1DImpl::Conv1DImpl(int64_t filters, int64_t kernel_size, Conv1DOptions options)
    : LayerImpl("Conv1D", options.name),
      filters_(filters),
      kernel_size_(kernel_size),
      options_(std::move(options)) {
  use_dtype_option(options_.dtype);
  if (filters <= 0)
    throw Error(
        fmt::format("layer \"{}\": Invalid value for argument `filters`. Expected a "
                    "strictly positive value. Received filters={}",
                    name(), filters));
  layer_util::positive_arg(name(), "kernel_size", kernel_size_);
  layer_util::positive_arg(name(), "strides", options_.strides);
  layer_util::positive_arg(name(), "dilation_rate", options_.dilation_rate);
  options_.padding = layer_util::padding_arg(name(), options_.padding, /*allow_causal=*/true);
  options_.activation = activations::canonical(options_.activation);
  if (options_.strides > 1 && options_.dilation_rate > 1)
    throw Error(
        fmt::format("layer \"{}\": `strides > 1` not supported in conjunction with "
                    "`dilation_rate > 1`. Received: strides=({},) and dilation_rate=({},)",
                    name(), options_.strides, options_.dilation_rate));
  options_.data_format = layer_util::channels_first_arg(name(), options_.data_format)
                             ? "channels_first"
                             : "channels_last";
  activity_regularizer = options_.activity_regularizer;
  input_spec = {InputSpec{.ndim = 3}};
}

void Conv1DImpl::build(const Shape& input_shape) {
  const bool first = options_.data_format == "channels_first";
  const int64_t channels = layer_util::known_channels(
      name(), first ? layer_util::shape_to_channels_last(input_shape) : input_shape);
  kernel =
      add_weight("kernel", {kernel_size_, channels, filters_}, options_.kernel_initializer, true,
                 variable_dtype(), options_.kernel_regularizer, options_.kernel_constraint);
  if (options_.use_bias)
    bias = add_weight("bias", {filters_}, options_.bias_initializer, true, variable_dtype(),
                      options_.bias_regularizer, options_.bias_constraint);
  input_spec = {InputSpec{.ndim = 3, .axes = {{first ? 1 : -1, channels}}}};
}

Tensor Conv1DImpl::call(const Tensor& inputs, bool) {
  if (inputs.is_placeholder())  // a functional model being built: types only
    return Tensor::symbolic({compute_dtype(), compute_output_shape({inputs.shape()})[0]}, nullptr);
  layer_util::require_one_unknown_dim(*this, inputs);
  const bool first = options_.data_format == "channels_first";
  Tensor x = layer_util::cast_input(inputs, compute_dtype());
  if (first) x = layer_util::to_channels_last(x);  // [batch, channels, steps] -> channels last
  std::string padding = options_.padding;
  if (padding == "causal") {
    x = pad(x, {0, (kernel_size_ - 1) * options_.dilation_rate, 0}, {0, 0, 0});
    padding = "valid";
  }
  // [batch, 1, steps, channels] * [1, k, channels, filters] -> [batch, 1, steps', filters]
  Tensor y = conv2d(expand_dims(x, 1), expand_dims(read_weight(kernel), 0), {1, options_.strides},
                    padding, {1, options_.dilation_rate});
  y = squeeze(y, {1});
  if (options_.use_bias) y = y + read_weight(bias);
  y = activations::apply(options_.activation, y);
  return first ? layer_util::to_channels_first(y) : y;
}

std::vector<Shape> Conv1DImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1 || input_shapes[0].rank() != 3)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects one input shape of rank "
                    "3 (batch, steps, channels; channels first with data_format "
                    "\"channels_first\")",
                    name()));
  const bool first = options_.data_format == "channels_first";
  const Shape s = first ? layer_util::shape_to_channels_last(input_shapes[0]) : input_shapes[0];
  int64_t steps = s[1];
  std::string padding = options_.padding;
  if (padding == "causal") {
    if (steps != kUnknownDim) steps += (kernel_size_ - 1) * options_.dilation_rate;
    padding = "valid";
  }
  Shape out{
      s[0],
      conv_output_length(steps, kernel_size_, options_.strides, options_.dilation_rate, padding),
      filters_};
  return {first ? layer_util::shape_to_channels_first(out) : out};
}

Json Conv1DImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["filters"] = filters_;
  c["kernel_size"] = Json::array({kernel_size_});
  c["strides"] = Json::array({options_.strides});
  c["padding"] = options_.padding;
  c["data_format"] = options_.data_format;
  c["dilation_rate"] = Json::array({options_.dilation_rate});
  c["groups"] = 1;
  c["activation"] = options_.activation;
  c["use_bias"] = options_.use_bias;
  layer_util::weight_config(c, "kernel", options_.kernel_initializer, options_.kernel_regularizer,
                            options_.kernel_constraint);
  layer_util::weight_config(c, "bias", options_.bias_initializer, options_.bias_regularizer,
                            options_.bias_constraint);
  return c;
}

Layer conv1d_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "Conv1D");
  Conv1DOptions o;
  common_weights(c, o);
  o.strides = single(c, "strides", o.strides);
  o.padding = c.get<std::string>("padding", o.padding);
  o.dilation_rate = single(c, "dilation_rate", o.dilation_rate);
  o.activation = c.get<std::string>("activation", o.activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  o.data_format = data_format_entry(c);
  return Conv1D(c.get<int64_t>("filters"), single(c, "kernel_size", 0), o);
}

Conv1D::Conv1D(int64_t filters, int64_t kernel_size, Conv1DOptions options)
    : Layer(std::make_shared<Conv1DImpl>(filters, kernel_size, std::move(options))) {}

}  // namespace kiln
