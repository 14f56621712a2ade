#include "kiln/keras/layers/pooling.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {
namespace {

int64_t pool_output_length(int64_t in, int64_t pool, int64_t stride, const std::string& padding) {
  if (in == kUnknownDim) return kUnknownDim;
  if (padding == "same") return (in + stride - 1) / stride;
  return in < pool ? 0 : (in - pool) / stride + 1;
}

void require_rank4(const std::string& layer, const std::vector<Shape>& shapes) {
  if (shapes.size() != 1 || shapes[0].rank() != 4)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects one input shape of rank "
                    "4 (batch, height, width, channels)",
                    layer));
}

// The identity of max in `dtype`: -inf for floating types, else the lowest value.
double lowest_value(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::bf16:
      return -std::numeric_limits<double>::infinity();
    case DType::i32:
      return double(std::numeric_limits<int32_t>::lowest());
    case DType::i64:
      return double(std::numeric_limits<int64_t>::lowest());
    default:
      return 0;  // u8, bool
  }
}

void require_rank3(const std::string& layer, const std::vector<Shape>& shapes) {
  if (shapes.size() != 1 || shapes[0].rank() != 3)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects one input shape of rank "
                    "3 (batch, steps, channels)",
                    layer));
}

}  // namespace

// ---- windowed pooling ----

Pooling2DImpl::Pooling2DImpl(Kind kind, Axes pool_size, Pooling2DOptions options)
    : LayerImpl(kind == Kind::kMax ? "MaxPooling2D" : "AveragePooling2D", options.name),
      kind_(kind),
      pool_size_(std::move(pool_size)),
      strides_(std::move(options.strides)),
      channels_first_(layer_util::channels_first_arg(name(), options.data_format)) {
  layer_util::pair_arg(name(), "pool_size", pool_size_);
  if (strides_.empty()) strides_ = pool_size_;
  layer_util::pair_arg(name(), "strides", strides_);
  padding_ = layer_util::padding_arg(name(), options.padding);
  input_spec = {InputSpec{.ndim = 4}};
}

Tensor Pooling2DImpl::call(const Tensor& inputs, bool) {
  // channels_first: the NHWC pooling between two transposes.
  Tensor x = channels_first_ ? layer_util::to_channels_last(inputs) : inputs;
  Tensor y = kind_ == Kind::kMax ? max_pool2d(x, pool_size_, strides_, padding_)
                                 : avg_pool2d(x, pool_size_, strides_, padding_);
  return channels_first_ ? layer_util::to_channels_first(y) : y;
}

std::vector<Shape> Pooling2DImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  require_rank4(name(), input_shapes);
  Shape out =
      channels_first_ ? layer_util::shape_to_channels_last(input_shapes[0]) : input_shapes[0];
  for (int i = 0; i < 2; ++i)
    out[1 + i] =
        pool_output_length(out[1 + i], pool_size_[size_t(i)], strides_[size_t(i)], padding_);
  return {channels_first_ ? layer_util::shape_to_channels_first(out) : out};
}

Json Pooling2DImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["pool_size"] = pool_size_;
  c["padding"] = padding_;
  c["strides"] = strides_;
  c["data_format"] = channels_first_ ? "channels_first" : "channels_last";
  return c;
}

Layer pooling2d_from_config(const Json& config, const std::string& class_name) {
  using namespace layer_config;
  ConfigReader c(config, class_name);
  Pooling2DOptions o;
  o.name = c.name();
  o.strides = pair(c, "strides", {});
  o.padding = c.get<std::string>("padding", o.padding);
  o.data_format = data_format_entry(c);
  Axes pool = pair(c, "pool_size", {2, 2});
  if (class_name == "MaxPooling2D") return MaxPooling2D(pool, o);
  return AveragePooling2D(pool, o);
}

MaxPooling2DImpl::MaxPooling2DImpl(Axes pool_size, Pooling2DOptions options)
    : Pooling2DImpl(Kind::kMax, std::move(pool_size), std::move(options)) {}
MaxPooling2D::MaxPooling2D(Axes pool_size, Pooling2DOptions options)
    : Layer(std::make_shared<MaxPooling2DImpl>(std::move(pool_size), std::move(options))) {}

AveragePooling2DImpl::AveragePooling2DImpl(Axes pool_size, Pooling2DOptions options)
    : Pooling2DImpl(Kind::kAverage, std::move(pool_size), std::move(options)) {}
AveragePooling2D::AveragePooling2D(Axes pool_size, Pooling2DOptions options)
    : Layer(std::make_shared<AveragePooling2DImpl>(std::move(pool_size), std::move(options))) {}

// ---- global pooling ----

GlobalPooling2DImpl::GlobalPooling2DImpl(Kind kind, GlobalPooling2DOptions options)
    : LayerImpl(kind == Kind::kMax ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D",
                std::move(options.name)),
      kind_(kind),
      keepdims_(options.keepdims),
      channels_first_(layer_util::channels_first_arg(name(), options.data_format)) {
  input_spec = {InputSpec{.ndim = 4}};
}

