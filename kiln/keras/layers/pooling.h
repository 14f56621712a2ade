// Pooling layers over channels-last inputs (data_format "channels_first": transposed around):
//   2-D over NHWC: MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, GlobalMaxPooling2D
//     (input_spec ndim 4);
//   1-D over [batch, steps, channels]: MaxPooling1D, AveragePooling1D (the 2-D pooling ops on
//     the input viewed as [batch, 1, steps, channels]), GlobalAveragePooling1D and
//     GlobalMaxPooling1D (which consume masks) (input_spec ndim 3).
// No weights. Outputs have the input's dtype.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer.h"

namespace kiln {

struct Pooling2DOptions {
  Axes strides{};                 // empty: pool_size (Keras' strides=None)
  std::string padding = "valid";  // "valid" or "same" (any case)
  // "channels_last" or "channels_first" (channels before the spatial axes: transposed to
  // channels-last around the same computation).
  std::string data_format = "channels_last";
  std::string name{};  // empty: from the class ("max_pooling2d", ...)
};

// Windowed max or average; average pooling with "same" padding averages the in-bounds
// elements only (TensorFlow).
class Pooling2DImpl : public LayerImpl {
 public:
  enum class Kind { kMax, kAverage };
  Pooling2DImpl(Kind kind, Axes pool_size, Pooling2DOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  // + "pool_size", "padding", "strides", "data_format"
  Json get_config() const override;

  const Axes& pool_size() const { return pool_size_; }
  const Axes& strides() const { return strides_; }
  const std::string& padding() const { return padding_; }
  bool channels_first() const { return channels_first_; }

 private:
  Kind kind_;
  Axes pool_size_, strides_;
  std::string padding_;
  bool channels_first_;
};

class MaxPooling2DImpl : public Pooling2DImpl {
 public:
  explicit MaxPooling2DImpl(Axes pool_size = {2, 2}, Pooling2DOptions options = {});
};
class MaxPooling2D : public Layer {
  KILN_LAYER_HANDLE(MaxPooling2D)
 public:
  explicit MaxPooling2D(Axes pool_size = {2, 2}, Pooling2DOptions options = {});
};

class AveragePooling2DImpl : public Pooling2DImpl {
 public:
  explicit AveragePooling2DImpl(Axes pool_size = {2, 2}, Pooling2DOptions options = {});
};
class AveragePooling2D : public Layer {
  KILN_LAYER_HANDLE(AveragePooling2D)
 public:
  explicit AveragePooling2D(Axes pool_size = {2, 2}, Pooling2DOptions options = {});
};

struct GlobalPooling2DOptions {
  bool keepdims = false;  // true: (batch, 1, 1, channels); false: (batch, channels)
  // "channels_last" or "channels_first" (channels before the spatial axes: transposed to
  // channels-last around the same computation).
  std::string data_format = "channels_last";
  std::string name{};  // empty: from the class ("global_average_pooling2d", ...)
};

// Mean or max over the spatial axes (1 and 2).
class GlobalPooling2DImpl : public LayerImpl {
 public:
  enum class Kind { kMax, kAverage };
  GlobalPooling2DImpl(Kind kind, GlobalPooling2DOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + "data_format", "keepdims"
  bool keepdims() const { return keepdims_; }
  bool channels_first() const { return channels_first_; }

 private:
  Kind kind_;
  bool keepdims_;
  bool channels_first_;
};

class GlobalAveragePooling2DImpl : public GlobalPooling2DImpl {
 public:
  explicit GlobalAveragePooling2DImpl(GlobalPooling2DOptions options = {});
};
class GlobalAveragePooling2D : public Layer {
  KILN_LAYER_HANDLE(GlobalAveragePooling2D)
 public:
  explicit GlobalAveragePooling2D(GlobalPooling2DOptions options = {});
};

class GlobalMaxPooling2DImpl : public GlobalPooling2DImpl {
 public:
  explicit GlobalMaxPooling2DImpl(GlobalPooling2DOptions options = {});
};
class GlobalMaxPooling2D : public Layer {
  KILN_LAYER_HANDLE(GlobalMaxPooling2D)
 public:
  explicit GlobalMaxPooling2D(GlobalPooling2DOptions options = {});
};

// ---- 1-D ----

struct Pooling1DOptions {
  std::optional<int64_t> strides{};  // none: pool_size (Keras' strides=None)
  std::string padding = "valid";     // "valid" or "same" (any case)
  // "channels_last" or "channels_first" (channels before the spatial axes: transposed to
  // channels-last around the same computation).
  std::string data_format = "channels_last";
  std::string name{};  // empty: from the class ("max_pooling1d", ...)
};

// Windowed max or average over the steps axis; "same" averages in-bounds steps only.
class Pooling1DImpl : public LayerImpl {
 public:
  enum class Kind { kMax, kAverage };
  Pooling1DImpl(Kind kind, int64_t pool_size, Pooling1DOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  // + "pool_size" [p], "padding", "strides" [s], "data_format"
  Json get_config() const override;

  int64_t pool_size() const { return pool_size_; }
  int64_t strides() const { return strides_; }
  const std::string& padding() const { return padding_; }
  bool channels_first() const { return channels_first_; }

 private:
  Kind kind_;
  int64_t pool_size_, strides_;
  std::string padding_;
  bool channels_first_;
};

class MaxPooling1DImpl : public Pooling1DImpl {
 public:
  explicit MaxPooling1DImpl(int64_t pool_size = 2, Pooling1DOptions options = {});
};
class MaxPooling1D : public Layer {
  KILN_LAYER_HANDLE(MaxPooling1D)
 public:
  explicit MaxPooling1D(int64_t pool_size = 2, Pooling1DOptions options = {});
};

class AveragePooling1DImpl : public Pooling1DImpl {
 public:
  explicit AveragePooling1DImpl(int64_t pool_size = 2, Pooling1DOptions options = {});
};
class AveragePooling1D : public Layer {
  KILN_LAYER_HANDLE(AveragePooling1D)
 public:
  explicit AveragePooling1D(int64_t pool_size = 2, Pooling1DOptions options = {});
};

struct GlobalPooling1DOptions {
  bool keepdims = false;  // true: (batch, 1, channels); false: (batch, channels)
  // "channels_last" or "channels_first" (channels before the spatial axes: transposed to
  // channels-last around the same computation).
  std::string data_format = "channels_last";
  std::string name{};  // empty: from the class ("global_average_pooling1d", ...)
};

// Mean or max over the steps axis (1). With a mask [batch, steps] (Keras' keras_mask, e.g. from
// Embedding(mask_zero) or Masking) only the unmasked steps count: the average is
// sum(x * mask) / sum(mask) (as Keras; a row with every step masked gives 0 / 0 = NaN), the
// max is taken over the unmasked steps (-inf for a row with every step masked; Keras 3's
// GlobalMaxPooling1D ignores the mask). The output has no mask.
class GlobalPooling1DImpl : public LayerImpl {
 public:
  enum class Kind { kMax, kAverage };
  GlobalPooling1DImpl(Kind kind, GlobalPooling1DOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks, bool training) override;
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + "data_format", "keepdims"
  bool keepdims() const { return keepdims_; }
  bool channels_first() const { return channels_first_; }

