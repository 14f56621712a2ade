// Generated from the op table (kiln/ir/ops.def) by `kiln op-api header` (tools/op_api.cc):
// do not edit; run scripts/gen-op-api.sh after changing a row (the ctest
// tools.op_api_is_current checks it). The C++ function of every op that is exactly its
// tensor inputs, then its attributes in schema order with the schema's defaults. Include
// kiln/frontend/ops.h, which declares the other ops by hand (`kiln op-api list`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

using Axes = std::vector<int64_t>;

// add: binary; elementwise, commutative; inputs of a numeric dtype (not bool).
Tensor add(const Tensor& a, const Tensor& b);

// sub: binary; elementwise; inputs of a numeric dtype (not bool).
Tensor sub(const Tensor& a, const Tensor& b);

// mul: binary; elementwise, commutative; inputs of a numeric dtype (not bool).
Tensor mul(const Tensor& a, const Tensor& b);

// div: binary; elementwise; inputs of a numeric dtype (not bool).
// Floating: IEEE division. Integers: truncates toward zero; a zero divisor throws.
Tensor div(const Tensor& a, const Tensor& b);

// pow: binary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor pow(const Tensor& a, const Tensor& b);

// maximum: binary; elementwise, commutative; inputs of a numeric dtype (not bool).
Tensor maximum(const Tensor& a, const Tensor& b);

// minimum: binary; elementwise, commutative; inputs of a numeric dtype (not bool).
Tensor minimum(const Tensor& a, const Tensor& b);

// equal: binary; elementwise, commutative, no-gradient; inputs of any dtype.
// The result is bool.
Tensor equal(const Tensor& a, const Tensor& b);

// not_equal: binary; elementwise, commutative, no-gradient; inputs of any dtype.
// The result is bool.
Tensor not_equal(const Tensor& a, const Tensor& b);

// less: binary; elementwise, no-gradient; inputs of a numeric dtype (not bool).
// The result is bool.
Tensor less(const Tensor& a, const Tensor& b);

// less_equal: binary; elementwise, no-gradient; inputs of a numeric dtype (not bool).
// The result is bool.
Tensor less_equal(const Tensor& a, const Tensor& b);

// greater: binary; elementwise, no-gradient; inputs of a numeric dtype (not bool).
// The result is bool.
Tensor greater(const Tensor& a, const Tensor& b);

// greater_equal: binary; elementwise, no-gradient; inputs of a numeric dtype (not bool).
// The result is bool.
Tensor greater_equal(const Tensor& a, const Tensor& b);

// logical_and: binary; elementwise, commutative, no-gradient; inputs of bool.
Tensor logical_and(const Tensor& a, const Tensor& b);

// logical_or: binary; elementwise, commutative, no-gradient; inputs of bool.
Tensor logical_or(const Tensor& a, const Tensor& b);

// neg: unary; elementwise; inputs of a numeric dtype (not bool).
Tensor neg(const Tensor& x);

// abs: unary; elementwise; inputs of a numeric dtype (not bool).
Tensor abs(const Tensor& x);

// sign: unary; elementwise; inputs of a numeric dtype (not bool).
Tensor sign(const Tensor& x);

// square: unary; elementwise; inputs of a numeric dtype (not bool).
Tensor square(const Tensor& x);

// sqrt: unary; elementwise; inputs of a floating dtype (float32, float64 or bfloat16).
Tensor sqrt(const Tensor& x);

// rsqrt: unary; elementwise; inputs of a floating dtype (float32, float64 or bfloat16).
Tensor rsqrt(const Tensor& x);

// exp: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor exp(const Tensor& x);

// log: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor log(const Tensor& x);

// log1p: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor log1p(const Tensor& x);

// tanh: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor tanh(const Tensor& x);

// sigmoid: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor sigmoid(const Tensor& x);

// relu: unary; elementwise; inputs of a numeric dtype (not bool).
Tensor relu(const Tensor& x);

// leaky_relu: unary; elementwise; inputs of a floating dtype (float32, float64 or bfloat16);
// default alpha = 0.2.
Tensor leaky_relu(const Tensor& x, double alpha = 0.2);