Tensor GlobalPooling2DImpl::call(const Tensor& x, bool) {
  // channels_first: the spatial axes are 2 and 3 (keepdims gives [batch, channels, 1, 1]).
  Axes spatial = channels_first_ ? Axes{2, 3} : Axes{1, 2};
  return kind_ == Kind::kMax ? max(x, spatial, keepdims_) : mean(x, spatial, keepdims_);
}

std::vector<Shape> GlobalPooling2DImpl::compute_output_shape(
    const std::vector<Shape>& input_shapes) {
  require_rank4(name(), input_shapes);
  const Shape& s = input_shapes[0];
  if (channels_first_) return {keepdims_ ? Shape{s[0], s[1], 1, 1} : Shape{s[0], s[1]}};
  return {keepdims_ ? Shape{s[0], 1, 1, s[3]} : Shape{s[0], s[3]}};
}

Json GlobalPooling2DImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["data_format"] = channels_first_ ? "channels_first" : "channels_last";
  c["keepdims"] = keepdims_;
  return c;
}

Layer global_pooling2d_from_config(const Json& config, const std::string& class_name) {
  ConfigReader c(config, class_name);
  GlobalPooling2DOptions o;
  o.name = c.name();
  o.keepdims = c.get<bool>("keepdims", o.keepdims);
  o.data_format = layer_config::data_format_entry(c);
  if (class_name == "GlobalMaxPooling2D") return GlobalMaxPooling2D(o);
  return GlobalAveragePooling2D(o);
}

GlobalAveragePooling2DImpl::GlobalAveragePooling2DImpl(GlobalPooling2DOptions options)
    : GlobalPooling2DImpl(Kind::kAverage, std::move(options)) {}
GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalPooling2DOptions options)
    : Layer(std::make_shared<GlobalAveragePooling2DImpl>(std::move(options))) {}

GlobalMaxPooling2DImpl::GlobalMaxPooling2DImpl(GlobalPooling2DOptions options)
    : GlobalPooling2DImpl(Kind::kMax, std::move(options)) {}
GlobalMaxPooling2D::GlobalMaxPooling2D(GlobalPooling2DOptions options)
    : Layer(std::make_shared<GlobalMaxPooling2DImpl>(std::move(options))) {}

// ---- 1-D windowed pooling: the 2-D ops on [batch, 1, steps, channels] ----

Pooling1DImpl::Pooling1DImpl(Kind kind, int64_t pool_size, Pooling1DOptions options)
    : LayerImpl(kind == Kind::kMax ? "MaxPooling1D" : "AveragePooling1D", options.name),
      kind_(kind),
      pool_size_(pool_size),
      strides_(options.strides.value_or(pool_size)),
      channels_first_(layer_util::channels_first_arg(name(), options.data_format)) {
  layer_util::positive_arg(name(), "pool_size", pool_size_);
  layer_util::positive_arg(name(), "strides", strides_);
  padding_ = layer_util::padding_arg(name(), options.padding);
  input_spec = {InputSpec{.ndim = 3}};
}

Tensor Pooling1DImpl::call(const Tensor& x, bool) {
  if (x.is_placeholder())  // a functional model being built: types only
    return Tensor::symbolic({x.dtype(), compute_output_shape({x.shape()})[0]}, nullptr);
  layer_util::require_one_unknown_dim(*this, x);
  // channels_first ([batch, channels, steps]): pooled channels-last between two transposes.
  Tensor x4 = expand_dims(channels_first_ ? layer_util::to_channels_last(x) : x, 1);
  Axes pool{1, pool_size_}, strides{1, strides_};
  Tensor y = squeeze(kind_ == Kind::kMax ? max_pool2d(x4, pool, strides, padding_)
                                         : avg_pool2d(x4, pool, strides, padding_),
                     {1});
  return channels_first_ ? layer_util::to_channels_first(y) : y;
}

std::vector<Shape> Pooling1DImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  require_rank3(name(), input_shapes);
  Shape out = input_shapes[0];
  const int steps = channels_first_ ? 2 : 1;
  out[steps] = pool_output_length(out[steps], pool_size_, strides_, padding_);
  return {out};
}

Json Pooling1DImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["pool_size"] = Json::array({pool_size_});
  c["padding"] = padding_;
  c["strides"] = Json::array({strides_});
  c["data_format"] = channels_first_ ? "channels_first" : "channels_last";
  return c;
}

Layer pooling1d_from_config(const Json& config, const std::string& class_name) {
  using namespace layer_config;
  ConfigReader c(config, class_name);
  Pooling1DOptions o;
  o.name = c.name();
  if (c.has("strides")) o.strides = single(c, "strides", 0);
  o.padding = c.get<std::string>("padding", o.padding);
  o.data_format = data_format_entry(c);
  int64_t pool = single(c, "pool_size", 2);
  if (class_name == "MaxPooling1D") return MaxPooling1D(pool, o);
  return AveragePooling1D(pool, o);
}

MaxPooling1DImpl::MaxPooling1DImpl(int64_t pool_size, Pooling1DOptions options)
    : Pooling1DImpl(Kind::kMax, pool_size, std::move(options)) {}
