// Shape/dtype rules of the op table (one per family of ops). Each checks its inputs and
// attributes and returns the output type; errors name the op, shapes and values.
// Arity, input dtypes and attribute presence/kinds are already checked by infer_type.
#pragma once

#include <span>

#include "kiln/ir/op_table.h"

namespace kiln::rules {

#define KILN_RULE(name) \
  TensorType name(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs);
KILN_RULE(rule_binary)
KILN_RULE(rule_compare)
KILN_RULE(rule_unary)
KILN_RULE(rule_cast)
KILN_RULE(rule_select)
KILN_RULE(rule_reduce)
KILN_RULE(rule_arg_reduce)
KILN_RULE(rule_axis_preserving)
KILN_RULE(rule_matmul)
KILN_RULE(rule_conv2d)
KILN_RULE(rule_conv2d_backprop_input)
KILN_RULE(rule_conv2d_backprop_filter)
KILN_RULE(rule_pool2d)
KILN_RULE(rule_max_pool2d_grad)
KILN_RULE(rule_avg_pool2d_grad)
KILN_RULE(rule_reshape)
KILN_RULE(rule_transpose)
KILN_RULE(rule_broadcast_to)
KILN_RULE(rule_broadcast_like)
KILN_RULE(rule_element_count)
KILN_RULE(rule_concat)
KILN_RULE(rule_slice)
KILN_RULE(rule_pad)
KILN_RULE(rule_gather)
KILN_RULE(rule_scatter_add)
KILN_RULE(rule_one_hot)
KILN_RULE(rule_random)
KILN_RULE(rule_attention)
KILN_RULE(rule_attention_grad)
#undef KILN_RULE

// Helpers shared by the rules and by the eager kernels.

// Normalised, sorted, de-duplicated reduction axes; [] means every axis.
std::vector<int> reduction_axes(const std::vector<int64_t>& axes, int rank, const char* op);
Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keepdims);

// Output size of one spatial dimension of a window op ("same" or "valid" padding), and the
// padding before it. Throws kiln::Error on a bad padding string.
struct WindowDim {
  int64_t out;
  int64_t pad_before;
};
WindowDim window_dim(int64_t in, int64_t window, int64_t stride, int64_t dilation,
                     const std::string& padding, const char* op);

// A slice along one axis after numpy normalisation: elements start, start+step, ... (size).
struct SliceRange {
  int64_t start, step, size;
};
std::vector<SliceRange> slice_ranges(const Shape& s, const Attrs& attrs, const char* op);

// Whether the pieces of a concat of result shape `result` along `axis` (negative: from the
// end) are whole contiguous blocks of it, one after another: every dimension before the axis
// is 1. Throws kiln::Error on an axis out of range.
bool concat_pieces_contiguous(const Shape& result, int64_t axis);

}  // namespace kiln::rules
