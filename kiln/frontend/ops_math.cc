// Elementwise ops and operators: thin wrappers over the dispatcher.
#include "kiln/frontend/creation.h"
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/ops.h"

namespace kiln {

using detail::apply;

#define KILN_BINARY_OP(fn, Kind) \
  Tensor fn(const Tensor& a, const Tensor& b) { return apply(OpKind::Kind, {a, b}); }
KILN_BINARY_OP(add, Add)
KILN_BINARY_OP(sub, Sub)
KILN_BINARY_OP(mul, Mul)
KILN_BINARY_OP(div, Div)
KILN_BINARY_OP(pow, Pow)
KILN_BINARY_OP(maximum, Maximum)
KILN_BINARY_OP(minimum, Minimum)
KILN_BINARY_OP(equal, Equal)
KILN_BINARY_OP(not_equal, NotEqual)
KILN_BINARY_OP(less, Less)
KILN_BINARY_OP(less_equal, LessEqual)
KILN_BINARY_OP(greater, Greater)
KILN_BINARY_OP(greater_equal, GreaterEqual)
KILN_BINARY_OP(logical_and, LogicalAnd)
KILN_BINARY_OP(logical_or, LogicalOr)
#undef KILN_BINARY_OP

#define KILN_UNARY_OP(fn, Kind) \
  Tensor fn(const Tensor& x) { return apply(OpKind::Kind, {x}); }
KILN_UNARY_OP(neg, Neg)
KILN_UNARY_OP(abs, Abs)
KILN_UNARY_OP(sign, Sign)
KILN_UNARY_OP(square, Square)
KILN_UNARY_OP(sqrt, Sqrt)
KILN_UNARY_OP(rsqrt, Rsqrt)
KILN_UNARY_OP(exp, Exp)
KILN_UNARY_OP(log, Log)
KILN_UNARY_OP(log1p, Log1p)
KILN_UNARY_OP(tanh, Tanh)
KILN_UNARY_OP(sigmoid, Sigmoid)
KILN_UNARY_OP(relu, Relu)
KILN_UNARY_OP(erf, Erf)
KILN_UNARY_OP(softplus, Softplus)
KILN_UNARY_OP(logical_not, LogicalNot)
#undef KILN_UNARY_OP

Tensor leaky_relu(const Tensor& x, double alpha) {
  return apply(OpKind::LeakyRelu, {x}, Attrs{{"alpha", alpha}});
}

Tensor gelu(const Tensor& x, bool approximate) {
  return apply(OpKind::Gelu, {x}, Attrs{{"approximate", approximate}});
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return apply(OpKind::Cast, {x}, Attrs{{"dtype", dtype}});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return apply(OpKind::Select, {cond, a, b});
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }

Tensor operator+(const Tensor& a, double b) { return add(a, scalar(b, a.dtype())); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar(b, a.dtype())); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar(b, a.dtype())); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar(b, a.dtype())); }
Tensor operator+(double a, const Tensor& b) { return add(scalar(a, b.dtype()), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar(a, b.dtype()), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar(a, b.dtype()), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar(a, b.dtype()), b); }

}  // namespace kiln
