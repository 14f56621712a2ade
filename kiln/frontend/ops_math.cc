// cast, where and the operators; the other elementwise ops are generated from the op table
// (ops_generated.cc).
#include "kiln/frontend/creation.h"
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/ops.h"

namespace kiln {

using detail::apply;

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
