#include "kiln/keras/layers/reshaping.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {
namespace {

// Product of the dimensions after the batch one, or -1 if one of them is unknown.
int64_t non_batch_size(const Shape& s) {
  int64_t n = 1;
  for (int i = 1; i < s.rank(); ++i) {
    if (s[i] == kUnknownDim) return kUnknownDim;
    n *= s[i];
  }
  return n;
}

}  // namespace

// ---- Flatten ----

FlattenImpl::FlattenImpl(FlattenOptions options)
    : LayerImpl("Flatten", std::move(options.name)),
      channels_first_(layer_util::channels_first_arg(name(), options.data_format)) {
  input_spec = {InputSpec{.min_ndim = 1}};
}

std::vector<Shape> FlattenImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1 || input_shapes[0].rank() < 1)
    throw Error(fmt::format("layer \"{}\": Flatten expects one input shape of rank >= 1", name()));
  return {Shape{input_shapes[0][0], non_batch_size(input_shapes[0])}};
}

Tensor FlattenImpl::call(const Tensor& inputs, bool) {
  // Keras: a channels-first input of rank >= 3 is made channels-last before flattening.
  const Tensor x =
      channels_first_ && inputs.rank() >= 3 ? layer_util::to_channels_last(inputs) : inputs;
  const Shape& s = x.shape();
  int64_t batch = s[0], rest = non_batch_size(s);
  if (batch == kUnknownDim && rest == kUnknownDim)
    throw Error(
        fmt::format("layer \"{}\": cannot flatten an input of shape {}: the batch "
                    "dimension and another dimension are both unknown",
                    name(), s.to_string()));
  return reshape(x, {batch == kUnknownDim ? -1 : batch, rest == kUnknownDim ? -1 : rest});
}

Json FlattenImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["data_format"] = channels_first_ ? "channels_first" : "channels_last";
  return c;
}

Layer flatten_from_config(const Json& config) {
  ConfigReader c(config, "Flatten");
  return Flatten(
      FlattenOptions{.data_format = layer_config::data_format_entry(c), .name = c.name()});
}

Flatten::Flatten(FlattenOptions options)
    : Layer(std::make_shared<FlattenImpl>(std::move(options))) {}

// ---- Reshape ----

ReshapeImpl::ReshapeImpl(Axes target_shape, ReshapeOptions options)
    : LayerImpl("Reshape", std::move(options.name)), target_shape_(std::move(target_shape)) {
  int unknown = 0;
  bool ok = int(target_shape_.size()) + 1 <= kMaxRank;
  for (int64_t d : target_shape_) {
    if (d == -1) ++unknown;
    ok = ok && (d > 0 || d == -1);
  }
  if (!ok || unknown > 1)
    throw Error(
        fmt::format("layer \"{}\": invalid target_shape ({}); it excludes the batch "
                    "dimension and holds positive sizes and at most one -1 (at most {} "
                    "dimensions)",
                    name(), fmt::join(target_shape_, ", "), kMaxRank - 1));
}

Shape ReshapeImpl::output_shape(const Shape& in) const {
  if (in.rank() < 1)
    throw Error(
        fmt::format("layer \"{}\": Reshape needs an input with a batch dimension, got "
                    "shape {}",
                    name(), in.to_string()));
  int64_t total = non_batch_size(in), known = 1;
  int infer = -1;
  for (size_t i = 0; i < target_shape_.size(); ++i) {
    if (target_shape_[i] == -1)
      infer = int(i);
    else
      known *= target_shape_[i];
  }
  Axes out = target_shape_;
  bool ok = true;
  if (total != kUnknownDim) {
    if (infer >= 0) {
      ok = total % known == 0;
      out[size_t(infer)] = total / known;
    } else {
      ok = total == known;
    }
  }
  if (!ok)
    throw Error(
        fmt::format("layer \"{}\": The total size of the tensor must be unchanged. "
                    "Received: input_shape={}, target_shape=({}); the input has {} "
                    "elements per batch entry",
                    name(), in.to_string(), fmt::join(target_shape_, ", "), total));
  out.insert(out.begin(), in[0]);
  return Shape(out);
}

std::vector<Shape> ReshapeImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1)
    throw Error(fmt::format("layer \"{}\": Reshape takes one input", name()));
  return {output_shape(input_shapes[0])};
}

Tensor ReshapeImpl::call(const Tensor& x, bool) {
  Shape out = output_shape(x.shape());
  int unknown = 0;
  for (int64_t d : out) unknown += d == kUnknownDim;
  if (unknown > 1)
    throw Error(
        fmt::format("layer \"{}\": cannot reshape an input of shape {} to (batch, {}): "
                    "too many unknown dimensions",
                    name(), x.shape().to_string(), fmt::join(target_shape_, ", ")));
  return reshape(x, out.to_vector());
}

Json ReshapeImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["target_shape"] = target_shape_;
  return c;
}

Layer reshape_from_config(const Json& config) {
  ConfigReader c(config, "Reshape");
  return Reshape(c.get<Axes>("target_shape"), ReshapeOptions{.name = c.name()});
}

Reshape::Reshape(Axes target_shape, ReshapeOptions options)
    : Layer(std::make_shared<ReshapeImpl>(std::move(target_shape), std::move(options))) {}

}  // namespace kiln
