// The fused attention ops (attention, attention_grad; runtime/kernels/attention.cc) against a
// naive long double reference (materialised softmax), with error bounds from the computation:
// the spread of the same values computed by the unfused ops with every intermediate value
// moved by the rounding model (tests/support/rounding_model.h, attention_decomposed.h), in the
// precision under test. Then masks (explicit, broadcast, causal, rows with every key masked),
// Tq != Tv and sizes that are not multiples of the kernel's blocks; gradients against finite
// differences (tests/autodiff/op_gradients_nn_test.cc), second order, and against the unfused
// ops; 1 and 2 threads
// bitwise; traces with unknown lengths; bad input.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/frontend/dispatch.h"
#include "kiln/kiln.h"
#include "kiln/runtime/kernels.h"
#include "tests/autodiff/gradcheck.h"
#include "tests/support/error_of.h"
#include "tests/support/rounding_model.h"

namespace kiln {
namespace {

using runtime::Array;
using test::error_of;
using ::testing::HasSubstr;

// One test problem: q [lead, Tq, d], k [lead, Tv, d], v [lead, Tv, dv], an optional mask of
// shape `mask_shape` (empty: none) whose elements come from `keep(index)`.
struct Case {
  std::string name;
  Shape lead;
  int64_t tq, tv, d, dv;
  bool causal = false;
  Shape mask_shape{};
  bool has_mask = false;
  // Which mask elements are true, by flat index and the mask's shape.
  std::function<bool(int64_t flat)> keep{};
};

Shape with(Shape s, int64_t a, int64_t b) {
  s.push_back(a);
  s.push_back(b);
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"no mask, Tq != Tv, dv < d", {2, 3}, 5, 7, 4, 3});
  // Random mask; rows 0 and 4 of every entry have no kept key (they attend uniformly).
  Case m{"mask [2, 3, 5, 7] with fully masked rows, dv > d", {2, 3}, 5, 7, 4, 6};
  m.has_mask = true;
  m.mask_shape = Shape{2, 3, 5, 7};
  m.keep = [](int64_t f) {
    int64_t row = (f / 7) % 5;
    return row != 0 && row != 4 && (f * 2654435761u) % 5 < 3;
  };
  c.push_back(m);
  Case causal{"causal, rank 2", {}, 9, 9, 8, 8, true};
  c.push_back(causal);
  // Several query and key blocks, none full; a key padding mask broadcast over the queries.
  Case pad{"key padding [2, 1, 300], Tq 130, Tv 300", {2}, 130, 300, 16, 8};
  pad.has_mask = true;
  pad.mask_shape = Shape{2, 1, 300};
  pad.keep = [](int64_t f) { return f < 300 ? f < 271 : f - 300 < 140; };
  c.push_back(pad);
  // Causal with a query padding mask broadcast over the keys: the padded rows have no kept key,
  // so they attend to all 200 keys, also those after them that the causal kernel skips.
  Case qpad{"causal and query padding [1, 200, 1]", {1}, 200, 200, 8, 8, true};
  qpad.has_mask = true;
  qpad.mask_shape = Shape{1, 200, 1};
  qpad.keep = [](int64_t f) { return f != 150 && f < 190; };
  c.push_back(qpad);
  // Tq > Tv with causality: rows from Tv on see every key.
  Case tall{"causal, Tq 70 > Tv 33, mask [70, 33]", {3}, 70, 33, 5, 7, true};
  tall.has_mask = true;
  tall.mask_shape = Shape{70, 33};
  tall.keep = [](int64_t f) { return (f * 40503u) % 7 != 0; };
  c.push_back(tall);
  c.push_back({"no keys", {2}, 3, 0, 4, 2});
  c.push_back({"no queries", {2}, 0, 3, 4, 2, true});
  return c;
}

