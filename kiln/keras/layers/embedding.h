// Embedding: maps integer indices to dense vectors (Keras' Embedding).
//
// Weight "embeddings" (input_dim, output_dim), created at the first call. An input of integer
// indices of shape (batch, ...) gives (batch, ..., output_dim): row `i` of the table for each
// index `i`. Indices must be int32 or int64 (uint8 is widened) in [0, input_dim). Floating
// inputs (what Input(shape) gives) are cast to int32 as Keras casts them: concrete values must
// be whole numbers (kiln::Error naming the layer otherwise); traced ones are cast toward zero,
// as Keras does. Bool inputs throw kiln::Error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"

namespace kiln {

struct EmbeddingOptions {
  // Keras' "uniform": uniform in [-0.05, 0.05].
  Initializer embeddings_initializer = initializers::random_uniform(-0.05, 0.05);
  Regularizer embeddings_regularizer{};
  Constraint embeddings_constraint{};  // applied after each optimizer update
  Regularizer activity_regularizer{};
  // Keras' mask_zero: index 0 is padding; the output carries the mask `indices != 0`, which
  // recurrent layers, attention, pooling, losses and metrics then respect.
  bool mask_zero = false;
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "embedding", "embedding_1", ...
};

// input_dim and output_dim must be positive.
class EmbeddingImpl : public LayerImpl {
 public:
  EmbeddingImpl(int64_t input_dim, int64_t output_dim, EmbeddingOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& indices, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  // indices != 0 with mask_zero, else no mask.
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  Json get_config() const override;

  int64_t input_dim() const { return input_dim_; }
  int64_t output_dim() const { return output_dim_; }
  Variable embeddings;  // undefined until built

 private:
  int64_t input_dim_, output_dim_;
  EmbeddingOptions options_;
};

class Embedding : public Layer {
  KILN_LAYER_HANDLE(Embedding)
 public:
  Embedding(int64_t input_dim, int64_t output_dim, EmbeddingOptions options = {});
};

// Keras' Embedding.from_config: the layer get_config's config describes (kiln::Error naming
// the layer and the entry for a bad config).
Layer embedding_from_config(const Json& config);

}  // namespace kiln
