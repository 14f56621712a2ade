// kiln's op API. Every function runs eagerly on concrete tensors (and records on active
// gradient tapes). Binary ops broadcast like numpy; dtypes must match (no implicit promotion).
// Bad input throws kiln::Error naming the op, the shapes and what to do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

using Axes = std::vector<int64_t>;

// ---- elementwise arithmetic and math ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
// Floating: IEEE division. Integers: truncates toward zero; a zero divisor throws.
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);
// approximate=false: x * Phi(x) with erf; true: the tanh approximation.
Tensor gelu(const Tensor& x, bool approximate = false);
Tensor erf(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);

// ---- comparison and logic (results are bool) ----
Tensor equal(const Tensor& a, const Tensor& b);
Tensor not_equal(const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor less_equal(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor greater_equal(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
// Elementwise cond ? a : b, with broadcasting of all three.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
inline Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return where(cond, a, b);
}

// ---- reductions: axes {} means all axes; negative axes count from the end ----
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor prod(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor logsumexp(const Tensor& x, const Axes& axes = {}, bool keepdims = false);
Tensor argmax(const Tensor& x, int64_t axis = -1, bool keepdims = false);
Tensor argmin(const Tensor& x, int64_t axis = -1, bool keepdims = false);
Tensor softmax(const Tensor& x, int64_t axis = -1);
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// ---- contractions ----
// Matrix product of the last two axes; leading (batch) axes broadcast.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);
// 2-D convolution: input NHWC, filter HWIO, padding "valid" or "same" (TensorFlow semantics).
Tensor conv2d(const Tensor& input, const Tensor& filter, const Axes& strides = {1, 1},
              const std::string& padding = "valid", const Axes& dilations = {1, 1});
Tensor conv2d_backprop_input(const Shape& input_shape, const Tensor& filter, const Tensor& out_grad,
                             const Axes& strides, const std::string& padding,
                             const Axes& dilations);
Tensor conv2d_backprop_filter(const Tensor& input, const Shape& filter_shape,
                              const Tensor& out_grad, const Axes& strides,
                              const std::string& padding, const Axes& dilations);
// Pooling over NHWC; strides {} means strides = pool_size (Keras' default).
Tensor max_pool2d(const Tensor& x, const Axes& pool_size, const Axes& strides = {},
                  const std::string& padding = "valid");
Tensor avg_pool2d(const Tensor& x, const Axes& pool_size, const Axes& strides = {},
                  const std::string& padding = "valid");

// ---- attention ----
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

// ---- shapes and data movement ----
// One dimension may be -1 (inferred).
Tensor reshape(const Tensor& x, const Axes& shape);
// perm {} reverses the axes (numpy's default).
Tensor transpose(const Tensor& x, const Axes& perm = {});
inline Tensor permute(const Tensor& x, const Axes& perm) { return transpose(x, perm); }
Tensor broadcast_to(const Tensor& x, const Shape& shape);
// A copy of x in a buffer of its own (an identity for values; kept by graph passes).
Tensor copy(const Tensor& x);
// The sum of x over every process of kiln::distributed (every rank gets the same bits; the
// identity in a world of one process). Every rank must call it in the same order; traced, it
// is an all_reduce node. Its gradient is the all_reduce of the incoming gradient.
Tensor all_reduce(const Tensor& x);
// Broadcasts x to like's shape (like's data is not read); works when like's shape has unknown
// dimensions in a shape-polymorphic trace.
Tensor broadcast_like(const Tensor& x, const Tensor& like);
// The number of elements of x over `axes` ({} = all) as a scalar of `dtype`, computed when the
// op runs (so it is right for unknown dimensions).
Tensor element_count(const Tensor& x, const Axes& axes, DType dtype);
// Removes the given size-1 axes ({} removes every size-1 axis).
Tensor squeeze(const Tensor& x, const Axes& axes = {});
// Inserts a size-1 axis at `axis` (negative counts from the end of the result).
Tensor expand_dims(const Tensor& x, int64_t axis);
Tensor concat(const std::vector<Tensor>& xs, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t axis = 0);
// numpy x[start:stop:step] per axis; step {} means 1 everywhere; steps must be positive.
Tensor slice(const Tensor& x, const Axes& start, const Axes& stop, const Axes& step = {});
// Zero padding: `low`/`high` elements before/after each axis, `interior` between elements.
Tensor pad(const Tensor& x, const Axes& low, const Axes& high, const Axes& interior = {});
// numpy take: params[..., indices, ...] along `axis`; indices must be in [0, dim).
Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis = 0);
// The adjoint of gather: zeros with dimension `dim_size` at `axis`, updates added at indices.
Tensor scatter_add(const Tensor& updates, const Tensor& indices, int64_t axis, int64_t dim_size);
Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype = DType::f32);

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
