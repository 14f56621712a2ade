// Gradient rules of shape and data-movement ops.
#include <fmt/format.h>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/gradients.h"
#include "kiln/frontend/ops.h"
#include "kiln/ir/shape_rules.h"

namespace kiln::detail {
namespace {

using Grads = std::vector<Tensor>;

Grads reshape_grad(const GradContext& c) {
  return Grads{reshape(c.grad, c.inputs[0].shape().to_vector())};
}

Grads transpose_grad(const GradContext& c) {
  const auto& perm = c.attrs.get_ints("perm", "transpose");
  Axes inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  return Grads{transpose(c.grad, inverse)};
}

Grads broadcast_to_grad(const GradContext& c) {
  return Grads{unbroadcast(c.grad, c.inputs[0].shape())};
}

Grads copy_grad(const GradContext& c) { return Grads{c.grad}; }

// d(sum over ranks of x_r)/dx on rank r, summed over the ranks' upstream gradients.
Grads all_reduce_grad(const GradContext& c) { return Grads{all_reduce(c.grad)}; }

// Only x gets a gradient; `like` contributes its shape, not its values.
Grads broadcast_like_grad(const GradContext& c) {
  return Grads{unbroadcast(c.grad, c.inputs[0].shape()), Tensor()};
}

Grads concat_grad(const GradContext& c) {
  const Shape& out = c.output.shape();
  int axis = normalize_axis(c.attrs.get_int("axis", "concat"), out.rank(), "concat");
  Grads r(c.inputs.size());
  Axes start(size_t(out.rank()), 0), stop = out.to_vector();
  int64_t offset = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    int64_t d = c.inputs[i].shape()[axis];
    if (c.needs_grad(i)) {
      start[size_t(axis)] = offset;
      stop[size_t(axis)] = offset + d;
      r[i] = slice(c.grad, start, stop);
    }
    offset += d;
  }
  return r;
}

// A strided slice's gradient is the output gradient padded back into place (interior
// padding fills the skipped elements).
Grads slice_grad(const GradContext& c) {
  const Shape& s = c.inputs[0].shape();
  // The padding that puts the gradient back depends on every dimension's size.
  if (!s.is_fully_known())
    throw Error(
        fmt::format("slice: the gradient of a slice of a tensor of shape {} needs every "
                    "dimension known; trace with a fully known input shape",
                    s.to_string()));
  auto ranges = rules::slice_ranges(s, c.attrs, "slice");
  Axes low, high, interior;
  for (int i = 0; i < s.rank(); ++i) {
    const auto& r = ranges[size_t(i)];
    if (r.size == 0) {
      low.push_back(0);
      high.push_back(s[i]);
      interior.push_back(0);
    } else {
      low.push_back(r.start);
      high.push_back(s[i] - (r.start + (r.size - 1) * r.step) - 1);
      interior.push_back(r.step - 1);
    }
  }
  return Grads{pad(c.grad, low, high, interior)};
}

Grads pad_grad(const GradContext& c) {
  const Shape& s = c.inputs[0].shape();
  const auto& low = c.attrs.get_ints("low", "pad");
  const auto& interior = c.attrs.get_ints("interior", "pad");
  Axes start, stop, step;
  for (int i = 0; i < s.rank(); ++i) {
    size_t k = size_t(i);
    start.push_back(low[k]);
    stop.push_back(low[k] + s[i] + (s[i] > 0 ? (s[i] - 1) * interior[k] : 0));
    step.push_back(interior[k] + 1);
  }
  return Grads{slice(c.grad, start, stop, step)};
}

Grads gather_grad(const GradContext& c) {
  const Shape& p = c.inputs[0].shape();
  int axis = normalize_axis(c.attrs.get_int("axis", "gather"), p.rank(), "gather");
  return Grads{scatter_add(c.grad, c.inputs[1], axis, p[axis]), Tensor()};
}

Grads scatter_add_grad(const GradContext& c) {
  return Grads{gather(c.grad, c.inputs[1], c.attrs.get_int("axis", "scatter_add")), Tensor()};
}

}  // namespace

void register_shape_gradients(GradTable& t) {
  auto set = [&](OpKind k, GradRule r) { t[size_t(k)] = r; };
  set(OpKind::Reshape, reshape_grad);
  set(OpKind::Transpose, transpose_grad);
  set(OpKind::BroadcastTo, broadcast_to_grad);
  set(OpKind::BroadcastLike, broadcast_like_grad);
  set(OpKind::Copy, copy_grad);
  set(OpKind::AllReduce, all_reduce_grad);
  set(OpKind::Concat, concat_grad);
  set(OpKind::Slice, slice_grad);
  set(OpKind::Pad, pad_grad);
  set(OpKind::Gather, gather_grad);
  set(OpKind::ScatterAdd, scatter_add_grad);
}

}  // namespace kiln::detail
