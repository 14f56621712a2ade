// Shape/dtype rules of the fused attention ops (attention, attention_grad).
//
// attention(q, k, v[, mask]) {scale, causal}: q [..., Tq, d], k [..., Tv, d], v [..., Tv, dv]
// with the same leading (batch) dimensions, float32 or float64 alike; mask bool, broadcastable
// (numpy, aligned from the right, rank at most q's) to [..., Tq, Tv]. Output [..., Tq, dv].
//
// attention_grad(q, k, v, dout[, mask]) {scale, causal}: dout [..., Tq, dv]. Output
// [..., Tq + 2 Tv, max(d, dv)]: the three gradients in one tensor (op nodes have one output):
// rows [0, Tq) hold dq (columns [0, d)), row Tq + 2j holds dk_j (columns [0, d)) and row
// Tq + 2j + 1 holds dv_j (columns [0, dv)); other columns are zero. Interleaving dk and dv
// lets a trace that knows only one of Tq and Tv cut the three apart with slices
// (frontend/grad_attention.cc).
#include <fmt/format.h>

#include <cmath>

#include "kiln/ir/shape_rules.h"

namespace kiln::rules {
namespace {

bool same_dim(int64_t a, int64_t b) { return a == b || a == kUnknownDim || b == kUnknownDim; }
// The known one of two dimensions that agree (same_dim).
int64_t merged_dim(int64_t a, int64_t b) { return a == kUnknownDim ? b : a; }

const char* const kNames[] = {"q", "k", "v", "dout"};

// Checks q, k, v (and dout for the gradient: `operands` is 3 or 4), the optional mask (the
// input after them) and the attributes; returns the output's leading dimensions, Tq, Tv, d, dv.
struct AttentionDims {
  Shape lead;
  int64_t tq, tv, d, dv;
};

AttentionDims check_attention(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs,
                              size_t operands) {
  const char* name = op.name;
  const char* usage = operands == 3 ? "attention(q, k, v) or attention(q, k, v, mask)"
                                    : "attention_grad(q, k, v, dout) or "
                                      "attention_grad(q, k, v, dout, mask)";
  if (in.size() != operands && in.size() != operands + 1)
    throw Error(fmt::format("{}: expected {} or {} inputs ({}), got {}", name, operands,
                            operands + 1, usage, in.size()));
  std::string shapes;
  for (size_t i = 0; i < in.size(); ++i)
    shapes +=
        fmt::format("{}{} {}", i ? ", " : "", i < operands ? kNames[i] : "mask", in[i].to_string());
  for (size_t i = 0; i < operands; ++i) {
    if (!is_floating(in[i].dtype))
      throw Error(fmt::format("{}: {} has dtype {}, but {} needs float32 or float64 ({})", name,
                              kNames[i], dtype_name(in[i].dtype), name, shapes));
    if (in[i].dtype != in[0].dtype)
      throw Error(fmt::format("{}: q, k and v must have the same dtype, got {}; use kiln::cast",
                              name, shapes));
  }
  const Shape &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  for (size_t i = 0; i < operands; ++i)
    if (in[i].shape.rank() < 2)
      throw Error(fmt::format(
          "{}: {} must have rank >= 2 ([..., length, features]), got {}; add a batch or length "
          "axis with expand_dims",
          name, kNames[i], shapes));
  if (k.rank() != q.rank() || v.rank() != q.rank())
    throw Error(fmt::format(
        "{}: q, k and v must have the same rank (the same leading batch axes, then [length, "
        "features]), got {}",
        name, shapes));
  const int r = q.rank();
  Shape lead;
  for (int i = 0; i < r - 2; ++i) {
    if (!same_dim(q[i], k[i]) || !same_dim(q[i], v[i]) || !same_dim(k[i], v[i]))
      throw Error(fmt::format(
          "{}: q, k and v must have the same leading (batch) dimensions, got {} (axis {} "
          "differs; attention does not broadcast them)",
          name, shapes, i));
    lead.push_back(merged_dim(merged_dim(q[i], k[i]), v[i]));
  }
  if (!same_dim(q[r - 1], k[r - 1]))
    throw Error(fmt::format("{}: q and k must have the same number of features (last axis), got {}",
                            name, shapes));
  if (!same_dim(k[r - 2], v[r - 2]))
    throw Error(
        fmt::format("{}: k and v must have the same length (axis -2: one value per key), got {}",
                    name, shapes));
  AttentionDims dims{lead, q[r - 2], merged_dim(k[r - 2], v[r - 2]), merged_dim(q[r - 1], k[r - 1]),
                     v[r - 1]};
  if (operands == 4) {
    Shape want = lead;
    want.push_back(dims.tq);
    want.push_back(dims.dv);
    const Shape& g = in[3].shape;
    bool ok = g.rank() == want.rank();
    for (int i = 0; ok && i < want.rank(); ++i) ok = same_dim(g[i], want[i]);
    if (!ok)
      throw Error(fmt::format("{}: dout must have the output's shape [..., Tq, dv] = {}, got {}",
                              name, want.to_string(), shapes));
  }
  if (in.size() == operands + 1) {
    const TensorType& m = in[operands];
    Shape target = lead;
    target.push_back(dims.tq);
    target.push_back(dims.tv);
    if (m.dtype != DType::b8)
      throw Error(fmt::format(
          "{}: the mask must be bool (true: the query attends to the key), got dtype {} ({}); "
          "compare it with zero (not_equal) first",
          name, dtype_name(m.dtype), shapes));
    bool ok = m.shape.rank() <= target.rank();
    for (int i = 1; ok && i <= m.shape.rank(); ++i) {
      int64_t got = m.shape[m.shape.rank() - i], want = target[target.rank() - i];
      ok = got == 1 || same_dim(got, want);
    }
    if (!ok)
      throw Error(fmt::format(
          "{}: the mask must broadcast to [..., Tq, Tv] = {} (each axis of that size or 1, "
          "aligned from the right), got {}",
          name, target.to_string(), shapes));
  }
  double scale = attrs.get_double("scale", name);
  if (!std::isfinite(scale))
    throw Error(fmt::format("{}: scale must be finite, got {}", name, scale));
  (void)attrs.get_bool("causal", name);
  return dims;
}

}  // namespace

TensorType rule_attention(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  AttentionDims d = check_attention(op, in, attrs, 3);
  Shape out = d.lead;
  out.push_back(d.tq);
  out.push_back(d.dv);
  return {in[0].dtype, out};
}

TensorType rule_attention_grad(const OpInfo& op, std::span<const TensorType> in,
                               const Attrs& attrs) {
  AttentionDims d = check_attention(op, in, attrs, 4);
  Shape out = d.lead;
  const bool known = d.tq != kUnknownDim && d.tv != kUnknownDim;
  out.push_back(known ? d.tq + 2 * d.tv : kUnknownDim);
  out.push_back(d.d == kUnknownDim || d.dv == kUnknownDim ? kUnknownDim : std::max(d.d, d.dv));
  return {in[0].dtype, out};
}

}  // namespace kiln::rules
