// Sequential: a linear stack of layers (Keras' Sequential). With an input shape it is built at
// once by a symbolic run (and its summary shows output shapes such as "(None, 64)");
// otherwise each layer builds on the first call, which records the output shapes it saw.
// Every layer takes one tensor and returns one tensor; layer names must be unique.
#pragma once

#include <optional>
#include <source_location>
#include <vector>

#include "kiln/keras/models/model.h"

namespace kiln {

class SequentialImpl : public ModelImpl {
 public:
  SequentialImpl(std::vector<Layer> layers, std::optional<Shape> input_shape, std::string name);
  // Appends a layer. With an input shape the model is rebuilt at once; otherwise the new
  // layer is built on the next call.
  void add(const Layer& layer);
  Tensor call(const Tensor& x, bool training) override;
  // Builds every layer by a symbolic run on `input_shape` (with the batch dimension, which
  // may be kUnknownDim) and records the output shapes.
  void build(const Shape& input_shape) override;
  // The lazy build on the first call: the layers build themselves during that call.
  void build_many(const std::vector<Shape>& input_shapes) override;
  std::vector<Layer> layers() const override { return layers_; }
  // The last layer's name (Keras' output_names); empty without layers.
  std::vector<std::string> output_names() const override;
  std::vector<std::string> layer_output_shapes() const override;
  Json get_config() const override;  // + "layers", "build_input_shape" (with input shape)

 private:
  void append(const Layer& layer);
  Shape batch_input_shape() const;

  std::vector<Layer> layers_;
  std::optional<Shape> input_shape_;  // without the batch dimension
  std::vector<Shape> output_shapes_;  // per layer, from the last build or first call
};

class Sequential : public Model {
 public:
  // `input_shape` excludes the batch dimension. Default names: "sequential", "sequential_1".
  // `loc`: where the layers joined a model (LayerImpl::note_origin).
  explicit Sequential(std::vector<Layer> layers = {}, std::optional<Shape> input_shape = {},
                      const std::string& name = "",
                      std::source_location loc = std::source_location::current());
  void add(const Layer& layer, std::source_location loc = std::source_location::current()) const;
  SequentialImpl* operator->() const { return &impl_seq(); }

 private:
  SequentialImpl& impl_seq() const { return static_cast<SequentialImpl&>(impl()); }
};

}  // namespace kiln
