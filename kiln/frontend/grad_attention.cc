// Gradient rules of the fused attention ops.
//
// attention: one attention_grad call computes dq, dk and dv, packed in one tensor
// [..., Tq + 2 Tv, max(d, dv)] (ir/shape_rules_attention.cc: dq in rows [0, Tq), dk_j in row
// Tq + 2j, dv_j in row Tq + 2j + 1); slices cut them apart. In a trace the slices need Tq or Tv
// known (from the end when only Tv is). The mask gets no gradient.
//
// attention_grad (second-order gradients): its vector-Jacobian product is that of the same
// gradient composed of kiln ops (matmul, where, softmax: the [..., Tq, Tv] probabilities are
// materialised, as the unfused ops do), differentiated by a tape of its own; being kiln ops, it
// is recorded by outer tapes too, so any order works.
#include <fmt/format.h>

#include <limits>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/gradients.h"
#include "kiln/frontend/ops.h"

namespace kiln::detail {
namespace {

using Grads = std::vector<Tensor>;

struct Sizes {
  int rank;
  int64_t tq, tv, d, dv;
};

// The lengths and feature sizes of a call; throws unless the packed gradient can be cut apart.
Sizes sizes(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int r = q.rank();
  auto known = [](int64_t a, int64_t b) { return a != kUnknownDim ? a : b; };
  Sizes s{r, q.shape()[r - 2], known(k.shape()[r - 2], v.shape()[r - 2]),
          known(q.shape()[r - 1], k.shape()[r - 1]), v.shape()[r - 1]};
  if ((s.tq == kUnknownDim && s.tv == kUnknownDim) || s.d == kUnknownDim || s.dv == kUnknownDim)
    throw Error(fmt::format(
        "attention: its gradient in a trace needs the query length or the key length known, "
        "and the feature sizes of q and v (q {}, k {}, v {}); trace with a fixed length, or "
        "compose matmul and softmax",
        q.shape().to_string(), k.shape().to_string(), v.shape().to_string()));
  return s;
}

// dq, dk, dv cut out of attention_grad's packed result g, typed as q, k and v.
std::vector<Tensor> unpack(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v) {
  const Sizes s = sizes(q, k, v);
  const int r = s.rank;
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  // Rows [row0, row1) with `step` and columns [0, cols) of g.
  auto part = [&](int64_t row0, int64_t row1, int64_t step, int64_t cols) {
    Axes start(size_t(r), 0), stop(size_t(r), kEnd), steps(size_t(r), 1);
    start[size_t(r - 2)] = row0, stop[size_t(r - 2)] = row1, steps[size_t(r - 2)] = step;
    stop[size_t(r - 1)] = cols;
    return slice(g, start, stop, steps);
  };
  // A slice of a dimension unknown in g is unknown; the input may know it (Tv when only Tq is
  // unknown): give the gradient the input's type.
  auto like = [](const Tensor& x, const Tensor& input) {
    return x.shape() == input.shape() ? x : reshape(x, input.shape().to_vector());
  };
  // The first key row: Tq, or 2 Tv rows before the end.
  const int64_t kv0 = s.tq != kUnknownDim ? s.tq : s.tv == 0 ? kEnd : -2 * s.tv;
  return {like(part(0, s.tq != kUnknownDim ? s.tq : kv0, 1, s.d), q),
          like(part(kv0, kEnd, 2, s.d), k),
          like(part(kv0 == kEnd ? kEnd : kv0 + 1, kEnd, 2, s.dv), v)};
}

Grads attention_grad(const GradContext& c) {
  const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
  sizes(q, k, v);  // fail before running the kernel
  std::vector<Tensor> in{q, k, v, c.grad};
  if (c.inputs.size() > 3) in.push_back(c.inputs[3]);
  std::vector<Tensor> g = unpack(apply(OpKind::AttentionGrad, in, c.attrs), q, k, v);
  Grads out(c.inputs.size());
  for (size_t i = 0; i < 3; ++i)
    if (c.needs_grad(i)) out[i] = g[i];
  return out;
}

// dq, dk, dv of attention(q, k, v, mask) for the output gradient dout, composed of kiln ops.
std::vector<Tensor> composed_gradient(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& dout, Tensor mask, double scale, bool causal) {
  const DType dt = q.dtype();
  if (causal) {
    const Sizes s = sizes(q, k, v);
    if (s.tq == kUnknownDim || s.tv == kUnknownDim)
      throw Error(fmt::format(
          "attention: second-order gradients of causal attention in a trace need both lengths "
          "known (q {}, k {})",
          q.shape().to_string(), k.shape().to_string()));
    Tensor rows = reshape(arange(0, double(s.tq), 1, DType::i64), {s.tq, 1});
    Tensor cols = reshape(arange(0, double(s.tv), 1, DType::i64), {1, s.tv});
    Tensor keep = less_equal(cols, rows);
    mask = mask.defined() ? logical_and(mask, keep) : keep;
  }
  Tensor qs = q * scale;
  Tensor scores = matmul(qs, k, false, true);
  if (mask.defined()) scores = where(mask, scores, scalar(-1e9, dt));
  Tensor p = softmax(scores, -1);
  Tensor dp = matmul(dout, v, false, true);
  Tensor ds = p * (dp - sum(p * dp, {-1}, true));
  if (mask.defined()) ds = where(mask, ds, scalar(0, dt));
  return {matmul(ds, k) * scale, matmul(ds, qs, true, false), matmul(p, dout, true, false)};
}

Grads attention_grad_grad(const GradContext& c) {
  const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2], &dout = c.inputs[3];
  const Tensor mask = c.inputs.size() > 4 ? c.inputs[4] : Tensor();
  const std::vector<Tensor> upstream = unpack(c.grad, q, k, v);
  GradientTape tape;
  const std::vector<Tensor> sources{q, k, v, dout};
  tape.watch(sources);
  const std::vector<Tensor> g =
      composed_gradient(q, k, v, dout, mask, c.attrs.get_double("scale", "attention_grad"),
                        c.attrs.get_bool("causal", "attention_grad"));
  Tensor total = sum(g[0] * upstream[0]) + sum(g[1] * upstream[1]) + sum(g[2] * upstream[2]);
  std::vector<Tensor> r = tape.gradient(total, sources, UnconnectedGradients::kZero);
  Grads out(c.inputs.size());
  for (size_t i = 0; i < 4; ++i)
    if (c.needs_grad(i)) out[i] = r[i];
  return out;
}

}  // namespace

void register_attention_gradients(GradTable& t) {
  t[size_t(OpKind::Attention)] = attention_grad;
  t[size_t(OpKind::AttentionGrad)] = attention_grad_grad;
}

}  // namespace kiln::detail
