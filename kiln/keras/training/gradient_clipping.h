// Gradient clipping as Keras 3's optimizers do it (base_optimizer._clip_gradients), written with
// kiln ops so that a traced training step computes it in the graph.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

// Keras' clipnorm / clipvalue / global_clipnorm, applied by an optimizer's apply_gradients
// before the update. At most one may be set, each finite and > 0:
//   clipnorm:         each gradient g -> g * c / max(||g||, c)
//   global_clipnorm:  every gradient g -> g * c / max(sqrt(sum over all gradients of ||g||^2), c)
//   clipvalue:        each element -> min(max(g, -c), c)
struct GradientClipping {
  std::optional<double> clipnorm{}, clipvalue{}, global_clipnorm{};
};

// kiln::Error naming `optimizer` when more than one is set or a value is not finite and > 0.
void validate_clipping(const GradientClipping& clipping, const std::string& optimizer);

// The clipped gradients (undefined entries stay undefined); `grads` unchanged when nothing is
// set. Norms are computed in each gradient's dtype, as Keras does.
std::vector<Tensor> clip_gradients(const GradientClipping& clipping,
                                   const std::vector<Tensor>& grads);

}  // namespace kiln