// Values uniform in [-1.5, 1.5] (rounded to float32: the same inputs for both precisions).
Array random_array(DType t, const Shape& s, uint64_t seed) {
  Array a = Array::empty(TensorType{t, s});
  std::vector<double> v = gradcheck::uniform_values(s.num_elements(), seed, -1.5, 1.5);
  for (int64_t i = 0; i < a.size(); ++i) {
    if (t == DType::f32)
      a.data<float>()[i] = float(v[size_t(i)]);
    else
      a.data<double>()[i] = double(float(v[size_t(i)]));
  }
  return a;
}

struct Problem {
  Array q, k, v, dout, mask;
  Attrs attrs;
  std::vector<Array> forward_inputs() const {
    std::vector<Array> in{q, k, v};
    if (mask.storage) in.push_back(mask);
    return in;
  }
  std::vector<Array> grad_inputs() const {
    std::vector<Array> in{q, k, v, dout};
    if (mask.storage) in.push_back(mask);
    return in;
  }
};

Problem make(const Case& c, DType t) {
  Problem p;
  p.q = random_array(t, with(c.lead, c.tq, c.d), 1);
  p.k = random_array(t, with(c.lead, c.tv, c.d), 2);
  p.v = random_array(t, with(c.lead, c.tv, c.dv), 3);
  p.dout = random_array(t, with(c.lead, c.tq, c.dv), 4);
  if (c.has_mask) {
    p.mask = Array::empty(TensorType{DType::b8, c.mask_shape});
    for (int64_t i = 0; i < p.mask.size(); ++i) p.mask.data<bool>()[i] = c.keep(i);
  }
  p.attrs = Attrs{{"scale", c.d > 0 ? 1.0 / std::sqrt(double(c.d)) : 1.0}, {"causal", c.causal}};
  return p;
}

std::vector<double> doubles(const Array& a) { return testing::as_doubles(a); }

Array widened(const Array& a) {
  if (a.dtype != DType::f32) return a;
  Array w = Array::empty(TensorType{DType::f64, a.shape});
  for (int64_t i = 0; i < a.size(); ++i) w.data<double>()[i] = double(a.data<float>()[i]);
  return w;
}

// ---- the naive reference, in long double

// The mask element of entry e, query i, key j (mask broadcast to [lead, Tq, Tv]).
bool kept(const Case& c, const Problem& p, int64_t e, int64_t i, int64_t j) {
  if (c.causal && j > i) return false;
  if (!p.mask.storage) return true;
  const Shape& ms = p.mask.shape;
  const int r = c.lead.rank() + 2;
  Shape full = with(c.lead, c.tq, c.tv);
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  idx[size_t(r - 1)] = j;
  idx[size_t(r - 2)] = i;
  for (int a = r - 3; a >= 0; --a) {
    idx[size_t(a)] = e % full[a];
    e /= full[a];
  }
  int64_t flat = 0;
  for (int a = 0; a < ms.rank(); ++a) {
    int fa = a + (r - ms.rank());
    flat = flat * ms[a] + (ms[a] == 1 ? 0 : idx[size_t(fa)]);
  }
  return p.mask.data<bool>()[flat];
}

struct Reference {
  std::vector<double> out;     // [lead, Tq, dv]
  std::vector<double> packed;  // attention_grad's layout
};