MaxPooling1D::MaxPooling1D(int64_t pool_size, Pooling1DOptions options)
    : Layer(std::make_shared<MaxPooling1DImpl>(pool_size, std::move(options))) {}

AveragePooling1DImpl::AveragePooling1DImpl(int64_t pool_size, Pooling1DOptions options)
    : Pooling1DImpl(Kind::kAverage, pool_size, std::move(options)) {}
AveragePooling1D::AveragePooling1D(int64_t pool_size, Pooling1DOptions options)
    : Layer(std::make_shared<AveragePooling1DImpl>(pool_size, std::move(options))) {}

// ---- 1-D global pooling (mask-aware) ----

GlobalPooling1DImpl::GlobalPooling1DImpl(Kind kind, GlobalPooling1DOptions options)
    : LayerImpl(kind == Kind::kMax ? "GlobalMaxPooling1D" : "GlobalAveragePooling1D",
                std::move(options.name)),
      kind_(kind),
      keepdims_(options.keepdims),
      channels_first_(layer_util::channels_first_arg(name(), options.data_format)) {
  supports_masking = true;
  input_spec = {InputSpec{.ndim = 3}};
}

Tensor GlobalPooling1DImpl::call(const Tensor& x, bool) {
  const int64_t steps = channels_first_ ? 2 : 1;  // channels_first: [batch, channels, steps]
  return kind_ == Kind::kMax ? max(x, {steps}, keepdims_) : mean(x, {steps}, keepdims_);
}

std::vector<Tensor> GlobalPooling1DImpl::call_masked(const std::vector<Tensor>& inputs,
                                                     const std::vector<Tensor>& masks,
                                                     bool training) {
  if (inputs.size() != 1)
    throw Error(fmt::format("layer \"{}\" ({}) takes one input, but it was called with {}", name(),
                            class_name(), inputs.size()));
  if (masks.empty() || !masks[0].defined()) return {call(inputs[0], training)};
  // The mask is [batch, steps]; a channels-first input is pooled channels-last (Keras expands
  // the mask on the channels axis instead: the same sums).
  const Tensor x = channels_first_ ? layer_util::to_channels_last(inputs[0]) : inputs[0];
  Tensor mask = layer_util::sequence_mask(name(), x, masks[0]);
  if (x.is_placeholder()) return {call(inputs[0], training)};  // a functional model: types only
  layer_util::require_one_unknown_dim(*this, x);
  Tensor keep = expand_dims(mask, 2);  // [batch, steps, 1]: broadcasts over the channels
  Tensor y;
  if (kind_ == Kind::kMax) {
    y = max(where(keep, x, scalar(lowest_value(x.dtype()), x.dtype())), {1}, keepdims_);
  } else {
    Tensor weight = cast(keep, x.dtype());
    y = sum(x * weight, {1}, keepdims_) / sum(weight, {1}, keepdims_);
  }
  return {channels_first_ && keepdims_ ? layer_util::to_channels_first(y) : y};
}

std::vector<Tensor> GlobalPooling1DImpl::compute_mask(const std::vector<Tensor>&,
                                                      const std::vector<Tensor>&) {
  return {};
}

std::vector<Shape> GlobalPooling1DImpl::compute_output_shape(
    const std::vector<Shape>& input_shapes) {
  require_rank3(name(), input_shapes);
  const Shape& s = input_shapes[0];
  if (channels_first_) return {keepdims_ ? Shape{s[0], s[1], 1} : Shape{s[0], s[1]}};
  return {keepdims_ ? Shape{s[0], 1, s[2]} : Shape{s[0], s[2]}};
}

Json GlobalPooling1DImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["data_format"] = channels_first_ ? "channels_first" : "channels_last";
  c["keepdims"] = keepdims_;
  return c;
}

Layer global_pooling1d_from_config(const Json& config, const std::string& class_name) {
  ConfigReader c(config, class_name);
  GlobalPooling1DOptions o;
  o.name = c.name();
  o.keepdims = c.get<bool>("keepdims", o.keepdims);
  o.data_format = layer_config::data_format_entry(c);
  if (class_name == "GlobalMaxPooling1D") return GlobalMaxPooling1D(o);
  return GlobalAveragePooling1D(o);
}

GlobalAveragePooling1DImpl::GlobalAveragePooling1DImpl(GlobalPooling1DOptions options)
    : GlobalPooling1DImpl(Kind::kAverage, std::move(options)) {}
GlobalAveragePooling1D::GlobalAveragePooling1D(GlobalPooling1DOptions options)
    : Layer(std::make_shared<GlobalAveragePooling1DImpl>(std::move(options))) {}

GlobalMaxPooling1DImpl::GlobalMaxPooling1DImpl(GlobalPooling1DOptions options)
    : GlobalPooling1DImpl(Kind::kMax, std::move(options)) {}
GlobalMaxPooling1D::GlobalMaxPooling1D(GlobalPooling1DOptions options)
    : Layer(std::make_shared<GlobalMaxPooling1DImpl>(std::move(options))) {}

}  // namespace kiln
