// TimeDistributed (wrappers.h): the inner layer on [batch * timesteps, ...].
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"
#include "kiln/keras/layers/wrappers.h"

namespace kiln {
namespace {

// A shape as reshape's target: its one unknown dimension (if any) becomes -1. Throws naming
// the layer when more than one is unknown (a trace with unknown batch and timesteps).
Axes reshape_target(const std::string& layer, const Shape& target, const Shape& input) {
  Axes out = target.to_vector();
  int unknown = 0;
  for (int64_t& d : out)
    if (d == kUnknownDim) {
      d = -1;
      ++unknown;
    }
  if (unknown > 1)
    throw Error(fmt::format(
        "layer \"{}\": TimeDistributed cannot fold time into the batch of an input of shape {} "
        "(to {}): more than one dimension is unknown; trace with a known number of timesteps "
        "(an input_signature with a fixed timesteps dimension)",
        layer, input.to_string(), target.to_string()));
  return out;
}

// [batch, timesteps, rest...] -> [batch * timesteps, rest...] (unknown if either is).
Shape folded_shape(const Shape& s) {
  Shape out{s[0] == kUnknownDim || s[1] == kUnknownDim ? kUnknownDim : s[0] * s[1]};
  for (int d = 2; d < s.rank(); ++d) out.push_back(s[d]);
  return out;
}

Tensor fold(const std::string& layer, const Tensor& x) {
  Shape target = folded_shape(x.shape());
  if (x.is_placeholder()) return Tensor::symbolic({x.dtype(), target}, nullptr);
  return reshape(x, reshape_target(layer, target, x.shape()));
}

}  // namespace

TimeDistributedImpl::TimeDistributedImpl(Layer layer, TimeDistributedOptions options)
    : LayerImpl("TimeDistributed", std::move(options.name)), layer_(std::move(layer)) {
  if (!layer_.defined())
    throw Error(fmt::format(
        "layer \"{}\": Please initialize `TimeDistributed` layer with a layer instance; the "
        "layer handle given is empty",
        name()));
  track_layer(layer_);
  supports_masking = true;  // compute_mask: the input mask, unchanged
}

void TimeDistributedImpl::build(const Shape& input_shape) {
  if (input_shape.rank() < 3)
    throw Error(fmt::format(
        "layer \"{}\": `TimeDistributed` Layer should be passed an input of shape [batch, "
        "timesteps, ...] (at least 3 dimensions); received an input of shape {}",
        name(), input_shape.to_string()));
  layer_->maybe_build({folded_shape(input_shape)});
}

Tensor TimeDistributedImpl::call(const Tensor& x, bool training) {
  return run(x, Tensor(), training);
}

std::vector<Tensor> TimeDistributedImpl::call_masked(const std::vector<Tensor>& inputs,
                                                     const std::vector<Tensor>& masks,
                                                     bool training) {
  if (inputs.size() != 1)
    throw Error(fmt::format("layer \"{}\" ({}) takes one input, but it was called with {}", name(),
                            class_name(), inputs.size()));
  return {run(inputs[0], masks.empty() ? Tensor() : masks[0], training)};
}

Tensor TimeDistributedImpl::run(const Tensor& x, const Tensor& mask, bool training) {
  const Shape& s = x.shape();
  if (s.rank() < 3)
    throw Error(fmt::format(
        "layer \"{}\": `TimeDistributed` Layer should be passed an input of shape [batch, "
        "timesteps, ...] (at least 3 dimensions); received an input of shape {}",
        name(), s.to_string()));
  Tensor folded = fold(name(), x);
  if (mask.defined()) {
    const Shape& m = mask.shape();
    bool ok = m.rank() >= 2;
    for (int d = 0; ok && d < 2; ++d)
      ok = m[d] == s[d] || m[d] == kUnknownDim || s[d] == kUnknownDim;
    if (!ok)
      throw Error(fmt::format(
          "layer \"{}\": `TimeDistributed` Layer should be passed a mask of shape [batch, "
          "timesteps, ...] matching the input's first two axes; got a mask of shape {} for an "
          "input of shape {}",
          name(), m.to_string(), s.to_string()));
    // A [batch, timesteps] mask says which steps exist, not what is inside one: the inner
    // layer gets only masks with more axes, folded like the input.
    if (m.rank() > 2) folded = folded.with_keras_mask(fold(name(), mask));
  }
  std::vector<Tensor> out = layer_(std::vector<Tensor>{folded}, training);
  if (out.size() != 1)
    throw Error(fmt::format(
        "layer \"{}\": TimeDistributed needs an inner layer with one output; \"{}\" ({}) "
        "returned {}",
        name(), layer_->name(), layer_->class_name(), out.size()));
  const Shape& ys = out[0].shape();
  const int64_t rows = folded.shape()[0];
  if (ys.rank() < 1 || (ys[0] != rows && ys[0] != kUnknownDim && rows != kUnknownDim))
    throw Error(fmt::format(
        "layer \"{}\": the inner layer \"{}\" ({}) must keep the batch axis: it got an input "
        "of shape {} (batch * timesteps first) and returned shape {}",
        name(), layer_->name(), layer_->class_name(), folded.shape().to_string(), ys.to_string()));
  Shape target{s[0], s[1]};
  for (int d = 1; d < ys.rank(); ++d) target.push_back(ys[d]);
  if (x.is_placeholder()) return Tensor::symbolic({out[0].dtype(), target}, nullptr);
  return reshape(out[0], reshape_target(name(), target, s));
}

Json TimeDistributedImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["layer"] = {{"class_name", layer_->class_name()}, {"config", layer_->get_config()}};
  return c;
}

Layer time_distributed_from_config(const Json& config, const LayerSpecReader& inner_from_config) {
  ConfigReader c(config, "TimeDistributed");
  return TimeDistributed(layer_config::inner_layer(c, "layer", inner_from_config),
                         TimeDistributedOptions{.name = c.name()});
}

TimeDistributed::TimeDistributed(Layer layer, TimeDistributedOptions options)
    : Layer(std::make_shared<TimeDistributedImpl>(std::move(layer), std::move(options))) {}

}  // namespace kiln
