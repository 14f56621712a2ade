// Generated from the op table (kiln/ir/ops.def) by `kiln op-api source` (tools/op_api.cc):
// do not edit; run scripts/gen-op-api.sh after changing a row. Thin wrappers over the
// dispatcher, declared in ops_generated.h.
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/ops.h"

namespace kiln {

using detail::apply;

Tensor add(const Tensor& a, const Tensor& b) { return apply(OpKind::Add, {a, b}); }

Tensor sub(const Tensor& a, const Tensor& b) { return apply(OpKind::Sub, {a, b}); }

Tensor mul(const Tensor& a, const Tensor& b) { return apply(OpKind::Mul, {a, b}); }

Tensor div(const Tensor& a, const Tensor& b) { return apply(OpKind::Div, {a, b}); }

Tensor pow(const Tensor& a, const Tensor& b) { return apply(OpKind::Pow, {a, b}); }

Tensor maximum(const Tensor& a, const Tensor& b) { return apply(OpKind::Maximum, {a, b}); }

Tensor minimum(const Tensor& a, const Tensor& b) { return apply(OpKind::Minimum, {a, b}); }

Tensor equal(const Tensor& a, const Tensor& b) { return apply(OpKind::Equal, {a, b}); }

Tensor not_equal(const Tensor& a, const Tensor& b) { return apply(OpKind::NotEqual, {a, b}); }

Tensor less(const Tensor& a, const Tensor& b) { return apply(OpKind::Less, {a, b}); }

Tensor less_equal(const Tensor& a, const Tensor& b) { return apply(OpKind::LessEqual, {a, b}); }

Tensor greater(const Tensor& a, const Tensor& b) { return apply(OpKind::Greater, {a, b}); }

Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return apply(OpKind::GreaterEqual, {a, b});
}

Tensor logical_and(const Tensor& a, const Tensor& b) { return apply(OpKind::LogicalAnd, {a, b}); }

Tensor logical_or(const Tensor& a, const Tensor& b) { return apply(OpKind::LogicalOr, {a, b}); }

Tensor neg(const Tensor& x) { return apply(OpKind::Neg, {x}); }

Tensor abs(const Tensor& x) { return apply(OpKind::Abs, {x}); }

Tensor sign(const Tensor& x) { return apply(OpKind::Sign, {x}); }

Tensor square(const Tensor& x) { return apply(OpKind::Square, {x}); }

Tensor sqrt(const Tensor& x) { return apply(OpKind::Sqrt, {x}); }

Tensor rsqrt(const Tensor& x) { return apply(OpKind::Rsqrt, {x}); }

Tensor exp(const Tensor& x) { return apply(OpKind::Exp, {x}); }

Tensor log(const Tensor& x) { return apply(OpKind::Log, {x}); }

Tensor log1p(const Tensor& x) { return apply(OpKind::Log1p, {x}); }

Tensor tanh(const Tensor& x) { return apply(OpKind::Tanh, {x}); }

Tensor sigmoid(const Tensor& x) { return apply(OpKind::Sigmoid, {x}); }

Tensor relu(const Tensor& x) { return apply(OpKind::Relu, {x}); }

Tensor leaky_relu(const Tensor& x, double alpha) {
  return apply(OpKind::LeakyRelu, {x}, Attrs{{"alpha", alpha}});
}

Tensor gelu(const Tensor& x, bool approximate) {
  return apply(OpKind::Gelu, {x}, Attrs{{"approximate", approximate}});
}

Tensor erf(const Tensor& x) { return apply(OpKind::Erf, {x}); }

Tensor softplus(const Tensor& x) { return apply(OpKind::Softplus, {x}); }

Tensor logical_not(const Tensor& x) { return apply(OpKind::LogicalNot, {x}); }

Tensor sum(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Sum, {x}, Attrs{{"axes", axes}, {"keepdims", keepdims}});
}

Tensor mean(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Mean, {x}, Attrs{{"axes", axes}, {"keepdims", keepdims}});
}

Tensor max(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Max, {x}, Attrs{{"axes", axes}, {"keepdims", keepdims}});
}

Tensor min(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Min, {x}, Attrs{{"axes", axes}, {"keepdims", keepdims}});
}

Tensor prod(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Prod, {x}, Attrs{{"axes", axes}, {"keepdims", keepdims}});
}

Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::LogSumExp, {x}, Attrs{{"axes", axes}, {"keepdims", keepdims}});
}

Tensor argmax(const Tensor& x, int64_t axis, bool keepdims) {
  return apply(OpKind::ArgMax, {x}, Attrs{{"axis", axis}, {"keepdims", keepdims}});
}

Tensor argmin(const Tensor& x, int64_t axis, bool keepdims) {
  return apply(OpKind::ArgMin, {x}, Attrs{{"axis", axis}, {"keepdims", keepdims}});
}

Tensor softmax(const Tensor& x, int64_t axis) {
  return apply(OpKind::Softmax, {x}, Attrs{{"axis", axis}});
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  return apply(OpKind::LogSoftmax, {x}, Attrs{{"axis", axis}});
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  return apply(OpKind::MatMul, {a, b},
               Attrs{{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
}

Tensor reshape(const Tensor& x, const Axes& shape) {
  return apply(OpKind::Reshape, {x}, Attrs{{"shape", shape}});
}

Tensor copy(const Tensor& x) { return apply(OpKind::Copy, {x}); }

Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis) {
  return apply(OpKind::Gather, {params, indices}, Attrs{{"axis", axis}});
}

Tensor scatter_add(const Tensor& updates, const Tensor& indices, int64_t axis, int64_t dim_size) {
  return apply(OpKind::ScatterAdd, {updates, indices},
               Attrs{{"axis", axis}, {"dim_size", dim_size}});
}

Tensor element_count(const Tensor& x, const Axes& axes, DType dtype) {
  return apply(OpKind::ElementCount, {x}, Attrs{{"axes", axes}, {"dtype", dtype}});
}

Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype) {
  return apply(OpKind::OneHot, {indices}, Attrs{{"depth", depth}, {"dtype", dtype}});
}

Tensor all_reduce(const Tensor& x) { return apply(OpKind::AllReduce, {x}); }

}  // namespace kiln
