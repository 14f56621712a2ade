// InputSpec: what a layer accepts (Keras' InputSpec), checked on every call with Keras' words.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

struct InputSpec {
  // (Default member initializers let designated initializers such as InputSpec{.ndim = 4}
  // compile without -Wmissing-field-initializers warnings.)
  std::optional<int> ndim{}, min_ndim{}, max_ndim{};
  std::optional<DType> dtype{};
  std::map<int, int64_t> axes{};  // axis (negative counts from the end) -> required size
};

// Throws kiln::Error such as `Input 0 of layer "dense" is incompatible with the layer:
// expected axis -1 of input shape to have value 5, but received input with shape (10, 4)`.
// `specs` holds one spec per input, or a single spec applied to input 0.
void check_input_spec(const std::string& layer_name, const std::vector<InputSpec>& specs,
                      const std::vector<Tensor>& inputs);

}  // namespace kiln
