// Shape/dtype rules of reductions and of ops that normalise along one axis.
#include <fmt/format.h>

#include <algorithm>

#include "kiln/ir/shape_rules.h"

namespace kiln::rules {

std::vector<int> reduction_axes(const std::vector<int64_t>& axes, int rank, const char* op) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) out.push_back(normalize_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw Error(fmt::format("{}: axes [{}] name the same axis twice", op, fmt::join(axes, ", ")));
  return out;
}

Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (int i = 0; i < s.rank(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced)
      out.push_back(s[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

TensorType rule_reduce(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  std::vector<int> axes =
      reduction_axes(attrs.get_ints("axes", op.name), in[0].shape.rank(), op.name);
  bool keepdims = attrs.get_bool("keepdims", op.name);
  if (op.kind == OpKind::Max || op.kind == OpKind::Min) {
    for (int a : axes)
      if (in[0].shape[a] == 0)
        throw Error(
            fmt::format("{}: cannot reduce over axis {} of shape {}: it has size 0 and "
                        "{} has no identity",
                        op.name, a, in[0].shape.to_string(), op.name));
  }
  return {in[0].dtype, reduced_shape(in[0].shape, axes, keepdims)};
}

TensorType rule_arg_reduce(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  int axis = normalize_axis(attrs.get_int("axis", op.name), in[0].shape.rank(), op.name);
  if (in[0].shape[axis] == 0)
    throw Error(fmt::format("{}: axis {} of shape {} has size 0; there is no {} of nothing",
                            op.name, axis, in[0].shape.to_string(), op.name));
  return {DType::i64, reduced_shape(in[0].shape, {axis}, attrs.get_bool("keepdims", op.name))};
}

TensorType rule_axis_preserving(const OpInfo& op, std::span<const TensorType> in,
                                const Attrs& attrs) {
  normalize_axis(attrs.get_int("axis", op.name), in[0].shape.rank(), op.name);
  return in[0];
}

}  // namespace kiln::rules
