// Shape/dtype rules of contractions and window ops: matmul, conv2d (+ backprops), pooling.
// Layouts: images NHWC, filters HWIO (TensorFlow's defaults).
#include <fmt/format.h>

#include "kiln/ir/shape_rules.h"

namespace kiln::rules {
namespace {

struct Window2D {
  std::vector<int64_t> size, strides, dilations;
  std::string padding;
};

void check_pair(const std::vector<int64_t>& v, const char* what, const char* op) {
  if (v.size() != 2 || v[0] < 1 || v[1] < 1)
    throw Error(fmt::format("{}: {} must be two positive integers [h, w], got [{}]", op, what,
                            fmt::join(v, ", ")));
}

void check_rank4(const TensorType& t, const char* what, const char* layout, const char* op) {
  if (t.shape.rank() != 4)
    throw Error(fmt::format("{}: {} must be a rank-4 {} tensor, got shape {}", op, what, layout,
                            t.shape.to_string()));
}

// Output shape of a conv2d of `input` (NHWC) with a filter of shape HWIO.
Shape conv_output(const Shape& input, const Shape& filter, const Attrs& attrs, const char* op) {
  const auto& strides = attrs.get_ints("strides", op);
  const auto& dil = attrs.get_ints("dilations", op);
  const auto& padding = attrs.get_string("padding", op);
  check_pair(strides, "strides", op);
  check_pair(dil, "dilations", op);
  if (input[3] != filter[2])
    throw Error(
        fmt::format("{}: input channels differ: input {} has {} channels (NHWC), filter {} "
                    "expects {} (HWIO)",
                    op, input.to_string(), input[3], filter.to_string(), filter[2]));
  WindowDim h = window_dim(input[1], filter[0], strides[0], dil[0], padding, op);
  WindowDim w = window_dim(input[2], filter[1], strides[1], dil[1], padding, op);
  return Shape{input[0], h.out, w.out, filter[3]};
}

Shape pool_output(const Shape& input, const Attrs& attrs, const char* op) {
  const auto& pool = attrs.get_ints("pool_size", op);
  const auto& strides = attrs.get_ints("strides", op);
  check_pair(pool, "pool_size", op);
  check_pair(strides, "strides", op);
  const auto& padding = attrs.get_string("padding", op);
  WindowDim h = window_dim(input[1], pool[0], strides[0], 1, padding, op);
  WindowDim w = window_dim(input[2], pool[1], strides[1], 1, padding, op);
  return Shape{input[0], h.out, w.out, input[3]};
}

Shape shape_attr(const Attrs& attrs, const char* name, const char* op) {
  const auto& v = attrs.get_ints(name, op);
  if (v.size() != 4)
    throw Error(fmt::format("{}: attribute {} must have 4 dimensions, got [{}]", op, name,
                            fmt::join(v, ", ")));
  return Shape(v);
}

// An input_shape attribute whose batch dimension may be -1 (traced with an unknown batch):
// the batch is the output gradient's.
Shape input_shape_attr(const Attrs& attrs, const TensorType& grad, const char* op) {
  Shape s = shape_attr(attrs, "input_shape", op);
  if (s[0] == kUnknownDim && grad.shape.rank() == 4) s[0] = grad.shape[0];
  return s;
}

void require_operand_dtypes_match(const TensorType& a, const TensorType& b, const char* op) {
  if (a.dtype != b.dtype)
    throw Error(fmt::format("{}: dtypes differ: {} and {}; use kiln::cast on one operand", op,
                            dtype_name(a.dtype), dtype_name(b.dtype)));
}

void require_shape(const Shape& got, const Shape& want, const char* what, const char* op) {
  if (!(got == want))
    throw Error(fmt::format("{}: {} has shape {}, expected {}", op, what, got.to_string(),
                            want.to_string()));
}

}  // namespace

WindowDim window_dim(int64_t in, int64_t window, int64_t stride, int64_t dilation,
                     const std::string& padding, const char* op) {
  if (padding != "valid" && padding != "same")
    throw Error(fmt::format("{}: padding must be \"same\" or \"valid\", got \"{}\"", op, padding));
  // A symbolic input or window dimension gives a symbolic output dimension.
  if (in == kUnknownDim || window == kUnknownDim) return {kUnknownDim, 0};
  int64_t eff = 0;
  if (__builtin_mul_overflow(window - 1, dilation, &eff) || __builtin_add_overflow(eff, 1, &eff))
    throw Error(fmt::format("{}: window of size {} with dilation {} is larger than int64 holds", op,
                            window, dilation));
  if (padding == "valid") {
    if (in < eff)
      throw Error(
          fmt::format("{}: window of size {} (dilated: {}) does not fit an input dimension "
                      "of size {} with padding \"valid\"; use padding \"same\" or a "
                      "smaller window",
                      op, window, eff, in));
    return {(in - eff) / stride + 1, 0};
  }
  // "same": ceil(in / stride) outputs; written so that no step overflows.
  int64_t out = in == 0 ? 0 : (in - 1) / stride + 1;
  int64_t total = std::max<int64_t>(eff - in + (out - 1) * stride, 0);
  return {out, total / 2};
}

TensorType rule_matmul(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.rank() < 2 || b.rank() < 2)
    throw Error(
        fmt::format("matmul: both operands need rank >= 2, got a {} and b {}; reshape a "
                    "vector to (1, n) or (n, 1) first",
                    a.to_string(), b.to_string()));
  require_operand_dtypes_match(in[0], in[1], op.name);
  bool ta = attrs.get_bool("transpose_a", op.name), tb = attrs.get_bool("transpose_b", op.name);
  int64_t m = ta ? a.dim(-1) : a.dim(-2), ka = ta ? a.dim(-2) : a.dim(-1);
  int64_t kb = tb ? b.dim(-1) : b.dim(-2), n = tb ? b.dim(-2) : b.dim(-1);
  if (ka != kb && ka != kUnknownDim && kb != kUnknownDim)
    throw Error(fmt::format("matmul: inner dimensions differ: a is {}{}, b is {}{}", a.to_string(),
                            ta ? " (transposed)" : "", b.to_string(), tb ? " (transposed)" : ""));
  Shape batch_a(std::span<const int64_t>(a.begin(), size_t(a.rank() - 2)));
  Shape batch_b(std::span<const int64_t>(b.begin(), size_t(b.rank() - 2)));
  Shape out = broadcast_shapes(batch_a, batch_b, "matmul (batch dimensions)");
  out.push_back(m);
  out.push_back(n);
  return {in[0].dtype, out};
}