// gelu: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16); default approximate = false.
// approximate=false: x * Phi(x) with erf; true: the tanh approximation.
Tensor gelu(const Tensor& x, bool approximate = false);

// erf: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor erf(const Tensor& x);

// softplus: unary; elementwise, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16).
Tensor softplus(const Tensor& x);

// logical_not: unary; elementwise, no-gradient; inputs of bool.
Tensor logical_not(const Tensor& x);

// sum: unary; reduction; inputs of a numeric dtype (not bool); defaults axes = [], keepdims =
// false.
// axes {} means all axes; negative axes count from the end.
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

// mean: unary; reduction; inputs of a floating dtype (float32, float64 or bfloat16); defaults axes
// = [], keepdims = false.
// axes {} means all axes; negative axes count from the end.
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

// max: unary; reduction; inputs of a numeric dtype (not bool); defaults axes = [], keepdims =
// false.
// axes {} means all axes; negative axes count from the end.
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

// min: unary; reduction; inputs of a numeric dtype (not bool); defaults axes = [], keepdims =
// false.
// axes {} means all axes; negative axes count from the end.
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

// prod: unary; reduction; inputs of a numeric dtype (not bool); defaults axes = [], keepdims =
// false.
// axes {} means all axes; negative axes count from the end.
Tensor prod(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

// logsumexp: unary; reduction, transcendental; inputs of a floating dtype (float32, float64 or
// bfloat16); defaults axes = [], keepdims = false.
// axes {} means all axes; negative axes count from the end.
Tensor logsumexp(const Tensor& x, const Axes& axes = {}, bool keepdims = false);

// argmax: unary; reduction, no-gradient; inputs of a numeric dtype (not bool); defaults axis = -1,
// keepdims = false.
Tensor argmax(const Tensor& x, int64_t axis = -1, bool keepdims = false);

// argmin: unary; reduction, no-gradient; inputs of a numeric dtype (not bool); defaults axis = -1,
// keepdims = false.
Tensor argmin(const Tensor& x, int64_t axis = -1, bool keepdims = false);

// softmax: unary; transcendental; inputs of a floating dtype (float32, float64 or bfloat16);
// default axis = -1.
Tensor softmax(const Tensor& x, int64_t axis = -1);

// log_softmax: unary; transcendental; inputs of a floating dtype (float32, float64 or bfloat16);
// default axis = -1.
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// matmul: binary; contraction, rounds-operands; inputs of a numeric dtype (not bool); defaults
// transpose_a = false, transpose_b = false.
// Matrix product of the last two axes; leading (batch) axes broadcast.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// reshape: unary; layout; inputs of any dtype.
// One dimension may be -1 (inferred).
Tensor reshape(const Tensor& x, const Axes& shape);

// copy: unary; layout; inputs of any dtype.
// A copy of x in a buffer of its own (an identity for values; kept by graph passes).
Tensor copy(const Tensor& x);

// gather: binary; selects; inputs of any dtype; default axis = 0.
// numpy take: params[..., indices, ...] along `axis`; indices must be in [0, dim).
Tensor gather(const Tensor& params, const Tensor& indices, int64_t axis = 0);

// scatter_add: binary; inputs of a numeric dtype (not bool).
// The adjoint of gather: zeros with dimension `dim_size` at `axis`, updates added at indices.
Tensor scatter_add(const Tensor& updates, const Tensor& indices, int64_t axis, int64_t dim_size);

// element_count: unary; no-gradient, internal; inputs of any dtype.
// The number of elements of x over `axes` ({} = all) as a scalar of `dtype`, computed when the op
// runs (so it is right for unknown dimensions).
Tensor element_count(const Tensor& x, const Axes& axes, DType dtype);

// one_hot: unary; no-gradient; inputs of any dtype; default dtype = f32.
Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype = DType::f32);

// all_reduce: unary; side-effecting; inputs of a floating dtype (float32, float64 or bfloat16).
// The sum of x over every process of kiln::distributed (every rank gets the same bits; the identity
// in a world of one process). Every rank must call it in the same order; traced, it is an
// all_reduce node. Its gradient is the all_reduce of the incoming gradient.
Tensor all_reduce(const Tensor& x);

}  // namespace kiln