Reference reference(const Case& c, const Problem& p) {
  using L = long double;
  const std::vector<double> q = doubles(p.q), k = doubles(p.k), v = doubles(p.v),
                            dout = doubles(p.dout);
  const int64_t entries = c.lead.num_elements(), width = std::max(c.d, c.dv);
  const L scale = L(p.attrs.get_double("scale", "test"));
  Reference r;
  r.out.assign(size_t(entries * c.tq * c.dv), 0);
  r.packed.assign(size_t(entries * (c.tq + 2 * c.tv) * width), 0);
  for (int64_t e = 0; e < entries; ++e) {
    const double* qe = q.data() + e * c.tq * c.d;
    const double* ke = k.data() + e * c.tv * c.d;
    const double* ve = v.data() + e * c.tv * c.dv;
    const double* ge = dout.data() + e * c.tq * c.dv;
    double* pe = r.packed.data() + e * (c.tq + 2 * c.tv) * width;
    std::vector<L> dk(size_t(c.tv * c.d), 0), dv(size_t(c.tv * c.dv), 0);
    for (int64_t i = 0; i < c.tq; ++i) {
      std::vector<L> s(size_t(c.tv)), pr(size_t(c.tv)), dp(size_t(c.tv));
      L m = -INFINITY;
      for (int64_t j = 0; j < c.tv; ++j) {
        L acc = 0;
        for (int64_t t = 0; t < c.d; ++t) acc += L(qe[i * c.d + t]) * scale * L(ke[j * c.d + t]);
        s[size_t(j)] = kept(c, p, e, i, j) ? acc : L(-1e9);
        m = std::max(m, s[size_t(j)]);
      }
      L sum = 0;
      for (int64_t j = 0; j < c.tv; ++j) sum += pr[size_t(j)] = std::exp(s[size_t(j)] - m);
      for (int64_t j = 0; j < c.tv; ++j) pr[size_t(j)] /= sum;
      for (int64_t col = 0; col < c.dv; ++col) {
        L acc = 0;
        for (int64_t j = 0; j < c.tv; ++j) acc += pr[size_t(j)] * L(ve[j * c.dv + col]);
        r.out[size_t((e * c.tq + i) * c.dv + col)] = double(acc);
      }
      // backward
      L rowdot = 0;
      for (int64_t j = 0; j < c.tv; ++j) {
        L acc = 0;
        for (int64_t col = 0; col < c.dv; ++col)
          acc += L(ge[i * c.dv + col]) * L(ve[j * c.dv + col]);
        dp[size_t(j)] = acc;
        rowdot += pr[size_t(j)] * acc;
        for (int64_t col = 0; col < c.dv; ++col)
          dv[size_t(j * c.dv + col)] += pr[size_t(j)] * L(ge[i * c.dv + col]);
      }
      for (int64_t t = 0; t < c.d; ++t) {
        L acc = 0;
        for (int64_t j = 0; j < c.tv; ++j) {
          L ds = kept(c, p, e, i, j) ? pr[size_t(j)] * (dp[size_t(j)] - rowdot) : 0;
          acc += ds * L(ke[j * c.d + t]);
          dk[size_t(j * c.d + t)] += ds * L(qe[i * c.d + t]) * scale;
        }
        pe[i * width + t] = double(acc * scale);
      }
    }
    for (int64_t j = 0; j < c.tv; ++j) {
      for (int64_t t = 0; t < c.d; ++t)
        pe[(c.tq + 2 * j) * width + t] = double(dk[size_t(j * c.d + t)]);
      for (int64_t col = 0; col < c.dv; ++col)
        pe[(c.tq + 2 * j + 1) * width + col] = double(dv[size_t(j * c.dv + col)]);
    }
  }
  return r;
}

// ---- error bounds

// The error a correct implementation of `op` in precision `t` may make on each result
// element, at the exact values `exact`: 8 times the rms spread of rounding-model samples (the
// unfused ops, every intermediate moved by up to its rounding error) around `exact`, plus two
// roundings of the value and the smallest normal number (docs/testing.md).
std::vector<double> bounds(OpKind op, const Attrs& attrs, const std::vector<Array>& inputs,
                           const std::vector<double>& exact, DType t, int samples = 12) {
  std::vector<Array> wide;
  for (const Array& a : inputs) wide.push_back(widened(a));
  std::vector<double> sq(exact.size(), 0);
  for (int s = 0; s < samples; ++s) {
    testing::RoundingModel model(1000 + uint64_t(s));
    Array out = runtime::run_op(op, wide, attrs);
    model(op, attrs, wide, out, t);
    std::vector<double> y = doubles(out);
    for (size_t i = 0; i < exact.size(); ++i) sq[i] += (y[i] - exact[i]) * (y[i] - exact[i]);
  }
  const double u = t == DType::f32 ? 0x1p-24 : 0x1p-53;
  const double tiny = t == DType::f32 ? double(std::numeric_limits<float>::min())
                                      : std::numeric_limits<double>::min();
  std::vector<double> b(exact.size());
  for (size_t i = 0; i < exact.size(); ++i)
    b[i] = 8 * std::sqrt(sq[i] / samples) + 2 * u * std::abs(exact[i]) + tiny;
  return b;
}