 private:
  Kind kind_;
  bool keepdims_;
  bool channels_first_;
};

class GlobalAveragePooling1DImpl : public GlobalPooling1DImpl {
 public:
  explicit GlobalAveragePooling1DImpl(GlobalPooling1DOptions options = {});
};
class GlobalAveragePooling1D : public Layer {
  KILN_LAYER_HANDLE(GlobalAveragePooling1D)
 public:
  explicit GlobalAveragePooling1D(GlobalPooling1DOptions options = {});
};

class GlobalMaxPooling1DImpl : public GlobalPooling1DImpl {
 public:
  explicit GlobalMaxPooling1DImpl(GlobalPooling1DOptions options = {});
};
class GlobalMaxPooling1D : public Layer {
  KILN_LAYER_HANDLE(GlobalMaxPooling1D)
 public:
  explicit GlobalMaxPooling1D(GlobalPooling1DOptions options = {});
};

// Keras' from_config of the pooling layers: the layer get_config's config describes
// (kiln::Error naming the layer and the entry for a bad config). `class_name`:
// "MaxPooling2D" or "AveragePooling2D", "MaxPooling1D" or "AveragePooling1D",
// "GlobalMaxPooling2D" or "GlobalAveragePooling2D", "GlobalMaxPooling1D" or
// "GlobalAveragePooling1D".
Layer pooling2d_from_config(const Json& config, const std::string& class_name);
Layer pooling1d_from_config(const Json& config, const std::string& class_name);
Layer global_pooling2d_from_config(const Json& config, const std::string& class_name);
Layer global_pooling1d_from_config(const Json& config, const std::string& class_name);

}  // namespace kiln
