// Reshaping layers: Flatten and Reshape (Keras'). Both keep the batch (first) dimension, which
// may be unknown (-1) on symbolic inputs. No weights; the output has the input's dtype.
#pragma once

#include <string>
#include <vector>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer.h"

namespace kiln {

struct FlattenOptions {
  // "channels_first": an input of rank >= 3 is first transposed to channels-last (Keras), so
  // the flattened order is that of the channels-last tensor.
  std::string data_format = "channels_last";
  std::string name{};  // empty: "flatten", "flatten_1", ...
};

// (batch, d1, ..., dn) -> (batch, d1 * ... * dn); (batch,) -> (batch, 1). input_spec: min_ndim 1.
class FlattenImpl : public LayerImpl {
 public:
  explicit FlattenImpl(FlattenOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + "data_format"
  bool channels_first() const { return channels_first_; }

 private:
  bool channels_first_;
};

class Flatten : public Layer {
  KILN_LAYER_HANDLE(Flatten)
 public:
  explicit Flatten(FlattenOptions options = {});
};

struct ReshapeOptions {
  std::string name{};  // empty: "reshape", "reshape_1", ...
};

// (batch, ...) -> (batch, *target_shape). target_shape excludes the batch dimension and may
// hold one -1, inferred from the input's size. The sizes must agree (Keras' check).
class ReshapeImpl : public LayerImpl {
 public:
  explicit ReshapeImpl(Axes target_shape, ReshapeOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + "target_shape"
  const Axes& target_shape() const { return target_shape_; }

 private:
  // The output shape (batch dimension included) for an input of shape `in`.
  Shape output_shape(const Shape& in) const;
  Axes target_shape_;
};

class Reshape : public Layer {
  KILN_LAYER_HANDLE(Reshape)
 public:
  explicit Reshape(Axes target_shape, ReshapeOptions options = {});
};

// Keras' Flatten.from_config and Reshape.from_config: the layer get_config's config describes
// (kiln::Error naming the layer and the entry for a bad config).
Layer flatten_from_config(const Json& config);
Layer reshape_from_config(const Json& config);

}  // namespace kiln
