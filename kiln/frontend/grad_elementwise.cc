// Gradient rules of elementwise ops.
#include <cmath>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/gradients.h"
#include "kiln/frontend/ops.h"

namespace kiln::detail {
namespace {

using Grads = std::vector<Tensor>;

// Gradients of a binary op whose partial derivatives are da and db (broadcast shapes).
Grads binary(const GradContext& c, const Tensor& da, const Tensor& db) {
  Grads r(2);
  if (c.needs_grad(0)) r[0] = unbroadcast(da, c.inputs[0].shape());
  if (c.needs_grad(1)) r[1] = unbroadcast(db, c.inputs[1].shape());
  return r;
}

Tensor zero(const Tensor& like) { return scalar(0, like.dtype()); }

Grads add_grad(const GradContext& c) { return binary(c, c.grad, c.grad); }
Grads sub_grad(const GradContext& c) {
  return binary(c, c.grad, c.needs_grad(1) ? -c.grad : Tensor());
}
Grads mul_grad(const GradContext& c) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  return binary(c, c.needs_grad(0) ? c.grad * b : Tensor(),
                c.needs_grad(1) ? c.grad * a : Tensor());
}
Grads div_grad(const GradContext& c) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  return binary(c, c.needs_grad(0) ? c.grad / b : Tensor(),
                c.needs_grad(1) ? -c.grad * a / square(b) : Tensor());
}
Grads pow_grad(const GradContext& c) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  Tensor da, db;
  if (c.needs_grad(0)) da = c.grad * b * pow(a, b - 1.0);
  if (c.needs_grad(1)) {
    // d/db a^b = a^b log a, taken as 0 where a <= 0 (as TensorFlow does).
    Tensor pos = greater(a, zero(a));
    Tensor safe_log = where(pos, log(where(pos, a, ones_like(a))), zero(a));
    db = c.grad * c.output * safe_log;
  }
  return binary(c, da, db);
}
// Ties send the gradient to the first operand, as TensorFlow does.
Grads maximum_grad(const GradContext& c) {
  Tensor first = greater_equal(c.inputs[0], c.inputs[1]);
  return binary(c, where(first, c.grad, zero(c.grad)), where(first, zero(c.grad), c.grad));
}
Grads minimum_grad(const GradContext& c) {
  Tensor first = less_equal(c.inputs[0], c.inputs[1]);
  return binary(c, where(first, c.grad, zero(c.grad)), where(first, zero(c.grad), c.grad));
}

Grads unary(const Tensor& g) { return Grads{g}; }
const Tensor& X(const GradContext& c) { return c.inputs[0]; }
const Tensor& Y(const GradContext& c) { return c.output; }

Grads neg_grad(const GradContext& c) { return unary(-c.grad); }
Grads abs_grad(const GradContext& c) { return unary(c.grad * sign(X(c))); }
Grads sign_grad(const GradContext& c) { return unary(zeros_like(X(c))); }
Grads square_grad(const GradContext& c) { return unary(c.grad * (X(c) * 2.0)); }
Grads sqrt_grad(const GradContext& c) { return unary(c.grad * 0.5 / Y(c)); }
Grads rsqrt_grad(const GradContext& c) { return unary(c.grad * -0.5 * Y(c) / X(c)); }
Grads exp_grad(const GradContext& c) { return unary(c.grad * Y(c)); }
Grads log_grad(const GradContext& c) { return unary(c.grad / X(c)); }
Grads log1p_grad(const GradContext& c) { return unary(c.grad / (X(c) + 1.0)); }
Grads tanh_grad(const GradContext& c) { return unary(c.grad * (1.0 - square(Y(c)))); }
Grads sigmoid_grad(const GradContext& c) { return unary(c.grad * Y(c) * (1.0 - Y(c))); }
// From the output: relu(x) > 0 exactly when x > 0 (NaN and -0 included), and a training step
// keeps the output anyway (the next layer reads it), so the input need not outlive the forward
// pass (a convolution's or matmul's fused epilogue then writes one tensor, not two).
Grads relu_grad(const GradContext& c) {
  return unary(where(greater(Y(c), zero(Y(c))), c.grad, zero(c.grad)));
}
Grads leaky_relu_grad(const GradContext& c) {
  double alpha = c.attrs.get_double("alpha", "leaky_relu");
  return unary(where(greater(X(c), zero(X(c))), c.grad, c.grad * alpha));
}
Grads gelu_grad(const GradContext& c) {
  const Tensor& x = X(c);
  if (c.attrs.get_bool("approximate", "gelu")) {
    const double k = 0.044715, s = std::sqrt(2.0 / M_PI);
    Tensor x2 = square(x);
    Tensor t = tanh((x + x * x2 * k) * s);
    Tensor dt = (1.0 - square(t)) * s * (x2 * (3.0 * k) + 1.0);
    return unary(c.grad * (0.5 * (t + 1.0) + 0.5 * x * dt));
  }
  // d/dx x Phi(x) = Phi(x) + x phi(x)
  Tensor cdf = 0.5 * (erf(x * M_SQRT1_2) + 1.0);
  Tensor pdf = exp(-0.5 * square(x)) * (1.0 / std::sqrt(2.0 * M_PI));
  return unary(c.grad * (cdf + x * pdf));
}
Grads erf_grad(const GradContext& c) {
  return unary(c.grad * exp(-square(X(c))) * (2.0 / std::sqrt(M_PI)));
}
Grads softplus_grad(const GradContext& c) { return unary(c.grad * sigmoid(X(c))); }
Grads cast_grad(const GradContext& c) {
  if (!is_floating(X(c).dtype()) || !is_floating(Y(c).dtype())) return Grads{Tensor()};
  return unary(cast(c.grad, X(c).dtype()));
}
Grads select_grad(const GradContext& c) {
  const Tensor& cond = c.inputs[0];
  Grads r(3);
  if (c.needs_grad(1)) r[1] = unbroadcast(where(cond, c.grad, zero(c.grad)), c.inputs[1].shape());
  if (c.needs_grad(2)) r[2] = unbroadcast(where(cond, zero(c.grad), c.grad), c.inputs[2].shape());
  return r;
}

}  // namespace

void register_elementwise_gradients(GradTable& t) {
  auto set = [&](OpKind k, GradRule r) { t[size_t(k)] = r; };
  set(OpKind::Add, add_grad);
  set(OpKind::Sub, sub_grad);
  set(OpKind::Mul, mul_grad);
  set(OpKind::Div, div_grad);
  set(OpKind::Pow, pow_grad);
  set(OpKind::Maximum, maximum_grad);
  set(OpKind::Minimum, minimum_grad);
  set(OpKind::Neg, neg_grad);
  set(OpKind::Abs, abs_grad);
  set(OpKind::Sign, sign_grad);
  set(OpKind::Square, square_grad);
  set(OpKind::Sqrt, sqrt_grad);
  set(OpKind::Rsqrt, rsqrt_grad);
  set(OpKind::Exp, exp_grad);
  set(OpKind::Log, log_grad);
  set(OpKind::Log1p, log1p_grad);
  set(OpKind::Tanh, tanh_grad);
  set(OpKind::Sigmoid, sigmoid_grad);
  set(OpKind::Relu, relu_grad);
  set(OpKind::LeakyRelu, leaky_relu_grad);
  set(OpKind::Gelu, gelu_grad);
  set(OpKind::Erf, erf_grad);
  set(OpKind::Softplus, softplus_grad);
  set(OpKind::Cast, cast_grad);
  set(OpKind::Select, select_grad);
}

}  // namespace kiln::detail
