// Sequential: a linear stack of layers (Keras' Sequential). With an input shape it is built at
// once (and its summary shows output shapes); otherwise it builds on the first call.
#pragma once

#include <optional>
#include <vector>

#include "frontend/models/model.h"

namespace kiln {

class SequentialImpl : public ModelImpl {
 public:
  SequentialImpl(std::vector<Layer> layers, std::optional<Shape> input_shape, std::string name);
  // Appends a layer (after building, the new layer is built on the next call).
  void add(const Layer& layer);
  Tensor call(const Tensor& x, bool training) override;
  void build(const Shape& input_shape) override;
  std::vector<Layer> layers() const override { return layers_; }
  std::vector<std::string> layer_output_shapes() const override;
  Json get_config() const override;

 private:
  std::vector<Layer> layers_;
  std::optional<Shape> input_shape_;  // without the batch dimension
  std::vector<Shape> output_shapes_;  // per layer, from the last build
};

class Sequential : public Model {
 public:
  // `input_shape` excludes the batch dimension.
  explicit Sequential(std::vector<Layer> layers = {}, std::optional<Shape> input_shape = {},
                      const std::string& name = "");
  void add(const Layer& layer) const { impl_seq().add(layer); }
  SequentialImpl* operator->() const { return &impl_seq(); }

 private:
  SequentialImpl& impl_seq() const { return static_cast<SequentialImpl&>(impl()); }
};

}  // namespace kiln
