#include "kiln/keras/layers/normalization.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {
namespace {

int normalized_axis(const std::string& layer, int64_t axis, const Shape& s) {
  if (axis < -s.rank() || axis >= s.rank())
    throw Error(fmt::format("layer \"{}\": Invalid axis: {} for an input of shape {} (rank {})",
                            layer, axis, s.to_string(), s.rank()));
  int a = int(axis < 0 ? axis + s.rank() : axis);
  if (s[a] == kUnknownDim)
    throw Error(
        fmt::format("layer \"{}\": axis {} of the input has an undefined size; it must be "
                    "known to create the weights. Full input shape received: {}",
                    layer, axis, s.to_string()));
  return a;
}

// The dtype normalization statistics are computed in: Keras' result_type(x, float32), i.e.
// float64 for float64 inputs, else float32 (bfloat16 inputs are widened).
DType stats_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

// `v` (the sizes of `axes`) reshaped to broadcast against a rank-`rank` input.
Tensor broadcastable(const Tensor& v, const Axes& axes, int rank) {
  if (axes.size() == 1 && axes[0] == rank - 1) return v;
  Axes shape(size_t(rank), 1);
  for (size_t i = 0; i < axes.size(); ++i) shape[size_t(axes[i])] = v.shape()[int(i)];
  return reshape(v, shape);
}

void check_epsilon(const std::string& layer, double epsilon) {
  if (!(epsilon >= 0))
    throw Error(fmt::format("layer \"{}\": epsilon must be >= 0, got {}", layer, epsilon));
}

}  // namespace

// ---- BatchNormalization ----

BatchNormalizationImpl::BatchNormalizationImpl(BatchNormalizationOptions options)
    : LayerImpl("BatchNormalization", options.name), options_(std::move(options)) {
  use_dtype_option(options_.dtype);
  supports_masking = true;
  check_epsilon(name(), options_.epsilon);
  if (!(options_.momentum >= 0 && options_.momentum <= 1))
    throw Error(
        fmt::format("layer \"{}\": momentum must be in [0, 1], got {}", name(), options_.momentum));
}

void BatchNormalizationImpl::build(const Shape& input_shape) {
  axis_ = normalized_axis(name(), options_.axis, input_shape);
  int64_t dim = input_shape[axis_];
  DType t = variable_dtype();
  if (options_.scale)
    gamma = add_weight("gamma", {dim}, options_.gamma_initializer, true, t,
                       options_.gamma_regularizer, options_.gamma_constraint);
  if (options_.center)
    beta = add_weight("beta", {dim}, options_.beta_initializer, true, t, options_.beta_regularizer,
                      options_.beta_constraint);
  moving_mean = add_weight("moving_mean", {dim}, options_.moving_mean_initializer, false, t);
  moving_variance =
      add_weight("moving_variance", {dim}, options_.moving_variance_initializer, false, t);
  input_spec = {InputSpec{.ndim = input_shape.rank(), .axes = {{options_.axis, dim}}}};
}

Tensor BatchNormalizationImpl::call(const Tensor& inputs, bool training) {
  // Keras: the (autocast) input is computed on in at least float32 (16-bit inputs overflow),
  // the variables read in that dtype, and the result cast to the compute dtype.
  const DType stat = stats_dtype(layer_util::cast_input(inputs, compute_dtype()).dtype());
  Tensor x = layer_util::cast_input(layer_util::cast_input(inputs, compute_dtype()), stat);
  int rank = x.rank();
  Axes feature = {axis_}, reduce;
  for (int i = 0; i < rank; ++i)
    if (i != axis_) reduce.push_back(i);
  Tensor mu, var;
  if (training && trainable()) {
    mu = mean(x, reduce, /*keepdims=*/true);
    var = mean(square(x - mu), reduce, /*keepdims=*/true);
    if (!x.is_placeholder()) {
      double m = options_.momentum;
      Shape s = moving_mean.shape();
      const DType vt = moving_mean.dtype();
      moving_mean.assign(moving_mean.value() * m +
                         layer_util::cast_input(reshape(mu, s.to_vector()), vt) * (1 - m));
      moving_variance.assign(moving_variance.value() * m +
                             layer_util::cast_input(reshape(var, s.to_vector()), vt) * (1 - m));
    }
  } else {
    mu = broadcastable(layer_util::cast_input(moving_mean.read(), stat), feature, rank);
    var = broadcastable(layer_util::cast_input(moving_variance.read(), stat), feature, rank);
  }
  Tensor y = (x - mu) * rsqrt(var + options_.epsilon);
  if (options_.scale)
    y = y * broadcastable(layer_util::cast_input(gamma.read(), stat), feature, rank);
  if (options_.center)
    y = y + broadcastable(layer_util::cast_input(beta.read(), stat), feature, rank);
  return layer_util::cast_input(y, compute_dtype());
}