::testing::AssertionResult within(const std::vector<double>& got, const std::vector<double>& want,
                                  const std::vector<double>& bound) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " elements, expected " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= bound[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i] << " (error "
             << std::abs(got[i] - want[i]) << ", bound " << bound[i] << ")";
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------- kernels

TEST(AttentionOp, ForwardMatchesTheNaiveReference) {
  for (const Case& c : cases())
    for (DType t : {DType::f32, DType::f64}) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, dtype_name(t)));
      Problem p = make(c, t);
      Reference want = reference(c, p);
      Array got = runtime::run_op(OpKind::Attention, p.forward_inputs(), p.attrs);
      EXPECT_EQ(got.shape, with(c.lead, c.tq, c.dv));
      EXPECT_EQ(got.dtype, t);
      EXPECT_TRUE(within(doubles(got), want.out,
                         bounds(OpKind::Attention, p.attrs, p.forward_inputs(), want.out, t)));
    }
}

TEST(AttentionOp, GradientKernelMatchesTheNaiveReference) {
  for (const Case& c : cases())
    for (DType t : {DType::f32, DType::f64}) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, dtype_name(t)));
      Problem p = make(c, t);
      Reference want = reference(c, p);
      Array got = runtime::run_op(OpKind::AttentionGrad, p.grad_inputs(), p.attrs);
      EXPECT_EQ(got.shape, with(c.lead, c.tq + 2 * c.tv, std::max(c.d, c.dv)));
      EXPECT_TRUE(within(doubles(got), want.packed,
                         bounds(OpKind::AttentionGrad, p.attrs, p.grad_inputs(), want.packed, t)));
    }
}

// A row with no kept key attends to every key with weight 1 / Tv (its scores are all -1e9),
// also under causality; its query gets no gradient (`where` passes none to masked scores).
TEST(AttentionOp, RowsWithEveryKeyMaskedAttendUniformly) {
  Case c = cases()[4];  // causal, row 150 and rows >= 190 masked
  Problem p = make(c, DType::f64);
  Array out = runtime::run_op(OpKind::Attention, p.forward_inputs(), p.attrs);
  Array g = runtime::run_op(OpKind::AttentionGrad, p.grad_inputs(), p.attrs);
  std::vector<double> v = doubles(p.v);
  for (int64_t row : {int64_t(150), int64_t(195)})
    for (int64_t col = 0; col < c.dv; ++col) {
      double mean = 0, sum_abs = 0;
      for (int64_t j = 0; j < c.tv; ++j) {
        mean += v[size_t(j * c.dv + col)] / double(c.tv);
        sum_abs += std::abs(v[size_t(j * c.dv + col)]);
      }
      // Tv terms summed and divided: (Tv + 2) roundings of at most sum|v| / Tv... each.
      EXPECT_NEAR(out.data<double>()[row * c.dv + col], mean, double(c.tv + 4) * 0x1p-53 * sum_abs)
          << "row " << row;
      EXPECT_EQ(g.data<double>()[row * c.d + col], 0.0) << "dq row " << row;
    }
}

