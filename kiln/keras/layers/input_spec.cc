#include "kiln/keras/layers/input_spec.h"

#include <fmt/format.h>

namespace kiln {

void check_input_spec(const std::string& layer, const std::vector<InputSpec>& specs,
                      const std::vector<Tensor>& inputs) {
  if (specs.empty()) return;
  if (specs.size() > 1 && specs.size() != inputs.size())
    throw Error(fmt::format("Layer \"{}\" expects {} input(s), but it received {} input tensors",
                            layer, specs.size(), inputs.size()));
  for (size_t i = 0; i < specs.size() && i < inputs.size(); ++i) {
    const InputSpec& spec = specs[i];
    const Shape& shape = inputs[i].shape();
    int ndim = shape.rank();
    std::string head =
        fmt::format("Input {} of layer \"{}\" is incompatible with the layer: ", i, layer);
    if (spec.ndim && ndim != *spec.ndim)
      throw Error(head + fmt::format("expected ndim={}, found ndim={}. Full shape received: {}",
                                     *spec.ndim, ndim, shape.to_string()));
    if (spec.min_ndim && ndim < *spec.min_ndim)
      throw Error(head + fmt::format("expected min_ndim={}, found ndim={}. Full shape received: {}",
                                     *spec.min_ndim, ndim, shape.to_string()));
    if (spec.max_ndim && ndim > *spec.max_ndim)
      throw Error(head + fmt::format("expected max_ndim={}, found ndim={}. Full shape received: {}",
                                     *spec.max_ndim, ndim, shape.to_string()));
    if (spec.dtype && inputs[i].dtype() != *spec.dtype)
      throw Error(head + fmt::format("expected dtype={}, found dtype={}", dtype_name(*spec.dtype),
                                     dtype_name(inputs[i].dtype())));
    for (const auto& [axis, value] : spec.axes) {
      int a = axis < 0 ? axis + ndim : axis;
      int64_t got = (a >= 0 && a < ndim) ? shape[a] : -2;
      if (got != value && got != kUnknownDim)
        throw Error(head + fmt::format("expected axis {} of input shape to have value {}, but "
                                       "received input with shape {}",
                                       axis, value, shape.to_string()));
    }
  }
}

}  // namespace kiln
