// Convolutions, pooling, attention and dropout (matmul is generated from the op table:
// ops_generated.cc).
#include <fmt/format.h>

#include <cmath>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/ops.h"

namespace kiln {

using detail::apply;

namespace {
Attrs conv_attrs(const Axes& strides, const std::string& padding, const Axes& dilations) {
  return Attrs{{"strides", strides}, {"dilations", dilations}, {"padding", padding}};
}
Attrs pool_attrs(const Axes& pool_size, const Axes& strides, const std::string& padding) {
  return Attrs{{"pool_size", pool_size},
               {"strides", strides.empty() ? pool_size : strides},
               {"padding", padding}};
}
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& filter, const Axes& strides,
              const std::string& padding, const Axes& dilations) {
  return apply(OpKind::Conv2D, {input, filter}, conv_attrs(strides, padding, dilations));
}

Tensor conv2d_backprop_input(const Shape& input_shape, const Tensor& filter, const Tensor& out_grad,
                             const Axes& strides, const std::string& padding,
                             const Axes& dilations) {
  Attrs attrs = conv_attrs(strides, padding, dilations);
  attrs.set("input_shape", input_shape.to_vector());
  return apply(OpKind::Conv2DBackpropInput, {filter, out_grad}, attrs);
}

Tensor conv2d_backprop_filter(const Tensor& input, const Shape& filter_shape,
                              const Tensor& out_grad, const Axes& strides,
                              const std::string& padding, const Axes& dilations) {
  Attrs attrs = conv_attrs(strides, padding, dilations);
  attrs.set("filter_shape", filter_shape.to_vector());
  return apply(OpKind::Conv2DBackpropFilter, {input, out_grad}, attrs);
}

Tensor max_pool2d(const Tensor& x, const Axes& pool_size, const Axes& strides,
                  const std::string& padding) {
  return apply(OpKind::MaxPool2D, {x}, pool_attrs(pool_size, strides, padding));
}

Tensor avg_pool2d(const Tensor& x, const Axes& pool_size, const Axes& strides,
                  const std::string& padding) {
  return apply(OpKind::AvgPool2D, {x}, pool_attrs(pool_size, strides, padding));
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                 std::optional<double> scale, bool causal) {
  if (!scale) {
    const int64_t d = q.defined() && q.rank() >= 1 ? q.shape().dim(-1) : 0;
    if (d <= 0)
      throw Error(fmt::format(
          "attention: the default scale is 1 / sqrt(d) with d the last axis of q, but q has "
          "shape {}; pass the scale explicitly",
          q.defined() ? q.shape().to_string() : std::string("(undefined)")));
    scale = 1.0 / std::sqrt(double(d));
  }
  Attrs attrs{{"scale", *scale}, {"causal", causal}};
  if (mask.defined()) return apply(OpKind::Attention, {q, k, v, mask}, attrs);
  return apply(OpKind::Attention, {q, k, v}, attrs);
}

Tensor dropout(const Tensor& x, double rate, int64_t seed) {
  return dropout(x, rate, tensor(std::vector<int64_t>{seed}, Shape{}));
}

Tensor dropout(const Tensor& x, double rate, const Tensor& seed) {
  if (!(rate >= 0 && rate < 1))
    throw Error(fmt::format("dropout: rate must be in [0, 1), got {}", rate));
  if (rate == 0) return x;
  // The mask takes x's shape at run time (x may have unknown dimensions in a trace). bfloat16
  // draws float32 (random_uniform refuses bf16: ir/ops.def), so the rate is not rounded either.
  const DType draw = x.dtype() == DType::bf16 ? DType::f32 : x.dtype();
  Tensor u = random_uniform_like(x, seed, 0, 1, draw);
  Tensor keep = greater_equal(u, scalar(rate, draw));
  return where(keep, x * (1.0 / (1.0 - rate)), scalar(0, x.dtype()));
}

}  // namespace kiln
