// Shape/dtype rules of elementwise ops: binary, comparison, unary, cast, select.
#include <fmt/format.h>

#include "kiln/ir/shape_rules.h"

namespace kiln::rules {
namespace {

void require_same_dtype(const OpInfo& op, const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype)
    throw DTypeError(
        fmt::format("{}: dtypes differ: a is {} {}, b is {} {}; kiln does not promote "
                    "types implicitly, use kiln::cast on one operand",
                    op.name, dtype_name(a.dtype), a.shape.to_string(), dtype_name(b.dtype),
                    b.shape.to_string()));
}

}  // namespace

TensorType rule_binary(const OpInfo& op, std::span<const TensorType> in, const Attrs&) {
  require_same_dtype(op, in[0], in[1]);
  return {in[0].dtype, broadcast_shapes(in[0].shape, in[1].shape, op.name)};
}

TensorType rule_compare(const OpInfo& op, std::span<const TensorType> in, const Attrs&) {
  require_same_dtype(op, in[0], in[1]);
  return {DType::b8, broadcast_shapes(in[0].shape, in[1].shape, op.name)};
}

TensorType rule_unary(const OpInfo&, std::span<const TensorType> in, const Attrs&) { return in[0]; }

TensorType rule_cast(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  return {attrs.get_dtype("dtype", op.name), in[0].shape};
}

TensorType rule_select(const OpInfo& op, std::span<const TensorType> in, const Attrs&) {
  if (in[0].dtype != DType::b8)
    throw DTypeError(fmt::format("select: the condition (input 0) must be bool, got {} {}",
                                 dtype_name(in[0].dtype), in[0].shape.to_string()));
  if (in[1].dtype != in[2].dtype)
    throw DTypeError(fmt::format("select: the two branches have different dtypes: {} {} and {} {}",
                                 dtype_name(in[1].dtype), in[1].shape.to_string(),
                                 dtype_name(in[2].dtype), in[2].shape.to_string()));
  Shape s = broadcast_shapes(in[1].shape, in[2].shape, op.name);
  return {in[1].dtype, broadcast_shapes(in[0].shape, s, op.name)};
}

}  // namespace kiln::rules