std::vector<Shape> BatchNormalizationImpl::compute_output_shape(
    const std::vector<Shape>& input_shapes) {
  return input_shapes;
}

Json BatchNormalizationImpl::get_config() const {
  using layer_util::initializer_config, layer_util::regularizer_config;
  Json c = layer_util::base_config(*this);
  c["axis"] = options_.axis;
  c["momentum"] = options_.momentum;
  c["epsilon"] = options_.epsilon;
  c["center"] = options_.center;
  c["scale"] = options_.scale;
  c["beta_initializer"] = initializer_config(options_.beta_initializer);
  c["gamma_initializer"] = initializer_config(options_.gamma_initializer);
  c["moving_mean_initializer"] = initializer_config(options_.moving_mean_initializer);
  c["moving_variance_initializer"] = initializer_config(options_.moving_variance_initializer);
  c["beta_regularizer"] = regularizer_config(options_.beta_regularizer);
  c["gamma_regularizer"] = regularizer_config(options_.gamma_regularizer);
  c["beta_constraint"] = options_.beta_constraint.config();
  c["gamma_constraint"] = options_.gamma_constraint.config();
  c["synchronized"] = options_.synchronized;
  return c;
}

Layer batch_normalization_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "BatchNormalization");
  BatchNormalizationOptions o;
  o.name = c.name();
  o.dtype = policy_entry(c);
  o.axis = c.get<int>("axis", o.axis);
  o.momentum = c.get<double>("momentum", o.momentum);
  o.epsilon = c.get<double>("epsilon", o.epsilon);
  o.center = c.get<bool>("center", o.center);
  o.scale = c.get<bool>("scale", o.scale);
  o.beta_initializer = initializer_entry(c, "beta_initializer", o.beta_initializer);
  o.gamma_initializer = initializer_entry(c, "gamma_initializer", o.gamma_initializer);
  o.moving_mean_initializer =
      initializer_entry(c, "moving_mean_initializer", o.moving_mean_initializer);
  o.moving_variance_initializer =
      initializer_entry(c, "moving_variance_initializer", o.moving_variance_initializer);
  o.beta_regularizer = regularizer_entry(c, "beta_regularizer");
  o.gamma_regularizer = regularizer_entry(c, "gamma_regularizer");
  o.beta_constraint = constraint_entry(c, "beta_constraint");
  o.gamma_constraint = constraint_entry(c, "gamma_constraint");
  o.synchronized = c.get<bool>("synchronized", o.synchronized);
  return BatchNormalization(o);
}

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer(std::make_shared<BatchNormalizationImpl>(std::move(options))) {}

// ---- LayerNormalization ----

LayerNormalizationImpl::LayerNormalizationImpl(LayerNormalizationOptions options)
    : LayerImpl("LayerNormalization", options.name), options_(std::move(options)) {
  use_dtype_option(options_.dtype);
  autocast = false;  // Keras: the input is not cast; the statistics are at least float32
  supports_masking = true;
  check_epsilon(name(), options_.epsilon);
  if (options_.axis.empty())
    throw Error(fmt::format("layer \"{}\": axis must name at least one axis", name()));
}