TEST(AttentionOp, OneAndTwoThreadsAreBitwiseIdentical) {
  // Many entries; and one entry of many query blocks (its gradient splits them into groups).
  std::vector<Case> cs = cases();
  Case one{"one entry, 5 query blocks", {1}, 300, 260, 8, 8, true};
  cs.push_back(one);
  const int saved = num_threads();
  for (const Case& c : cs) {
    SCOPED_TRACE(c.name);
    Problem p = make(c, DType::f32);
    std::vector<Array> r[2];
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      r[threads - 1] = {runtime::run_op(OpKind::Attention, p.forward_inputs(), p.attrs),
                        runtime::run_op(OpKind::AttentionGrad, p.grad_inputs(), p.attrs)};
    }
    for (size_t i = 0; i < 2; ++i)
      EXPECT_EQ(std::memcmp(r[0][i].raw(), r[1][i].raw(), size_t(r[0][i].size()) * 4), 0)
          << (i ? "attention_grad" : "attention");
  }
  set_num_threads(saved);
}

// ---------------------------------------------------------------- the op and its gradient

Tensor as_tensor(const Array& a) { return Tensor(a); }

TEST(AttentionOp, DefaultScaleAndTheUnfusedOps) {
  Case c = cases()[1];
  Problem p = make(c, DType::f64);
  Tensor q = as_tensor(p.q), k = as_tensor(p.k), v = as_tensor(p.v), m = as_tensor(p.mask);
  Tensor fused = attention(q, k, v, m);  // scale 1 / sqrt(d): as make() sets it
  Reference want = reference(c, p);
  EXPECT_TRUE(within(fused.to_vector<double>(), want.out,
                     bounds(OpKind::Attention, p.attrs, p.forward_inputs(), want.out, DType::f64)));
  // The unfused ops (MultiHeadAttention's former path) agree within the same bounds.
  Tensor unfused = matmul(softmax(where(m, matmul(q * (1 / std::sqrt(double(c.d))), k, false, true),
                                        scalar(-1e9, DType::f64))),
                          v);
  EXPECT_TRUE(within(unfused.to_vector<double>(), want.out,
                     bounds(OpKind::Attention, p.attrs, p.forward_inputs(), want.out, DType::f64)));
}

// The fused gradient equals the unfused ops' gradient (tape) within the bounds of the
// unfused computation in float32, also where rows have every key masked.
TEST(AttentionOp, GradientsMatchTheUnfusedOps) {
  for (size_t ci : {size_t(1), size_t(2), size_t(5)}) {
    const Case c = cases()[ci];
    SCOPED_TRACE(c.name);
    Problem p = make(c, DType::f32);
    Tensor q = as_tensor(p.q), k = as_tensor(p.k), v = as_tensor(p.v), dout = as_tensor(p.dout);
    Tensor mask = p.mask.storage ? as_tensor(p.mask) : Tensor();
    const double scale = p.attrs.get_double("scale", "test");
    auto grads = [&](bool fused) {
      GradientTape tape;
      tape.watch(q);
      tape.watch(k);
      tape.watch(v);
      Tensor out;
      if (fused) {
        out = attention(q, k, v, mask, scale, c.causal);
      } else {
        Tensor m = mask;
        if (c.causal) {
          Tensor rows = reshape(arange(0, double(c.tq), 1, DType::i64), {c.tq, 1});
          Tensor cols = reshape(arange(0, double(c.tv), 1, DType::i64), {1, c.tv});
          Tensor causal = less_equal(cols, rows);
          m = m.defined() ? logical_and(m, causal) : causal;
        }
        Tensor s = matmul(q * scale, k, false, true);
        if (m.defined()) s = where(m, s, scalar(-1e9, DType::f32));
        out = matmul(softmax(s), v);
      }
      return tape.gradient(sum(out * dout), {q, k, v});
    };
    std::vector<Tensor> fused = grads(true), unfused = grads(false);
    Reference want = reference(c, p);
    std::vector<double> b =
        bounds(OpKind::AttentionGrad, p.attrs, p.grad_inputs(), want.packed, DType::f32);
    // The packed bound of each gradient element (rows [0, Tq) dq, Tq + 2j dk, Tq + 2j + 1 dv).
    const int64_t width = std::max(c.d, c.dv), entries = c.lead.num_elements();
    for (int which = 0; which < 3; ++which) {
      std::vector<double> w, bw;
      for (int64_t e = 0; e < entries; ++e) {
        const int64_t rows = which == 0 ? c.tq : c.tv, cols = which == 2 ? c.dv : c.d;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t col = 0; col < cols; ++col) {
            int64_t row = which == 0 ? i : c.tq + 2 * i + (which == 2);
            size_t at = size_t((e * (c.tq + 2 * c.tv) + row) * width + col);
            w.push_back(want.packed[at]);
            bw.push_back(b[at]);
          }
      }
      SCOPED_TRACE(fmt::format("gradient {}", "qkv"[which]));
      EXPECT_TRUE(within(fused[size_t(which)].to_vector<double>(), w, bw)) << "fused";
      EXPECT_TRUE(within(unfused[size_t(which)].to_vector<double>(), w, bw)) << "unfused";
    }
  }
}

