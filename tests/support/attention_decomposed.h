// Test helper: the fused attention ops (attention, attention_grad) computed by the unfused eager
// kernels, as MultiHeadAttention composed them before the fused op existed:
//   s = (q * scale) k^T; s = where(mask, s, -1e9); p = softmax(s); out = p v
// and for the gradient, with dout the output's gradient (kiln's gradient rules):
//   dv = p^T dout; dp = dout v^T; ds = p (dp - sum(p dp)); ds = where(mask, ds, 0);
//   dq = (ds k) * scale; dk = ds^T (q * scale)
// packed as ir/shape_rules_attention.cc describes. `after(op, attrs, inputs, out)` is called
// after every op, so the rounding model (rounding_model.h) can perturb each intermediate value:
// that is how it models what a correct float implementation of the fused ops may be off by.
#pragma once

#include <algorithm>
#include <span>
#include <type_traits>
#include <vector>

#include "kiln/ir/op_table.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/kernels.h"

namespace kiln::testing {

template <typename Hook>
runtime::Array attention_decomposed(OpKind op, const Attrs& attrs,
                                    std::span<const runtime::Array> in, Hook&& after) {
  using runtime::Array;
  auto run = [&](OpKind o, std::vector<Array> args, const Attrs& a = {}) {
    Array out = runtime::run_op(o, args, a);
    after(o, a, std::span<const Array>(args), out);
    return out;
  };
  auto matmul = [&](const Array& a, const Array& b, bool ta, bool tb) {
    return run(OpKind::MatMul, {a, b}, Attrs{{"transpose_a", ta}, {"transpose_b", tb}});
  };
  auto constant = [](DType t, double x) {
    Array c = Array::empty(TensorType{t, Shape{}});
    if (t == DType::f32)
      c.data<float>()[0] = float(x);
    else
      c.data<double>()[0] = x;
    return c;
  };
  const bool grad = op == OpKind::AttentionGrad;
  const size_t operands = grad ? 4 : 3;
  const Array &q = in[0], &k = in[1], &v = in[2];
  const DType t = q.dtype;
  const int r = q.shape.rank();
  const int64_t tq = q.shape[r - 2], tv = k.shape[r - 2];
  const char* name = op_name(op);
  const Array scale = constant(t, attrs.get_double("scale", name));

  // The combined bool mask: the input mask and the causal one ([Tq, Tv], j <= i).
  Array mask;
  if (in.size() > operands) mask = in[operands];
  if (attrs.get_bool("causal", name)) {
    Array causal = Array::empty(TensorType{DType::b8, Shape{tq, tv}});
    for (int64_t i = 0; i < tq; ++i)
      for (int64_t j = 0; j < tv; ++j) causal.data<bool>()[i * tv + j] = j <= i;
    mask = mask.storage ? runtime::run_op(OpKind::LogicalAnd, std::vector<Array>{mask, causal}, {})
                        : causal;
  }
  const Array qs = run(OpKind::Mul, {q, scale});
  Array s = matmul(qs, k, false, true);
  if (mask.storage) s = run(OpKind::Select, {mask, s, constant(t, -1e9)});
  const Array p = run(OpKind::Softmax, {s}, Attrs{{"axis", int64_t(-1)}});
  if (!grad) return matmul(p, v, false, false);

  const Array& dout = in[3];
  const Array dv = matmul(p, dout, true, false);
  const Array dp = matmul(dout, v, false, true);
  const Array pdp = run(OpKind::Mul, {dp, p});
  const Array rows =
      run(OpKind::Sum, {pdp}, Attrs{{"axes", std::vector<int64_t>{-1}}, {"keepdims", true}});
  Array ds = run(OpKind::Mul, {p, run(OpKind::Sub, {dp, rows})});
  if (mask.storage) ds = run(OpKind::Select, {mask, ds, constant(t, 0)});
  const Array dq = run(OpKind::Mul, {matmul(ds, k, false, false), scale});
  const Array dk = matmul(ds, qs, true, false);

  // Pack: rows [0, Tq) dq, row Tq + 2j dk_j, row Tq + 2j + 1 dv_j; other columns zero.
  const int64_t d = q.shape[r - 1], dvn = v.shape[r - 1], width = std::max(d, dvn);
  Shape packed;
  for (int i = 0; i < r - 2; ++i) packed.push_back(q.shape[i]);
  packed.push_back(tq + 2 * tv);
  packed.push_back(width);
  Array out = Array::empty(TensorType{t, packed});
  const int64_t entries = tq + 2 * tv == 0 ? 0 : out.size() / ((tq + 2 * tv) * width);
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T>) {
      T* o = out.data<T>();
      std::fill(o, o + out.size(), T(0));
      for (int64_t e = 0; e < entries; ++e) {
        T* oe = o + e * (tq + 2 * tv) * width;
        for (int64_t i = 0; i < tq; ++i)
          for (int64_t c = 0; c < d; ++c) oe[i * width + c] = dq.data<T>()[(e * tq + i) * d + c];
        for (int64_t j = 0; j < tv; ++j) {
          for (int64_t c = 0; c < d; ++c)
            oe[(tq + 2 * j) * width + c] = dk.data<T>()[(e * tv + j) * d + c];
          for (int64_t c = 0; c < dvn; ++c)
            oe[(tq + 2 * j + 1) * width + c] = dv.data<T>()[(e * tv + j) * dvn + c];
        }
      }
    }
  });
  return out;
}

}  // namespace kiln::testing
