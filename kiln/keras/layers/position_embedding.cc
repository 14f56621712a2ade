#include "kiln/keras/layers/position_embedding.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {

PositionEmbeddingImpl::PositionEmbeddingImpl(int64_t sequence_length,
                                             PositionEmbeddingOptions options)
    : LayerImpl("PositionEmbedding", options.name),
      sequence_length_(sequence_length),
      options_(std::move(options)) {
  use_dtype_option(options_.dtype);
  if (sequence_length <= 0)
    throw Error(
        fmt::format("layer \"{}\": `sequence_length` must be a positive integer, received {}",
                    name(), sequence_length));
  supports_masking = true;
  input_spec = {InputSpec{.min_ndim = 2}};
}

void PositionEmbeddingImpl::build(const Shape& input_shape) {
  const int64_t features = input_shape[input_shape.rank() - 1];
  if (features == kUnknownDim)
    throw Error(fmt::format(
        "layer \"{}\": the feature dimension (last axis) of the inputs should be defined. "
        "Found None. Full input shape received: {}",
        name(), input_shape.to_string()));
  embeddings = add_weight("embeddings", {sequence_length_, features}, options_.initializer, true,
                          variable_dtype());
  input_spec = {InputSpec{.min_ndim = 2, .axes = {{-1, features}}}};
}

Tensor PositionEmbeddingImpl::call(const Tensor& x, bool) {
  const Shape& s = x.shape();
  const int64_t steps = s[s.rank() - 2], features = s[s.rank() - 1];
  if (steps == kUnknownDim) {
    if (x.is_placeholder()) return Tensor::symbolic({compute_dtype(), s}, nullptr);
    throw Error(fmt::format(
        "layer \"{}\": PositionEmbedding traced with an unknown number of positions (input "
        "{}); trace with the sequence length known (an input_signature with a fixed timesteps "
        "dimension)",
        name(), s.to_string()));
  }
  if (steps > sequence_length_)
    throw Error(fmt::format(
        "layer \"{}\": the input has {} positions (axis -2 of shape {}), more than the layer's "
        "sequence_length={}; create the layer with sequence_length >= {} or shorten the input",
        name(), steps, s.to_string(), sequence_length_, steps));
  Tensor table = slice(read_weight(embeddings), {0, 0}, {steps, features});
  return broadcast_like(table, x);
}

std::vector<Shape> PositionEmbeddingImpl::compute_output_shape(
    const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1 || input_shapes[0].rank() < 2)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects one input shape of rank >= 2 (..., "
                    "timesteps, features)",
                    name()));
  return {input_shapes[0]};
}

Json PositionEmbeddingImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["sequence_length"] = sequence_length_;
  c["initializer"] = layer_util::initializer_config(options_.initializer);
  return c;
}

Layer position_embedding_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "PositionEmbedding");
  PositionEmbeddingOptions o;
  o.name = c.name();
  o.dtype = policy_entry(c);
  o.initializer = initializer_entry(c, "initializer", o.initializer);
  return PositionEmbedding(c.get<int64_t>("sequence_length"), o);
}

PositionEmbedding::PositionEmbedding(int64_t sequence_length, PositionEmbeddingOptions options)
    : Layer(std::make_shared<PositionEmbeddingImpl>(sequence_length, std::move(options))) {}

}  // namespace kiln
