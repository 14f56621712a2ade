#include "tools/model_zoo.h"

#include <fmt/format.h>

#include "kiln/kiln.h"

namespace kiln::tools {

Tensor prepare_inputs(const std::string& kind, const Tensor& x) {
  if (x.rank() < 2)
    throw Error(fmt::format("inputs must have a batch axis and at least one more, got shape {}",
                            x.shape().to_string()));
  int64_t n = x.shape()[0];
  if (kind == "mlp") return reshape(cast(x, DType::f32), {n, -1});
  if (kind == "cnn") {
    if (x.rank() == 2) {  // flattened square images
      auto side = int64_t(std::llround(std::sqrt(double(x.shape()[1]))));
      if (side * side != x.shape()[1])
        throw Error(
            fmt::format("cnn: {} features per example is not a square image; pass "
                        "(N, H, W) or (N, H, W, 1) inputs",
                        x.shape()[1]));
      return reshape(cast(x, DType::f32), {n, side, side, 1});
    }
    if (x.rank() == 3) return expand_dims(cast(x, DType::f32), -1);
    if (x.rank() == 4 && x.shape()[3] == 1) return cast(x, DType::f32);
    throw Error(fmt::format("cnn: expected (N, H, W) or (N, H, W, 1) images, got {}",
                            x.shape().to_string()));
  }
  throw Error(fmt::format("unknown model \"{}\": expected mlp or cnn", kind));
}

Sequential build_model(const std::string& kind, const Shape& example_shape, int64_t classes) {
  if (kind == "mlp")
    return Sequential({Dense(128, {.activation = "relu"}), Dense(classes)}, example_shape);
  if (kind == "cnn")
    return Sequential(
        {Conv2D(16, {3, 3}, {.padding = "same", .activation = "relu"}), MaxPooling2D({2, 2}),
         Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"}), Flatten(), Dense(classes)},
        example_shape);
  throw Error(fmt::format("unknown model \"{}\": expected mlp or cnn", kind));
}

}  // namespace kiln::tools
