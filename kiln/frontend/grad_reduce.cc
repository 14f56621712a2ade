// Gradient rules of reductions and of the softmax family.
#include "kiln/frontend/creation.h"
#include "kiln/frontend/gradients.h"
#include "kiln/frontend/ops.h"
#include "kiln/ir/shape_rules.h"

namespace kiln::detail {
namespace {

using Grads = std::vector<Tensor>;

struct Reduced {
  std::vector<int> axes;
  Shape kept;  // input shape with reduced axes set to 1
};

Reduced reduced(const GradContext& c) {
  const Shape& s = c.inputs[0].shape();
  const char* name = op_name(c.kind);
  Reduced r{rules::reduction_axes(c.attrs.get_ints("axes", name), s.rank(), name), {}};
  r.kept = rules::reduced_shape(s, r.axes, /*keepdims=*/true);
  return r;
}

// `t` (a reduction result, with or without keepdims) reshaped so it broadcasts against x.
Tensor keep(const Tensor& t, const Reduced& r) { return reshape(t, r.kept.to_vector()); }

// broadcast_to x's shape, or broadcast_like x when a dimension is unknown (traced).
Tensor expand_to(const Tensor& g, const Tensor& x) {
  return x.shape().is_fully_known() ? broadcast_to(g, x.shape()) : broadcast_like(g, x);
}

Grads sum_grad(const GradContext& c) {
  Reduced r = reduced(c);
  return Grads{expand_to(keep(c.grad, r), c.inputs[0])};
}

Grads mean_grad(const GradContext& c) {
  Reduced r = reduced(c);
  const Tensor& x = c.inputs[0];
  bool known = true;
  int64_t count = 1;
  for (int a : r.axes) {
    known = known && x.shape()[a] != kUnknownDim;
    count *= x.shape()[a];
  }
  Tensor g =
      known ? keep(c.grad, r) * (1.0 / double(count > 0 ? count : 1))
            : keep(c.grad, r) / element_count(x, Axes(r.axes.begin(), r.axes.end()), x.dtype());
  return Grads{expand_to(g, x)};
}

// max/min: the gradient is shared equally by the elements equal to the extreme value.
Grads extreme_grad(const GradContext& c) {
  Reduced r = reduced(c);
  const Tensor& x = c.inputs[0];
  Tensor hit = equal(x, keep(c.output, r));
  Tensor count = sum(cast(hit, x.dtype()), Axes(r.axes.begin(), r.axes.end()), true);
  return Grads{where(hit, keep(c.grad, r) / count, scalar(0, x.dtype()))};
}

// d prod / d x_i = the product of the other elements of x_i's group, computed without
// dividing by a zero (as TensorFlow and PyTorch do): with no zero in the group it is
// prod / x_i; with one zero, the zero gets the product of the non-zero elements and the rest
// get 0; with two or more zeros every element gets 0.
Grads prod_grad(const GradContext& c) {
  Reduced r = reduced(c);
  const Tensor& x = c.inputs[0];
  Axes axes(r.axes.begin(), r.axes.end());
  Tensor zero = scalar(0, x.dtype()), one = scalar(1, x.dtype());
  Tensor is_zero = equal(x, zero);
  Tensor safe_x = where(is_zero, one, x);
  Tensor zeros = sum(cast(is_zero, x.dtype()), axes, true);
  Tensor nonzero_prod = prod(safe_x, axes, true);
  Tensor at_zero = where(equal(zeros, one), nonzero_prod, zero);
  Tensor elsewhere = where(equal(zeros, zero), nonzero_prod / safe_x, zero);
  return Grads{keep(c.grad, r) * where(is_zero, at_zero, elsewhere)};
}

Grads logsumexp_grad(const GradContext& c) {
  Reduced r = reduced(c);
  return Grads{keep(c.grad, r) * exp(c.inputs[0] - keep(c.output, r))};
}

Grads softmax_grad(const GradContext& c) {
  int64_t axis = c.attrs.get_int("axis", "softmax");
  const Tensor& y = c.output;
  return Grads{y * (c.grad - sum(c.grad * y, {axis}, true))};
}

Grads log_softmax_grad(const GradContext& c) {
  int64_t axis = c.attrs.get_int("axis", "log_softmax");
  return Grads{c.grad - exp(c.output) * sum(c.grad, {axis}, true)};
}

}  // namespace

void register_reduce_gradients(GradTable& t) {
  auto set = [&](OpKind k, GradRule r) { t[size_t(k)] = r; };
  set(OpKind::Sum, sum_grad);
  set(OpKind::Mean, mean_grad);
  set(OpKind::Max, extreme_grad);
  set(OpKind::Min, extreme_grad);
  set(OpKind::Prod, prod_grad);
  set(OpKind::LogSumExp, logsumexp_grad);
  set(OpKind::Softmax, softmax_grad);
  set(OpKind::LogSoftmax, log_softmax_grad);
}

}  // namespace kiln::detail