TensorType rule_conv2d(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  check_rank4(in[0], "input", "NHWC", op.name);
  check_rank4(in[1], "filter", "HWIO", op.name);
  require_operand_dtypes_match(in[0], in[1], op.name);
  return {in[0].dtype, conv_output(in[0].shape, in[1].shape, attrs, op.name)};
}

TensorType rule_conv2d_backprop_input(const OpInfo& op, std::span<const TensorType> in,
                                      const Attrs& attrs) {
  check_rank4(in[0], "filter", "HWIO", op.name);
  check_rank4(in[1], "output gradient", "NHWC", op.name);
  require_operand_dtypes_match(in[0], in[1], op.name);
  Shape input = input_shape_attr(attrs, in[1], op.name);
  require_shape(in[1].shape, conv_output(input, in[0].shape, attrs, op.name), "output gradient",
                op.name);
  return {in[0].dtype, input};
}

TensorType rule_conv2d_backprop_filter(const OpInfo& op, std::span<const TensorType> in,
                                       const Attrs& attrs) {
  check_rank4(in[0], "input", "NHWC", op.name);
  check_rank4(in[1], "output gradient", "NHWC", op.name);
  require_operand_dtypes_match(in[0], in[1], op.name);
  Shape filter = shape_attr(attrs, "filter_shape", op.name);
  require_shape(in[1].shape, conv_output(in[0].shape, filter, attrs, op.name), "output gradient",
                op.name);
  return {in[0].dtype, filter};
}

TensorType rule_pool2d(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  check_rank4(in[0], "input", "NHWC", op.name);
  return {in[0].dtype, pool_output(in[0].shape, attrs, op.name)};
}

TensorType rule_max_pool2d_grad(const OpInfo& op, std::span<const TensorType> in,
                                const Attrs& attrs) {
  check_rank4(in[0], "input", "NHWC", op.name);
  require_operand_dtypes_match(in[0], in[1], op.name);
  require_shape(in[1].shape, pool_output(in[0].shape, attrs, op.name), "output gradient", op.name);
  return in[0];
}

TensorType rule_avg_pool2d_grad(const OpInfo& op, std::span<const TensorType> in,
                                const Attrs& attrs) {
  Shape input = input_shape_attr(attrs, in[0], op.name);
  require_shape(in[0].shape, pool_output(input, attrs, op.name), "output gradient", op.name);
  return {in[0].dtype, input};
}

}  // namespace kiln::rules
