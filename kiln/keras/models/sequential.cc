#include "kiln/keras/models/sequential.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/function/trace_context.h"

namespace kiln {
namespace {

std::string multi_output_error(const std::string& layer, size_t n) {
  return fmt::format(
      "All layers in a Sequential model should have a single output tensor. "
      "For multi-output layers, use the functional API. Layer \"{}\" returned {} "
      "outputs.",
      layer, n);
}

}  // namespace

SequentialImpl::SequentialImpl(std::vector<Layer> layers, std::optional<Shape> input_shape,
                               std::string name)
    : ModelImpl("Sequential", std::move(name)), input_shape_(std::move(input_shape)) {
  for (const Layer& l : layers) append(l);
  if (input_shape_) {
    Shape batch = batch_input_shape();
    build(batch);
  }
}

Shape SequentialImpl::batch_input_shape() const {
  if (input_shape_->rank() + 1 > kMaxRank)
    throw Error(
        fmt::format("Sequential model \"{}\": input_shape {} has too many dimensions "
                    "(at most {} with the batch dimension)",
                    name(), input_shape_->to_string(), kMaxRank));
  Shape batch{kUnknownDim};
  for (int64_t d : *input_shape_) batch.push_back(d);
  return batch;
}

void SequentialImpl::append(const Layer& layer) {
  if (!layer.defined())
    throw Error(fmt::format("Sequential model \"{}\": cannot add an empty layer handle", name()));
  for (const Layer& l : layers_)
    if (l->name() == layer->name())
      throw Error(
          fmt::format("All layers added to a Sequential model should have unique names. "
                      "Name \"{}\" is already the name of a layer in this model. Update "
                      "the `name` argument to pass a unique name.",
                      layer->name()));
  track_layer(layer);
  layers_.push_back(layer);
}

void SequentialImpl::add(const Layer& layer) {
  append(layer);
  if (input_shape_) build(batch_input_shape());
}

void SequentialImpl::build(const Shape& input_shape) {
  Tensor x = Tensor::symbolic({DType::f32, input_shape}, nullptr);
  std::vector<Shape> shapes;
  for (const Layer& layer : layers_) {
    std::vector<Tensor> out = layer->invoke({x}, false);
    if (out.size() != 1) throw Error(multi_output_error(layer->name(), out.size()));
    x = out[0];
    shapes.push_back(x.shape());
  }
  output_shapes_ = std::move(shapes);
  built_ = true;
}

void SequentialImpl::build_many(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1)
    throw Error(fmt::format("Sequential model \"{}\" takes one input, but it was called with {}",
                            name(), input_shapes.size()));
}

Tensor SequentialImpl::call(const Tensor& x, bool training) {
  if (layers_.empty())
    throw Error(
        fmt::format("Sequential model \"{}\" has no layers; add some with add() before "
                    "calling it",
                    name()));
  bool record = output_shapes_.size() != layers_.size();
  std::vector<Shape> shapes;
  Tensor y = x;
  for (const Layer& layer : layers_) {
    std::vector<Tensor> out = layer->invoke({y}, training);
    if (out.size() != 1) throw Error(multi_output_error(layer->name(), out.size()));
    y = out[0];
    if (record) shapes.push_back(y.shape());
  }
  if (record) output_shapes_ = std::move(shapes);
  return y;
}

std::vector<std::string> SequentialImpl::layer_output_shapes() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < layers_.size(); ++i)
    out.push_back(i < output_shapes_.size() ? detail::summary_shape_text({output_shapes_[i]})
                                            : "?");
  return out;
}

Json SequentialImpl::get_config() const {
  Json config = LayerImpl::get_config();
  config["layers"] = Json::array();
  for (const Layer& l : layers_)
    config["layers"].push_back({{"class_name", l->class_name()}, {"config", l->get_config()}});
  if (input_shape_) {
    Json shape = Json::array({nullptr});
    for (int64_t d : *input_shape_) shape.push_back(d == kUnknownDim ? Json(nullptr) : Json(d));
    config["build_input_shape"] = shape;
  }
  return config;
}

Sequential::Sequential(std::vector<Layer> layers, std::optional<Shape> input_shape,
                       const std::string& name, std::source_location loc)
    : Model(std::make_shared<SequentialImpl>(std::move(layers), std::move(input_shape), name)) {
  // The layers joined a model here (LayerImpl::note_origin).
  const ir::SourceLocation origin = detail::user_location(loc);
  for (const Layer& layer : impl_seq().layers()) layer->note_origin(origin);
}

void Sequential::add(const Layer& layer, std::source_location loc) const {
  if (layer.defined()) layer->note_origin(detail::user_location(loc));
  impl_seq().add(layer);
}

std::vector<std::string> SequentialImpl::output_names() const {
  if (layers_.empty()) return {};
  return {layers_.back()->name()};
}

}  // namespace kiln
