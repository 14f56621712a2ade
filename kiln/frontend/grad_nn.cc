// Gradient rules of matmul, convolutions and pooling.
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/gradients.h"
#include "kiln/frontend/ops.h"

namespace kiln::detail {
namespace {

using Grads = std::vector<Tensor>;

// The gradient of a matrix b shared by a's batch entries (a Dense layer applied to a sequence:
// a [..., m, k], not transposed, b [k, n] or [n, k] if tb): the entries' products summed over
// the batch are one product of depth batch*m over a and g viewed as matrices of stacked rows,
// as Keras computes it (tensordot), instead of a batched product and a sum over its
// [batch, k, n] result (16 products of depth 64 for a transformer block's weights).
Tensor shared_matrix_grad(const Tensor& a, const Tensor& g, bool tb) {
  const Tensor a2 = reshape(a, {-1, a.shape().dim(-1)});
  const Tensor g2 = reshape(g, {-1, g.shape().dim(-1)});
  return tb ? matmul(g2, a2, true, false) : matmul(a2, g2, true, false);
}

// TensorFlow's MatMulGrad, for every combination of transpose flags; batch dimensions that
// were broadcast are summed back.
Grads matmul_grad(const GradContext& c) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1], &g = c.grad;
  bool ta = c.attrs.get_bool("transpose_a", "matmul"),
       tb = c.attrs.get_bool("transpose_b", "matmul");
  Tensor ga, gb;
  if (c.needs_grad(0)) {
    if (!ta)
      ga = tb ? matmul(g, b) : matmul(g, b, false, true);
    else
      ga = tb ? matmul(b, g, true, true) : matmul(b, g, false, true);
    ga = unbroadcast(ga, a.shape());
  }
  if (c.needs_grad(1) && !ta && b.shape().rank() == 2 && a.shape().rank() > 2) {
    gb = shared_matrix_grad(a, g, tb);
  } else if (c.needs_grad(1)) {
    if (!tb)
      gb = ta ? matmul(a, g) : matmul(a, g, true, false);
    else
      gb = ta ? matmul(g, a, true, true) : matmul(g, a, true, false);
    gb = unbroadcast(gb, b.shape());
  }
  return Grads{ga, gb};
}

struct ConvAttrs {
  Axes strides, dilations;
  std::string padding;
};
ConvAttrs conv_attrs(const GradContext& c) {
  const char* n = op_name(c.kind);
  return {c.attrs.get_ints("strides", n), c.attrs.get_ints("dilations", n),
          c.attrs.get_string("padding", n)};
}

Grads conv2d_grad(const GradContext& c) {
  const Tensor &x = c.inputs[0], &w = c.inputs[1];
  ConvAttrs a = conv_attrs(c);
  Grads r(2);
  if (c.needs_grad(0))
    r[0] = conv2d_backprop_input(x.shape(), w, c.grad, a.strides, a.padding, a.dilations);
  if (c.needs_grad(1))
    r[1] = conv2d_backprop_filter(x, w.shape(), c.grad, a.strides, a.padding, a.dilations);
  return r;
}

// y = backprop_input(w, g) is bilinear and the adjoint of conv2d in its input:
// <y, dy> = <conv2d(dy, w), g> = <w, backprop_filter(dy, g)>.
Grads conv2d_backprop_input_grad(const GradContext& c) {
  const Tensor &w = c.inputs[0], &g = c.inputs[1];
  ConvAttrs a = conv_attrs(c);
  Grads r(2);
  if (c.needs_grad(0))
    r[0] = conv2d_backprop_filter(c.grad, w.shape(), g, a.strides, a.padding, a.dilations);
  if (c.needs_grad(1)) r[1] = conv2d(c.grad, w, a.strides, a.padding, a.dilations);
  return r;
}

// y = backprop_filter(x, g): <y, dy> = <conv2d(x, dy), g> = <x, backprop_input(dy, g)>.
Grads conv2d_backprop_filter_grad(const GradContext& c) {
  const Tensor &x = c.inputs[0], &g = c.inputs[1];
  ConvAttrs a = conv_attrs(c);
  Grads r(2);
  if (c.needs_grad(0))
    r[0] = conv2d_backprop_input(x.shape(), c.grad, g, a.strides, a.padding, a.dilations);
  if (c.needs_grad(1)) r[1] = conv2d(x, c.grad, a.strides, a.padding, a.dilations);
  return r;
}

Attrs pool_attrs(const GradContext& c) {
  const char* n = op_name(c.kind);
  return Attrs{{"pool_size", c.attrs.get_ints("pool_size", n)},
               {"strides", c.attrs.get_ints("strides", n)},
               {"padding", c.attrs.get_string("padding", n)}};
}

Grads max_pool2d_grad(const GradContext& c) {
  return Grads{apply(OpKind::MaxPool2DGrad, {c.inputs[0], c.grad}, pool_attrs(c))};
}

Grads avg_pool2d_grad(const GradContext& c) {
  Attrs attrs = pool_attrs(c);
  attrs.set("input_shape", c.inputs[0].shape().to_vector());
  return Grads{apply(OpKind::AvgPool2DGrad, {c.grad}, attrs)};
}

// avg_pool2d_grad is linear in its input and the adjoint of avg_pool2d.
Grads avg_pool2d_grad_grad(const GradContext& c) {
  return Grads{apply(OpKind::AvgPool2D, {c.grad}, pool_attrs(c))};
}

}  // namespace

void register_nn_gradients(GradTable& t) {
  auto set = [&](OpKind k, GradRule r) { t[size_t(k)] = r; };
  set(OpKind::MatMul, matmul_grad);
  set(OpKind::Conv2D, conv2d_grad);
  set(OpKind::Conv2DBackpropInput, conv2d_backprop_input_grad);
  set(OpKind::Conv2DBackpropFilter, conv2d_backprop_filter_grad);
  set(OpKind::MaxPool2D, max_pool2d_grad);
  set(OpKind::AvgPool2D, avg_pool2d_grad);
  set(OpKind::AvgPool2DGrad, avg_pool2d_grad_grad);
}

}  // namespace kiln::detail
