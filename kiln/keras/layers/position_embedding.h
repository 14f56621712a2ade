// PositionEmbedding: learned position embeddings (keras_hub.layers.PositionEmbedding).
//
// Weight "embeddings" [sequence_length, features], created at the first call from the input's
// last axis. Called on x [..., timesteps, features] (usually [batch, timesteps, features]) it
// returns embeddings[:timesteps] broadcast to x's shape: only the positional part, which users
// add to x (x + position_embedding(x)). timesteps may be at most sequence_length. The input
// mask passes through (supports_masking).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"

namespace kiln {

struct PositionEmbeddingOptions {
  Initializer initializer = "glorot_uniform";
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "position_embedding", "position_embedding_1", ...
};

class PositionEmbeddingImpl : public LayerImpl {
 public:
  PositionEmbeddingImpl(int64_t sequence_length, PositionEmbeddingOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + "sequence_length", "initializer"

  int64_t sequence_length() const { return sequence_length_; }
  Variable embeddings;  // undefined until built

 private:
  int64_t sequence_length_;
  PositionEmbeddingOptions options_;
};

class PositionEmbedding : public Layer {
  KILN_LAYER_HANDLE(PositionEmbedding)
 public:
  explicit PositionEmbedding(int64_t sequence_length, PositionEmbeddingOptions options = {});
};

// keras_hub's PositionEmbedding.from_config: the layer get_config's config describes
// (kiln::Error naming the layer and the entry for a bad config).
Layer position_embedding_from_config(const Json& config);

}  // namespace kiln
