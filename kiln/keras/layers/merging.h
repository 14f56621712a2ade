// Merging layers: combine a list of tensors (Keras' Add, Subtract, Multiply, Average, Maximum,
// Minimum and Concatenate). Call them with a list: layer({a, b}). No weights.
//
// The elementwise ones take at least 2 inputs (Subtract exactly 2) of the same batch size
// whose other dimensions are equal or 1 (they broadcast); all inputs need the same dtype.
// Concatenate joins inputs whose shapes agree except along `axis`.
#pragma once

#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"

namespace kiln {

struct MergeOptions {
  std::string name{};  // empty: from the class ("add", "add_1", ...)
};

// Elementwise merge of its inputs (the shared base of Add, Subtract, ...).
class MergeImpl : public LayerImpl {
 public:
  enum class Kind { kAdd, kSubtract, kMultiply, kAverage, kMaximum, kMinimum };
  MergeImpl(Kind kind, MergeOptions options);
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;

 private:
  // Keras' checks; returns the broadcast output shape.
  Shape check_shapes(const std::vector<Shape>& shapes) const;
  Kind kind_;
};

// Merge layers return one tensor: layer({a, b}) is a Tensor (as in Keras), not a list.
#define KILN_MERGE_LAYER(Name, kind)                                                        \
  class Name##Impl : public MergeImpl {                                                     \
   public:                                                                                  \
    explicit Name##Impl(MergeOptions options = {}) : MergeImpl(kind, std::move(options)) {} \
  };                                                                                        \
  class Name : public Layer {                                                               \
    KILN_LAYER_HANDLE(Name)                                                                 \
   public:                                                                                  \
    explicit Name(MergeOptions options = {})                                                \
        : Layer(std::make_shared<Name##Impl>(std::move(options))) {}                        \
    Tensor operator()(const std::vector<Tensor>& inputs, bool training = false) const {     \
      return Layer::operator()(inputs, training)[0];                                        \
    }                                                                                       \
  };

// a + b + ...
KILN_MERGE_LAYER(Add, MergeImpl::Kind::kAdd)
// a - b (exactly two inputs)
KILN_MERGE_LAYER(Subtract, MergeImpl::Kind::kSubtract)
// a * b * ...
KILN_MERGE_LAYER(Multiply, MergeImpl::Kind::kMultiply)
// (a + b + ...) / n
KILN_MERGE_LAYER(Average, MergeImpl::Kind::kAverage)
// elementwise maximum
KILN_MERGE_LAYER(Maximum, MergeImpl::Kind::kMaximum)
// elementwise minimum
KILN_MERGE_LAYER(Minimum, MergeImpl::Kind::kMinimum)
#undef KILN_MERGE_LAYER

struct ConcatenateOptions {
  int axis = -1;
  std::string name{};  // empty: "concatenate", "concatenate_1", ...
};

// Joins one or more inputs along `axis`.
class ConcatenateImpl : public LayerImpl {
 public:
  explicit ConcatenateImpl(ConcatenateOptions options = {});
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + "axis"
  int axis() const { return axis_; }

 private:
  int axis_;
};

class Concatenate : public Layer {
  KILN_LAYER_HANDLE(Concatenate)
 public:
  explicit Concatenate(ConcatenateOptions options = {});
  // One tensor: cat({a, b}) (as in Keras), not a list.
  Tensor operator()(const std::vector<Tensor>& inputs, bool training = false) const {
    return Layer::operator()(inputs, training)[0];
  }
};

// Keras' from_config of the merge layers: `class_name` is "Add", "Subtract", "Multiply",
// "Average", "Maximum" or "Minimum" (kiln::Error otherwise, or naming the layer and the entry
// for a bad config).
Layer merge_from_config(const Json& config, const std::string& class_name);
// Keras' Concatenate.from_config.
Layer concatenate_from_config(const Json& config);

}  // namespace kiln
