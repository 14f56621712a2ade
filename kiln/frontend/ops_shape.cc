// Shape and data-movement ops written by hand (ops.h says why; the others are generated from
// the op table: ops_generated.cc). squeeze, expand_dims and stack are compositions of table
// ops.
#include <fmt/format.h>

#include <algorithm>

#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/ops.h"

namespace kiln {

using detail::apply;

Tensor transpose(const Tensor& x, const Axes& perm) {
  Axes p = perm;
  if (p.empty())
    for (int i = x.rank() - 1; i >= 0; --i) p.push_back(i);
  return apply(OpKind::Transpose, {x}, Attrs{{"perm", p}});
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return apply(OpKind::BroadcastTo, {x}, Attrs{{"shape", shape.to_vector()}});
}

Tensor broadcast_like(const Tensor& x, const Tensor& like) {
  if (x.shape() == like.shape() && x.shape().is_fully_known()) return x;
  return apply(OpKind::BroadcastLike, {x, like});
}

Tensor squeeze(const Tensor& x, const Axes& axes) {
  const Shape& s = x.shape();
  std::vector<bool> drop(size_t(s.rank()), false);
  if (axes.empty()) {
    for (int i = 0; i < s.rank(); ++i) drop[size_t(i)] = s[i] == 1;
  } else {
    for (int64_t a : axes) {
      int i = normalize_axis(a, s.rank(), "squeeze");
      if (s[i] != 1)
        throw Error(
            fmt::format("squeeze: cannot squeeze axis {} of shape {}: its size is {}, "
                        "not 1",
                        a, s.to_string(), s[i]));
      drop[size_t(i)] = true;
    }
  }
  Axes out;
  for (int i = 0; i < s.rank(); ++i)
    if (!drop[size_t(i)]) out.push_back(s[i]);
  return reshape(x, out);
}

Tensor expand_dims(const Tensor& x, int64_t axis) {
  int a = normalize_axis(axis, x.rank() + 1, "expand_dims");
  Axes out = x.shape().to_vector();
  out.insert(out.begin() + a, 1);
  return reshape(x, out);
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw Error("concat: needs at least one tensor, got none");
  if (xs.size() == 1) return xs[0];
  return apply(OpKind::Concat, std::span<const Tensor>(xs), Attrs{{"axis", axis}});
}

Tensor stack(const std::vector<Tensor>& xs, int64_t axis) {
  if (xs.empty()) throw Error("stack: needs at least one tensor, got none");
  for (size_t i = 1; i < xs.size(); ++i)
    if (!(xs[i].shape() == xs[0].shape()))
      throw Error(
          fmt::format("stack: all tensors need the same shape; tensor 0 is {}, tensor {} "
                      "is {}",
                      xs[0].shape().to_string(), i, xs[i].shape().to_string()));
  int a = normalize_axis(axis, xs[0].rank() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& x : xs) expanded.push_back(expand_dims(x, a));
  return concat(expanded, a);
}

Tensor slice(const Tensor& x, const Axes& start, const Axes& stop, const Axes& step) {
  Axes st = step.empty() ? Axes(start.size(), 1) : step;
  return apply(OpKind::Slice, {x}, Attrs{{"start", start}, {"stop", stop}, {"step", st}});
}

Tensor pad(const Tensor& x, const Axes& low, const Axes& high, const Axes& interior) {
  Axes in = interior.empty() ? Axes(low.size(), 0) : interior;
  return apply(OpKind::Pad, {x}, Attrs{{"low", low}, {"high", high}, {"interior", in}});
}

}  // namespace kiln
