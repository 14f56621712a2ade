#include "kiln/frontend/gradients.h"

#include "kiln/frontend/ops.h"

namespace kiln::detail {
namespace {

GradTable build() {
  GradTable t(size_t(kNumOps), nullptr);
  register_elementwise_gradients(t);
  register_reduce_gradients(t);
  register_shape_gradients(t);
  register_nn_gradients(t);
  register_attention_gradients(t);
  return t;
}

}  // namespace

GradRule gradient_rule(OpKind kind) {
  static const GradTable table = build();
  return table[size_t(kind)];
}

Tensor unbroadcast(const Tensor& g, const Shape& shape) {
  const Shape& gs = g.shape();
  if (gs == shape) return g;
  Axes axes;
  int lead = gs.rank() - shape.rank();
  for (int i = 0; i < gs.rank(); ++i)
    if (i < lead || (shape[i - lead] == 1 && gs[i] != 1)) axes.push_back(i);
  Tensor r = axes.empty() ? g : sum(g, axes, /*keepdims=*/false);
  return reshape(r, shape.to_vector());
}

}  // namespace kiln::detail
