#include "kiln/keras/training/gradient_clipping.h"

#include <fmt/format.h>

#include <cmath>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"

namespace kiln {

void validate_clipping(const GradientClipping& c, const std::string& optimizer) {
  int set = 0;
  for (const auto& [name, value] :
       {std::pair{"clipnorm", c.clipnorm}, std::pair{"clipvalue", c.clipvalue},
        std::pair{"global_clipnorm", c.global_clipnorm}}) {
    if (!value) continue;
    ++set;
    if (!(std::isfinite(*value) && *value > 0))
      throw Error(
          fmt::format("{}: {} must be a finite number > 0, got {}", optimizer, name, *value));
  }
  if (set > 1)
    throw Error(fmt::format(
        "{}: only one of clipnorm, clipvalue and global_clipnorm can be set (as in Keras)",
        optimizer));
}

namespace {

// sum(g^2) over every element, a scalar of g's dtype.
Tensor squared_norm(const Tensor& g) { return sum(square(g)); }

}  // namespace

std::vector<Tensor> clip_gradients(const GradientClipping& c, const std::vector<Tensor>& grads) {
  std::vector<Tensor> out = grads;
  if (c.clipnorm) {
    for (Tensor& g : out) {
      if (!g.defined()) continue;
      const Tensor limit = scalar(*c.clipnorm, g.dtype());
      g = g * limit / maximum(sqrt(squared_norm(g)), limit);
    }
  } else if (c.global_clipnorm) {
    // scale = c / max(global norm, c), in float64; a non-finite norm makes it NaN (Keras adds
    // norm - norm for this), so an overflowing gradient is not silently clipped to a finite one.
    Tensor total;
    for (const Tensor& g : out) {
      if (!g.defined()) continue;
      Tensor s = cast(squared_norm(g), DType::f64);
      total = total.defined() ? total + s : s;
    }
    if (!total.defined()) return out;
    const Tensor norm = sqrt(total);
    const Tensor limit = scalar(*c.global_clipnorm, DType::f64);
    const Tensor scale = limit / maximum(norm, limit) + (norm - norm);
    for (Tensor& g : out)
      if (g.defined()) g = g * cast(scale, g.dtype());
  } else if (c.clipvalue) {
    for (Tensor& g : out) {
      if (!g.defined()) continue;
      g = minimum(maximum(g, scalar(-*c.clipvalue, g.dtype())), scalar(*c.clipvalue, g.dtype()));
    }
  }
  return out;
}

}  // namespace kiln
