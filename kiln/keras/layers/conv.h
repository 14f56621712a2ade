// Conv2D and Conv1D (Keras'): channels-last inputs, or channels-first ones (data_format
// "channels_first": transposed to channels-last around the same kernels, kernel layout kept).
//
// Conv2D: 2-D convolution over NHWC inputs (NCHW with channels_first).
// output = activation(conv2d(inputs, kernel) + bias). Weights, created at the first call from
// the input's channel count `c`: "kernel" (kh, kw, c, filters) (HWIO) and, with use_bias,
// "bias" (filters,). Padding "valid" or "same" follows TensorFlow. Constraints: constraints.h.
// input_spec: ndim 4, and after build the channels axis (-1, or 1) must be `c`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer.h"

namespace kiln {

struct Conv2DOptions {
  Axes strides = {1, 1};
  std::string padding = "valid";  // "valid" or "same" (any case)
  Axes dilation_rate = {1, 1};    // strides and dilation_rate cannot both exceed 1
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer{};
  Regularizer bias_regularizer{};
  Regularizer activity_regularizer{};
  Constraint kernel_constraint{};  // applied after each optimizer update
  Constraint bias_constraint{};
  // "channels_last" ([batch, ..., channels]) or "channels_first" ([batch, channels, ...]): a
  // channels-first input is transposed to channels-last, convolved, and the result transposed
  // back (the kernel keeps Keras' layout in both).
  std::string data_format = "channels_last";
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "conv2d", "conv2d_1", ...
};

// filters > 0; kernel_size, strides and dilation_rate are (height, width) pairs of positive
// integers.
class Conv2DImpl : public LayerImpl {
 public:
  Conv2DImpl(int64_t filters, Axes kernel_size, Conv2DOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;

  int64_t filters() const { return filters_; }
  const Axes& kernel_size() const { return kernel_size_; }
  const Conv2DOptions& options() const { return options_; }
  // Undefined until built; bias stays undefined without use_bias.
  Variable kernel, bias;

 private:
  int64_t filters_;
  Axes kernel_size_;
  Conv2DOptions options_;
};

class Conv2D : public Layer {
  KILN_LAYER_HANDLE(Conv2D)
 public:
  Conv2D(int64_t filters, Axes kernel_size, Conv2DOptions options = {});
};

// ---- Conv1D ----
//
// Conv1D: 1-D convolution over [batch, steps, channels]. Weights: "kernel" (kernel_size,
// channels, filters) and, with use_bias, "bias" (filters,). It runs as the conv2d op on the
// input viewed as [batch, 1, steps, channels] with the kernel viewed as
// [1, kernel_size, channels, filters] (the same eager and compiled path as Conv2D). Padding
// "valid", "same" (TensorFlow) or "causal": (kernel_size - 1) * dilation_rate zeros before the
// first step, then "valid", so output step t sees input steps <= t only.
// input_spec: ndim 3, and after build axis -1 must be `channels`.
struct Conv1DOptions {
  int64_t strides = 1;
  std::string padding = "valid";  // "valid", "same" or "causal" (any case)
  int64_t dilation_rate = 1;      // strides and dilation_rate cannot both exceed 1
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer{};
  Regularizer bias_regularizer{};
  Regularizer activity_regularizer{};
  Constraint kernel_constraint{};  // applied after each optimizer update
  Constraint bias_constraint{};
  // "channels_last" ([batch, ..., channels]) or "channels_first" ([batch, channels, ...]): a
  // channels-first input is transposed to channels-last, convolved, and the result transposed
  // back (the kernel keeps Keras' layout in both).
  std::string data_format = "channels_last";
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "conv1d", "conv1d_1", ...
};

// filters, kernel_size, strides and dilation_rate are positive integers.
class Conv1DImpl : public LayerImpl {
 public:
  Conv1DImpl(int64_t filters, int64_t kernel_size, Conv1DOptions options = {});
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;

  int64_t filters() const { return filters_; }
  int64_t kernel_size() const { return kernel_size_; }
  const Conv1DOptions& options() const { return options_; }
  // Undefined until built; bias stays undefined without use_bias.
  Variable kernel, bias;

 private:
  int64_t filters_, kernel_size_;
  Conv1DOptions options_;
};

class Conv1D : public Layer {
  KILN_LAYER_HANDLE(Conv1D)
 public:
  Conv1D(int64_t filters, int64_t kernel_size, Conv1DOptions options = {});
};

// Keras' Conv2D.from_config and Conv1D.from_config: the layer get_config's config describes
// (kiln::Error naming the layer and the entry for a bad config).
Layer conv2d_from_config(const Json& config);
Layer conv1d_from_config(const Json& config);

}  // namespace kiln
