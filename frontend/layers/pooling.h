// 2-D pooling layers over NHWC inputs (Keras' MaxPooling2D, AveragePooling2D,
// GlobalAveragePooling2D, GlobalMaxPooling2D; data_format "channels_last").
// No weights; input_spec: ndim 4. Outputs have the input's dtype.
#pragma once

#include <string>
#include <vector>

#include "frontend/layers/layer.h"
#include "frontend/ops.h"

namespace kiln {

struct Pooling2DOptions {
  Axes strides{};                 // empty: pool_size (Keras' strides=None)
  std::string padding = "valid";  // "valid" or "same" (any case)
  std::string name{};             // empty: from the class ("max_pooling2d", ...)
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

 private:
  Kind kind_;
  Axes pool_size_, strides_;
  std::string padding_;
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
  std::string name{};     // empty: from the class ("global_average_pooling2d", ...)
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

 private:
  Kind kind_;
  bool keepdims_;
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

}  // namespace kiln
