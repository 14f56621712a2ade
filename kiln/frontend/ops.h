// kiln's op API. Every function runs eagerly on concrete tensors (and records on active
// gradient tapes). Binary ops broadcast like numpy; dtypes must match (no implicit promotion).
// Bad input throws kiln::Error naming the op, the shapes and what to do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/ops_generated.h"
#include "kiln/frontend/tensor.h"

namespace kiln {

// The functions of most ops come from their rows of the op table: ops_generated.h (tensor
// inputs, then attributes in schema order with the schema's defaults; `kiln op-api list` says
// which). The ops below differ from their rows, each group says how (tools/op_api.cc keeps the
// list, with the same reasons); then compositions of ops, dropout and operators.

// ---- cast: returns x itself when it already has the dtype ----
Tensor cast(const Tensor& x, DType dtype);

// ---- select: numpy's name (where) and input names (cond, a, b) ----
// Elementwise cond ? a : b, with broadcasting of all three.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
inline Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return where(cond, a, b);
}

// ---- convolutions: padding comes before dilations (the schema's order is strides, dilations,
// padding); the backprop ops take the shape they produce as a Shape, in the input's place ----
// 2-D convolution: input NHWC, filter HWIO, padding "valid" or "same" (TensorFlow semantics).
Tensor conv2d(const Tensor& input, const Tensor& filter, const Axes& strides = {1, 1},
              const std::string& padding = "valid", const Axes& dilations = {1, 1});
Tensor conv2d_backprop_input(const Shape& input_shape, const Tensor& filter, const Tensor& out_grad,
                             const Axes& strides, const std::string& padding,
                             const Axes& dilations);
Tensor conv2d_backprop_filter(const Tensor& input, const Shape& filter_shape,
                              const Tensor& out_grad, const Axes& strides,
                              const std::string& padding, const Axes& dilations);

// ---- pooling: the default strides depend on pool_size ----
// Pooling over NHWC; strides {} means strides = pool_size (Keras' default).
Tensor max_pool2d(const Tensor& x, const Axes& pool_size, const Axes& strides = {},
                  const std::string& padding = "valid");
Tensor avg_pool2d(const Tensor& x, const Axes& pool_size, const Axes& strides = {},
                  const std::string& padding = "valid");

// ---- attention: an optional mask input, and a default scale that depends on q ----
// Fused scaled dot-product attention over the last two axes: softmax(scale * q k^T) v with
// q [..., Tq, d], k [..., Tv, d], v [..., Tv, dv] (the same leading axes, float32 or float64)
// -> [..., Tq, dv]. mask (optional, bool, broadcastable to [..., Tq, Tv]): where false the
// score becomes -1e9 (Keras), so a query whose keys are all masked attends to all of them
// uniformly; causal: query i sees the keys j <= i (combined with the mask). scale: default
// 1 / sqrt(d). One kernel per call (online softmax over blocks of keys: the [..., Tq, Tv]
// scores are never stored); gradients through attention_grad, one op for dq, dk and dv (its
// own gradient, for second order, composes matmul, where and softmax).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask = {},
                 std::optional<double> scale = std::nullopt, bool causal = false);

// ---- layout: defaults that depend on other arguments (transpose's perm, slice's step, pad's
// interior), a Shape argument (broadcast_to), a vector of inputs (concat), and shortcuts that
// return x itself (broadcast_to, broadcast_like) ----
// perm {} reverses the axes (numpy's default).
Tensor transpose(const Tensor& x, const Axes& perm = {});
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// Broadcasts x to like's shape (like's data is not read); works when like's shape has unknown
// dimensions in a shape-polymorphic trace.
Tensor broadcast_like(const Tensor& x, const Tensor& like);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0);
// numpy x[start:stop:step] per axis; step {} means 1 everywhere; steps must be positive.
Tensor slice(const Tensor& x, const Axes& start, const Axes& stop, const Axes& step = {});
// Zero padding: `low`/`high` elements before/after each axis, `interior` between elements.
Tensor pad(const Tensor& x, const Axes& low, const Axes& high, const Axes& interior = {});

// ---- compositions of table ops ----
inline Tensor permute(const Tensor& x, const Axes& perm) { return transpose(x, perm); }
// Removes the given size-1 axes ({} removes every size-1 axis).
Tensor squeeze(const Tensor& x, const Axes& axes = {});
// Inserts a size-1 axis at `axis` (negative counts from the end of the result).
Tensor expand_dims(const Tensor& x, int64_t axis);
Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);

// ---- randomness (explicit seeds: same seed, same numbers, on any machine/thread count) ----
// Inverted dropout: zeroes each element with probability `rate`, scales the rest by
// 1/(1-rate). rate must be in [0, 1).
Tensor dropout(const Tensor& x, double rate, int64_t seed);
// The same with an int64 scalar seed tensor (SeedGenerator::next()): traced, the mask is the
// one the same seed gives eagerly (an integer seed is replaced by the function's rng_state
// there; see creation.h).
Tensor dropout(const Tensor& x, double rate, const Tensor& seed);

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
// A C++ number meets a tensor: the number takes the tensor's dtype.
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace kiln