// Second order: the gradient of attention's gradient (attention_grad's rule differentiates the
// composed ops) against finite differences of the first-order gradient, with a mask and causal.
TEST(AttentionOp, SecondOrderGradientsMatchFiniteDifferences) {
  Tensor q = gradcheck::uniform({2, 3, 2}, 11), k = gradcheck::uniform({2, 4, 2}, 12),
         v = gradcheck::uniform({2, 4, 3}, 13);
  Tensor mask =
      tensor(std::vector<bool>{true, true, false, true, true, true, true, false}, Shape{2, 1, 4});
  for (bool causal : {false, true}) {
    SCOPED_TRACE(fmt::format("causal {}", causal));
    auto first = [&](const std::vector<Tensor>& x) {
      GradientTape tape;
      tape.watch(x);
      Tensor y = attention(x[0], x[1], x[2], mask, 0.8, causal);
      std::vector<Tensor> g = tape.gradient(sum(y * y), x);
      return concat({reshape(g[0], {-1}), reshape(g[1], {-1}), reshape(g[2], {-1})});
    };
    EXPECT_GRADIENTS(first, {q, k, v});
  }
}

// Traced with unknown lengths: the gradient is cut out of attention_grad's packed result from
// the end when only Tv is known, and needs one of the lengths.
TEST(AttentionOp, TracedGradientsWithUnknownLengths) {
  Tensor q = gradcheck::uniform({2, 5, 3}, 7), k = gradcheck::uniform({2, 6, 3}, 8),
         v = gradcheck::uniform({2, 6, 4}, 9);
  auto body = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    GradientTape tape;
    tape.watch(a);
    tape.watch(b);
    tape.watch(c);
    Tensor y = attention(a, b, c, {}, 0.5, true);
    std::vector<Tensor> out{y};
    for (const Tensor& g : tape.gradient(sum(y * y), {a, b, c})) out.push_back(g);
    return out;
  };
  std::vector<Tensor> eager = body(q, k, v);
  auto spec = [](Shape s) { return TensorSpec{s, DType::f64}; };
  auto unknown_q = function(body, {.name = "attention_any_tq",
                                   .input_signature = std::vector<TensorSpec>{
                                       spec({2, -1, 3}), spec({2, 6, 3}), spec({2, 6, 4})}});
  auto unknown_k = function(body, {.name = "attention_any_tv",
                                   .input_signature = std::vector<TensorSpec>{
                                       spec({-1, 5, 3}), spec({-1, -1, 3}), spec({-1, -1, 4})}});
  for (auto* f : {&unknown_q, &unknown_k})
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
      SCOPED_TRACE(fmt::format("{} {}", f->name(), execution_mode_name(mode)));
      std::vector<Tensor> traced = f->concrete(q, k, v).run({q, k, v}, mode);
      ASSERT_EQ(traced.size(), eager.size());
      // The same kernels on the same inputs (the slices are exact): bitwise.
      for (size_t i = 0; i < eager.size(); ++i)
        EXPECT_EQ(traced[i].to_vector<double>(), eager[i].to_vector<double>()) << "output " << i;
    }
  auto unknown_both = function(body, {.name = "attention_any_length",
                                      .input_signature = std::vector<TensorSpec>{
                                          spec({2, -1, 3}), spec({2, -1, 3}), spec({2, -1, 4})}});
  EXPECT_THAT(error_of([&] { unknown_both(q, k, v); }),
              HasSubstr("attention: its gradient in a trace needs the query length or the key "
                        "length known"));
}

