// Normalization layers: BatchNormalization and LayerNormalization (Keras 3).
//
// BatchNormalization normalizes each feature (the `axis` of the input) with the batch mean and
// (biased) variance over all other axes while training, and with the moving statistics at
// inference; y = (x - mean) / sqrt(var + epsilon) * gamma + beta. Weights: "gamma" (with
// scale), "beta" (with center), trainable; "moving_mean", "moving_variance", non-trainable.
// A training call on concrete inputs updates the moving statistics:
//   moving = moving * momentum + batch_statistic * (1 - momentum).
// Symbolic calls never update them. As in Keras 3, a non-trainable layer (set_trainable(false))
// runs in inference mode even when called with training=true.
//
// LayerNormalization normalizes each sample over `axis` (one or more axes) with its own mean
// and variance; "gamma" and "beta" have the shape of the normalized axes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer.h"

namespace kiln {

struct BatchNormalizationOptions {
  int axis = -1;  // the feature axis (negative counts from the end)
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // add beta
  bool scale = true;   // multiply by gamma
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  Initializer moving_mean_initializer = "zeros";
  Initializer moving_variance_initializer = "ones";
  Regularizer beta_regularizer{};
  Regularizer gamma_regularizer{};
  Constraint beta_constraint{};  // applied after each optimizer update
  Constraint gamma_constraint{};
  // Keras' cross-replica statistics. In one process they are the batch statistics, so true
  // computes what false does; under kiln's data-parallel fit (which does not all-reduce the
  // statistics) a layer with synchronized=true is refused with a kiln::Error.
  bool synchronized = false;
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "batch_normalization", ...
};

// input_spec after build: the built rank, and the feature axis' size.
class BatchNormalizationImpl : public LayerImpl {
 public:
  explicit BatchNormalizationImpl(BatchNormalizationOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;
  const BatchNormalizationOptions& options() const { return options_; }
  // Undefined until built (gamma without scale, beta without center).
  Variable gamma, beta, moving_mean, moving_variance;

 private:
  BatchNormalizationOptions options_;
  int axis_ = 0;  // normalized at build
};

class BatchNormalization : public Layer {
  KILN_LAYER_HANDLE(BatchNormalization)
 public:
  explicit BatchNormalization(BatchNormalizationOptions options = {});
};

struct LayerNormalizationOptions {
  Axes axis = {-1};  // the normalized axes (negative counts from the end)
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  Regularizer beta_regularizer{};
  Regularizer gamma_regularizer{};
  Constraint beta_constraint{};  // applied after each optimizer update
  Constraint gamma_constraint{};
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "layer_normalization", ...
};

// input_spec after build: the built rank and the sizes of the normalized axes.
class LayerNormalizationImpl : public LayerImpl {
 public:
  explicit LayerNormalizationImpl(LayerNormalizationOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;
  const LayerNormalizationOptions& options() const { return options_; }
  Variable gamma, beta;

 private:
  LayerNormalizationOptions options_;
  Axes axes_;  // normalized and sorted at build
};

class LayerNormalization : public Layer {
  KILN_LAYER_HANDLE(LayerNormalization)
 public:
  explicit LayerNormalization(LayerNormalizationOptions options = {});
};

// Keras' BatchNormalization.from_config and LayerNormalization.from_config: the layer
// get_config's config describes (kiln::Error naming the layer and the entry for a bad config;
// rms_scaling is refused).
Layer batch_normalization_from_config(const Json& config);
Layer layer_normalization_from_config(const Json& config);

}  // namespace kiln
