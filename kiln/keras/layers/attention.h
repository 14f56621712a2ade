// MultiHeadAttention with Keras 3's arguments, weights, masks and math.
//
// Inputs [batch, Tq, dq] (query), [batch, Tv, dv] (value) and [batch, Tv, dk] (key, default:
// the value). Output [batch, Tq, output_shape] (default output_shape: dq); with
// return_attention_scores also the attention probabilities [batch, num_heads, Tq, Tv] (before
// dropout, as Keras returns them).
//
// Math (Keras): per head, q = (query @ Wq + bq) / sqrt(key_dim), k = key @ Wk + bk,
// v = value @ Wv + bv; scores = q k^T over key_dim; masked positions get -1e9 (Keras' large
// negative number; set with `where`, so a row whose keys are all masked attends uniformly);
// softmax over the keys; dropout on the probabilities in training; output = (probs v) @ Wo + bo
// over the heads and value_dim. Each projection is one GEMM with its kernel seen as
// [d, num_heads * key_dim]. Everything is kiln ops: it differentiates and traces.
//
// Fused attention: when a call returns no attention scores and applies no dropout to the
// probabilities (dropout == 0 or not training), the scores, mask, softmax and weighted sum of
// all heads are one kiln::attention op on [heads, batch, T, key_dim] (ops.h: online softmax
// over blocks of keys, the [heads, batch, Tq, Tv] tensor is never stored, the causal mask is an
// attribute, masked key blocks are skipped), and its gradient one attention_grad op. Its
// results equal the composed ops' up to rounding order. In a trace it also needs the query or
// the value length known; otherwise, and with scores or dropout, the layer composes matmul,
// where and softmax as above.
//
// Weights (Keras' shapes, names and order): query/kernel [dq, heads, key_dim], query/bias
// [heads, key_dim], key/kernel [dk, heads, key_dim], key/bias, value/kernel
// [dv, heads, value_dim], value/bias [heads, value_dim], attention_output/kernel
// [heads, value_dim, output_shape], attention_output/bias [output_shape]; named
// "<layer>/query/kernel", ... (no biases without use_bias).
//
// Masks (Keras' _compute_attention_mask): the keras_mask() of the query [batch, Tq], of the
// value and of the key [batch, Tv] (Embedding(mask_zero), Masking, with_keras_mask), the
// attention_mask and the causal mask (query i sees keys j <= i) are and-ed into one
// [batch, Tq, Tv] mask. The output carries the query's mask.
//
// The call. Keras' call takes per-call keyword arguments; a kiln layer takes a list of tensors
// (that is what functional-model nodes and kiln::function record), so:
//   layer({query, value}), layer({query, value, key}): as Keras' layer(query, value[, key]);
//   layer({query, value, key, attention_mask}): the attention mask is the fourth input (pass
//     the value again as the key for the default key). As an input it is recorded in
//     functional models and is a traced argument of kiln::function like any tensor;
//   layer({x}): self-attention (query = value = key = x), so the layer also fits in a
//     Sequential model (a kiln extension: Keras requires the value);
//   use_causal_mask and return_attention_scores are layer options (MultiHeadAttentionOptions),
//     so a Sequential/functional model or a traced function calls the layer as configured;
//   attend(query, value, key, {.attention_mask, .use_causal_mask, .return_attention_scores},
//     training) is the Keras-like call with per-call options that override the layer's for
//     that call (same life cycle: build, name scope, masks, losses). In a functional model the
//     nodes replay with the layer's options, so attend refuses symbolic (kiln::Input) tensors
//     with per-call flags that differ from them.
//
// Not supported: attention_axes (inputs are rank 3), a multi-dimensional output_shape,
// constraints. Inside kiln::function each input needs its batch size or its length known
// (kiln's reshape infers one unknown dimension; splitting the heads needs it), and
// use_causal_mask on the composed path needs both lengths known.
#pragma once

#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/keras/layers/layer.h"