TEST(AttentionOp, BadInput) {
  auto f = [](Shape s) { return zeros(s, DType::f32); };
  Tensor q = f({2, 5, 4}), k = f({2, 6, 4}), v = f({2, 6, 3});
  EXPECT_THAT(error_of([&] {
                attention(q, f({2, 6, 5}), v);
              }),
              HasSubstr("attention: q and k must have the same number of features (last axis), "
                        "got q f32[2,5,4], k f32[2,6,5], v f32[2,6,3]"));
  EXPECT_THAT(error_of([&] {
                attention(q, k, f({2, 7, 3}));
              }),
              HasSubstr("k and v must have the same length"));
  EXPECT_THAT(error_of([&] {
                attention(q, f({3, 6, 4}), f({3, 6, 3}));
              }),
              HasSubstr("must have the same leading (batch) dimensions"));
  EXPECT_THAT(error_of([&] {
                attention(q, f({6, 4}), f({6, 3}));
              }),
              HasSubstr("q, k and v must have the same rank"));
  EXPECT_THAT(error_of([&] { attention(f({4}), f({4}), f({3})); }),
              HasSubstr("must have rank >= 2"));
  EXPECT_THAT(error_of([&] {
                attention(q, k, zeros({2, 6, 3}, DType::f64));
              }),
              HasSubstr("q, k and v must have the same dtype"));
  EXPECT_THAT(error_of([&] {
                attention(zeros({2, 5, 4}, DType::i32), k, v);
              }),
              HasSubstr("attention: q has dtype int32, but attention needs float32 or float64"));
  EXPECT_THAT(error_of([&] {
                attention(q, k, v, f({2, 5, 6}));
              }),
              HasSubstr("attention: the mask must be bool"));
  EXPECT_THAT(error_of([&] {
                attention(q, k, v, zeros({2, 5, 5}, DType::b8));
              }),
              HasSubstr("the mask must broadcast to [..., Tq, Tv] = (2, 5, 6)"));
  EXPECT_THAT(error_of([&] {
                attention(q, k, v, zeros({3, 2, 5, 6}, DType::b8));
              }),
              HasSubstr("the mask must broadcast"));
  EXPECT_THAT(error_of([&] { attention(q, k, v, {}, std::nan("")); }),
              HasSubstr("attention: scale must be finite"));
  EXPECT_THAT(error_of([&] {
                attention(f({2, 5, 0}), f({2, 6, 0}), v);
              }),
              HasSubstr("pass the scale explicitly"));
  EXPECT_THAT(error_of([&] {
                detail::apply(OpKind::Attention, {q, k}, Attrs{{"scale", 1.0}, {"causal", false}});
              }),
              HasSubstr("attention: expected 3 or 4 inputs (attention(q, k, v) or "
                        "attention(q, k, v, mask)), got 2"));
  EXPECT_THAT(error_of([&] {
                detail::apply(OpKind::AttentionGrad, {q, k, v, f({2, 5, 4})},
                              Attrs{{"scale", 1.0}, {"causal", false}});
              }),
              HasSubstr("attention_grad: dout must have the output's shape [..., Tq, dv] = "
                        "(2, 5, 3)"));
  EXPECT_THAT(error_of([&] {
                detail::apply(OpKind::Attention, {q, k, v}, Attrs{{"scale", 1.0}});
              }),
              HasSubstr("attention: missing attribute \"causal\""));
}

}  // namespace
}  // namespace kiln