void LayerNormalizationImpl::build(const Shape& input_shape) {
  axes_.clear();
  InputSpec spec{.ndim = input_shape.rank()};
  Axes param_shape;
  for (int64_t a : options_.axis) axes_.push_back(normalized_axis(name(), a, input_shape));
  std::sort(axes_.begin(), axes_.end());
  if (std::adjacent_find(axes_.begin(), axes_.end()) != axes_.end())
    throw Error(fmt::format("layer \"{}\": axis [{}] names an axis twice", name(),
                            fmt::join(options_.axis, ", ")));
  for (int64_t a : axes_) {
    param_shape.push_back(input_shape[int(a)]);
    spec.axes[int(a)] = input_shape[int(a)];
  }
  Shape ps(param_shape);
  DType t = variable_dtype();
  if (options_.scale)
    gamma = add_weight("gamma", ps, options_.gamma_initializer, true, t, options_.gamma_regularizer,
                       options_.gamma_constraint);
  if (options_.center)
    beta = add_weight("beta", ps, options_.beta_initializer, true, t, options_.beta_regularizer,
                      options_.beta_constraint);
  input_spec = {spec};
}

Tensor LayerNormalizationImpl::call(const Tensor& inputs, bool) {
  // Keras (autocast off): the input as given, computed on in at least float32, the weights
  // read in that dtype, the result cast to the compute dtype.
  const DType stat = stats_dtype(inputs.dtype());
  Tensor x = layer_util::cast_input(inputs, stat);
  int rank = x.rank();
  Tensor mu = mean(x, axes_, /*keepdims=*/true);
  Tensor var = mean(square(x - mu), axes_, /*keepdims=*/true);
  Tensor y = (x - mu) * rsqrt(var + options_.epsilon);
  if (options_.scale)
    y = y * broadcastable(layer_util::cast_input(gamma.read(), stat), axes_, rank);
  if (options_.center)
    y = y + broadcastable(layer_util::cast_input(beta.read(), stat), axes_, rank);
  return layer_util::cast_input(y, compute_dtype());
}

std::vector<Shape> LayerNormalizationImpl::compute_output_shape(
    const std::vector<Shape>& input_shapes) {
  return input_shapes;
}

Json LayerNormalizationImpl::get_config() const {
  using layer_util::initializer_config, layer_util::regularizer_config;
  Json c = layer_util::base_config(*this);
  c["axis"] = options_.axis.size() == 1 ? Json(options_.axis[0]) : Json(options_.axis);
  c["epsilon"] = options_.epsilon;
  c["center"] = options_.center;
  c["scale"] = options_.scale;
  c["rms_scaling"] = false;
  c["beta_initializer"] = initializer_config(options_.beta_initializer);
  c["gamma_initializer"] = initializer_config(options_.gamma_initializer);
  c["beta_regularizer"] = regularizer_config(options_.beta_regularizer);
  c["gamma_regularizer"] = regularizer_config(options_.gamma_regularizer);
  c["beta_constraint"] = options_.beta_constraint.config();
  c["gamma_constraint"] = options_.gamma_constraint.config();
  return c;
}

Layer layer_normalization_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "LayerNormalization");
  LayerNormalizationOptions o;
  o.name = c.name();
  o.dtype = policy_entry(c);
  if (c.has("axis"))
    o.axis = c.at("axis").is_array() ? c.get<Axes>("axis") : Axes{c.get<int64_t>("axis")};
  o.epsilon = c.get<double>("epsilon", o.epsilon);
  o.center = c.get<bool>("center", o.center);
  o.scale = c.get<bool>("scale", o.scale);
  if (c.get<bool>("rms_scaling", false)) c.fail("rms_scaling", "is true; kiln has no RMS scaling");
  o.beta_initializer = initializer_entry(c, "beta_initializer", o.beta_initializer);
  o.gamma_initializer = initializer_entry(c, "gamma_initializer", o.gamma_initializer);
  o.beta_regularizer = regularizer_entry(c, "beta_regularizer");
  o.gamma_regularizer = regularizer_entry(c, "gamma_regularizer");
  o.beta_constraint = constraint_entry(c, "beta_constraint");
  o.gamma_constraint = constraint_entry(c, "gamma_constraint");
  return LayerNormalization(o);
}

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer(std::make_shared<LayerNormalizationImpl>(std::move(options))) {}

}  // namespace kiln
