#include "kiln/keras/models/input_layer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/node.h"

namespace kiln {

InputLayerImpl::InputLayerImpl(const Shape& batch_shape, DType dtype, std::string name)
    : LayerImpl("InputLayer", std::move(name)), batch_shape_(batch_shape), dtype_(dtype) {
  built_ = true;
}

Json InputLayerImpl::get_config() const {
  Json batch = Json::array();
  for (int64_t d : batch_shape_) batch.push_back(d == kUnknownDim ? Json(nullptr) : Json(d));
  return Json{{"name", name()},
              {"batch_shape", batch},
              {"dtype", std::string(dtype_name(dtype_))},
              {"sparse", false}};
}

Layer input_layer_from_config(const Json& config) {
  ConfigReader c(config, "InputLayer");
  Shape batch = layer_config::shape_entry(c, "batch_shape");
  if (batch.rank() == 0) c.fail("batch_shape", "is empty; it should start with the batch axis");
  return Layer(std::make_shared<InputLayerImpl>(batch, layer_config::dtype_entry(c), c.name()));
}

Tensor Input(const Shape& shape, DType dtype, const std::string& name) {
  if (shape.rank() + 1 > kMaxRank)
    throw Error(
        fmt::format("Input: shape {} has {} dimensions; with the batch dimension that is "
                    "more than the {} a kiln tensor can have",
                    shape.to_string(), shape.rank(), kMaxRank));
  Shape batch_shape{kUnknownDim};
  for (int64_t d : shape) batch_shape.push_back(d);
  auto layer = std::make_shared<InputLayerImpl>(batch_shape, dtype, name);
  auto node = std::make_shared<Node>();
  node->layer = layer;
  node->output_types.push_back({dtype, batch_shape});
  layer->inbound_nodes.push_back(node);
  return Tensor::symbolic({dtype, batch_shape}, std::make_shared<KerasHistory>(node, 0));
}

}  // namespace kiln
