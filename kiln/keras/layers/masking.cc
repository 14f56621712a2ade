#include "kiln/keras/layers/masking.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"

namespace kiln {

MaskingImpl::MaskingImpl(MaskingOptions options)
    : LayerImpl("Masking", options.name), options_(std::move(options)) {
  supports_masking = true;
  input_spec = {InputSpec{.min_ndim = 3}};
}

Tensor MaskingImpl::keep(const Tensor& x) const {
  if (!is_numeric(x.dtype()))
    throw Error(fmt::format("layer \"{}\": Masking needs a numeric input, got {} {}", name(),
                            dtype_name(x.dtype()), x.shape().to_string()));
  Tensor differs = cast(not_equal(x, scalar(options_.mask_value, x.dtype())), DType::f32);
  return greater(max(differs, {-1}), scalar(0));
}

Tensor MaskingImpl::call(const Tensor& x, bool) {
  return x * cast(expand_dims(keep(x), -1), x.dtype());
}

std::vector<Tensor> MaskingImpl::compute_mask(const std::vector<Tensor>& inputs,
                                              const std::vector<Tensor>&) {
  return {keep(inputs[0])};
}

std::vector<Shape> MaskingImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  return input_shapes;
}

Json MaskingImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["mask_value"] = options_.mask_value;
  return c;
}

Layer masking_from_config(const Json& config) {
  ConfigReader c(config, "Masking");
  return Masking(MaskingOptions{.mask_value = c.get<double>("mask_value", 0.0), .name = c.name()});
}

Masking::Masking(MaskingOptions options)
    : Layer(std::make_shared<MaskingImpl>(std::move(options))) {}

}  // namespace kiln