namespace kiln {

struct MultiHeadAttentionOptions {
  std::optional<int64_t> value_dim{};  // per head; default key_dim
  double dropout = 0;                  // of the attention probabilities, in [0, 1)
  bool use_bias = true;
  std::optional<int64_t> output_shape{};  // last output dimension; default the query's
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer{};
  Regularizer bias_regularizer{};
  Constraint kernel_constraint{};  // applied after each optimizer update
  Constraint bias_constraint{};
  // Applied to the outputs of the four projections, as Keras' sublayers do.
  Regularizer activity_regularizer{};
  // Of the dropout's SeedGenerator ("<name>/seed_generator_state", made when dropout > 0);
  // default from the global seed sequence.
  std::optional<int64_t> seed{};
  // Keras' call arguments, as the layer's defaults (attend can override them per call).
  bool use_causal_mask = false;
  bool return_attention_scores = false;
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "multi_head_attention", "multi_head_attention_1", ...
};

// Per-call arguments of attend (Keras' call keywords).
struct AttentionCallOptions {
  // [batch, Tq, Tv] or [Tq, Tv], each axis of its size or 1; bool, or numbers (nonzero: kept).
  Tensor attention_mask{};
  std::optional<bool> use_causal_mask{};          // unset: the layer's option
  std::optional<bool> return_attention_scores{};  // unset: the layer's option
};

class MultiHeadAttentionImpl : public LayerImpl {
 public:
  MultiHeadAttentionImpl(int64_t num_heads, int64_t key_dim,
                         MultiHeadAttentionOptions options = {});
  void build_many(const std::vector<Shape>& input_shapes) override;
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks, bool training) override;
  // {the query's mask} (the scores carry none).
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;

  // Keras' layer(query, value, key, attention_mask=..., use_causal_mask=...,
  // return_attention_scores=..., training=...): {output} or {output, scores}. An undefined key
  // means the value.
  std::vector<Tensor> attend(const Tensor& query, const Tensor& value, const Tensor& key = {},
                             const AttentionCallOptions& call = {}, bool training = false,
                             std::source_location loc = std::source_location::current());

  int64_t num_heads() const { return num_heads_; }
  int64_t key_dim() const { return key_dim_; }
  int64_t value_dim() const { return value_dim_; }
  const MultiHeadAttentionOptions& options() const { return options_; }
  // Undefined until built (biases: without use_bias).
  Variable query_kernel, query_bias, key_kernel, key_bias, value_kernel, value_bias, output_kernel,
      output_bias;

 private:
  struct Flags {
    bool causal = false, scores = false;
  };
  // Checks counts, ranks, batch sizes, lengths, the attention mask's shape and (once built)
  // the feature dimensions; throws kiln::Error naming the layer and the shapes.
  void check_shapes(const std::vector<Shape>& shapes) const;
  // The combined bool mask ([batch, Tq, Tv], [1, Tq, Tv] or [Tq, Tv]), or undefined for none.
  Tensor combined_mask(const Tensor& query, const Tensor& value, const Tensor& query_mask,
                       const Tensor& value_mask, const Tensor& key_mask,
                       const Tensor& attention_mask, bool causal) const;
  // Whether this call runs the fused attention op (kiln::attention): no scores to return, no
  // dropout on the probabilities, and the query or key length known.
  bool use_fused(const Tensor& query, const Tensor& value, Flags flags, bool training) const;
  std::vector<Tensor> compute(const Tensor& query, const Tensor& value, const Tensor& key,
                              const Tensor& mask, Flags flags, bool fused, bool training);
  Tensor project(const Tensor& x, const Variable& kernel, const Variable& bias);

  int64_t num_heads_, key_dim_, value_dim_;
  MultiHeadAttentionOptions options_;
  SeedGenerator seed_generator_;     // of the attention dropout; empty when dropout == 0
  std::optional<Flags> call_flags_;  // attend's per-call flags while it runs
};

class MultiHeadAttention : public Layer {
  KILN_LAYER_HANDLE(MultiHeadAttention)
 public:
  MultiHeadAttention(int64_t num_heads, int64_t key_dim, MultiHeadAttentionOptions options = {});
};

// Keras' MultiHeadAttention.from_config: the layer get_config's config describes
// (kiln::Error naming the layer and the entry for a bad config; attention_axes is refused).
Layer multi_head_attention_from_config(const Json& config);

}  // namespace kiln
