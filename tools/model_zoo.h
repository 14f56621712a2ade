// The models the `kiln` program trains: the digits MLP and a small CNN, built the same way by
// `kiln train` and `kiln predict` so saved weight names match.
#pragma once

#include <string>

#include "kiln/keras/models/sequential.h"

namespace kiln::tools {

// "mlp": Dense(128, relu) -> Dense(classes) on flattened inputs of `features` values.
// "cnn": Conv2D(16, 3x3, same, relu) -> MaxPooling2D(2) -> Conv2D(32, 3x3, same, relu) ->
//        Flatten -> Dense(classes), on (height, width, 1) images.
// Outputs are logits.
Sequential build_model(const std::string& kind, const Shape& example_shape, int64_t classes);

// Reshapes a batch of examples to what the model kind expects: (N, features) for "mlp",
// (N, H, W, 1) for "cnn".
Tensor prepare_inputs(const std::string& kind, const Tensor& x);

}  // namespace kiln::tools
