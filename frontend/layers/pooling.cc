#include "frontend/layers/pooling.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "frontend/layers/layer_util.h"

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

}  // namespace

// ---- windowed pooling ----

Pooling2DImpl::Pooling2DImpl(Kind kind, Axes pool_size, Pooling2DOptions options)
    : LayerImpl(kind == Kind::kMax ? "MaxPooling2D" : "AveragePooling2D", options.name),
      kind_(kind),
      pool_size_(std::move(pool_size)),
      strides_(std::move(options.strides)) {
  layer_util::pair_arg(name(), "pool_size", pool_size_);
  if (strides_.empty()) strides_ = pool_size_;
  layer_util::pair_arg(name(), "strides", strides_);
  padding_ = layer_util::padding_arg(name(), options.padding);
  input_spec = {InputSpec{.ndim = 4}};
}

Tensor Pooling2DImpl::call(const Tensor& x, bool) {
  return kind_ == Kind::kMax ? max_pool2d(x, pool_size_, strides_, padding_)
                             : avg_pool2d(x, pool_size_, strides_, padding_);
}

std::vector<Shape> Pooling2DImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  require_rank4(name(), input_shapes);
  Shape out = input_shapes[0];
  for (int i = 0; i < 2; ++i)
    out[1 + i] =
        pool_output_length(out[1 + i], pool_size_[size_t(i)], strides_[size_t(i)], padding_);
  return {out};
}

Json Pooling2DImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["pool_size"] = pool_size_;
  c["padding"] = padding_;
  c["strides"] = strides_;
  c["data_format"] = "channels_last";
  return c;
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
      keepdims_(options.keepdims) {
  input_spec = {InputSpec{.ndim = 4}};
}

Tensor GlobalPooling2DImpl::call(const Tensor& x, bool) {
  return kind_ == Kind::kMax ? max(x, {1, 2}, keepdims_) : mean(x, {1, 2}, keepdims_);
}

std::vector<Shape> GlobalPooling2DImpl::compute_output_shape(
    const std::vector<Shape>& input_shapes) {
  require_rank4(name(), input_shapes);
  const Shape& s = input_shapes[0];
  return {keepdims_ ? Shape{s[0], 1, 1, s[3]} : Shape{s[0], s[3]}};
}

Json GlobalPooling2DImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["data_format"] = "channels_last";
  c["keepdims"] = keepdims_;
  return c;
}

GlobalAveragePooling2DImpl::GlobalAveragePooling2DImpl(GlobalPooling2DOptions options)
    : GlobalPooling2DImpl(Kind::kAverage, std::move(options)) {}
GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalPooling2DOptions options)
    : Layer(std::make_shared<GlobalAveragePooling2DImpl>(std::move(options))) {}

GlobalMaxPooling2DImpl::GlobalMaxPooling2DImpl(GlobalPooling2DOptions options)
    : GlobalPooling2DImpl(Kind::kMax, std::move(options)) {}
GlobalMaxPooling2D::GlobalMaxPooling2D(GlobalPooling2DOptions options)
    : Layer(std::make_shared<GlobalMaxPooling2DImpl>(std::move(options))) {}

}  // namespace kiln
