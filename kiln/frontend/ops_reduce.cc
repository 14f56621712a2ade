// Reductions and softmax-family ops.
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/ops.h"

namespace kiln {

using detail::apply;

namespace {
Attrs reduce_attrs(const Axes& axes, bool keepdims) {
  return Attrs{{"axes", axes}, {"keepdims", keepdims}};
}
}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Sum, {x}, reduce_attrs(axes, keepdims));
}
Tensor mean(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Mean, {x}, reduce_attrs(axes, keepdims));
}
Tensor max(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Max, {x}, reduce_attrs(axes, keepdims));
}
Tensor min(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Min, {x}, reduce_attrs(axes, keepdims));
}
Tensor prod(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::Prod, {x}, reduce_attrs(axes, keepdims));
}
Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdims) {
  return apply(OpKind::LogSumExp, {x}, reduce_attrs(axes, keepdims));
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

}  // namespace kiln
