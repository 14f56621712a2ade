#include "kiln/keras/layers/dropout.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"

namespace kiln {

DropoutImpl::DropoutImpl(double rate, DropoutOptions options)
    : LayerImpl("Dropout", options.name), rate_(rate), seed_(options.seed) {
  supports_masking = true;
  if (!(rate >= 0 && rate < 1))
    throw Error(
        fmt::format("layer \"{}\": Invalid value received for argument `rate`. Expected "
                    "a float value in [0, 1). Received: rate={}",
                    name(), rate));
  if (rate > 0) seed_generator_ = add_seed_generator(seed_);
}

Tensor DropoutImpl::call(const Tensor& x, bool training) {
  // A symbolic input only needs its type propagated, which is the input's own.
  if (!training || rate_ == 0 || x.is_placeholder()) return x;
  if (!is_floating(x.dtype()))
    throw Error(fmt::format("layer \"{}\": Dropout needs a floating input, got {} {}", name(),
                            dtype_name(x.dtype()), x.shape().to_string()));
  return dropout(x, rate_, seed_generator_.next());
}

std::vector<Shape> DropoutImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  return input_shapes;
}

Json DropoutImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["rate"] = rate_;
  c["seed"] = seed_ ? Json(*seed_) : Json(nullptr);
  c["noise_shape"] = nullptr;
  return c;
}

Layer dropout_from_config(const Json& config) {
  ConfigReader c(config, "Dropout");
  if (c.has("noise_shape")) c.fail("noise_shape", "is set; kiln's Dropout has no noise_shape");
  return Dropout(c.get<double>("rate"),
                 DropoutOptions{.seed = c.optional<int64_t>("seed"), .name = c.name()});
}

Dropout::Dropout(double rate, DropoutOptions options)
    : Layer(std::make_shared<DropoutImpl>(rate, std::move(options))) {}

}  // namespace kiln
