// The rows of the op consistency suite (tests/codegen/op_consistency_test.cc): the cases
// (operand shapes, attributes) of each op codegen lowers and the row table (input ranges,
// special values, eager quirks and their reasons), and the rows of the ops codegen does not
// lower (kFallbackRows, tests/codegen/op_fallback_rows.h). Results are compared within error bounds
// derived from the computation (tests/support/error_bound.h), so rows carry no tolerances. Included
// by that test file and by the op row completeness test (tests/ops/op_row_completeness_test.cc).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/op_table.h"
#include "kiln/runtime/array.h"
#include "tests/codegen/op_fallback_rows.h"

namespace kiln {
namespace {

using runtime::Array;

constexpr DType f32 = DType::f32, f64 = DType::f64, i32 = DType::i32, i64 = DType::i64,
                u8 = DType::u8, b8 = DType::b8;
const std::vector<DType> kFloat = {f32, f64};
const std::vector<DType> kNumeric = {f32, f64, i32, i64, u8};
const std::vector<DType> kAny = {f32, f64, i32, i64, u8, b8};
constexpr int64_t kBig = 1000003;

// ---- cases: the operand shapes and attributes of one run

struct Case {
  std::vector<Shape> shapes;
  Attrs attrs;
};
using Cases = std::vector<Case>;

std::vector<int64_t> flat_sizes(bool big) {
  std::vector<int64_t> s = {1, 3, 17};
  if (big) s.push_back(kBig);
  return s;
}

Cases unary_cases(bool big, const Attrs& attrs = {}) {
  Cases c;
  for (int64_t n : flat_sizes(big)) c.push_back({{Shape{n}}, attrs});
  for (Shape s : {Shape{}, Shape{5, 17}, Shape{3, 1, 7}, Shape{0}, Shape{0, 5}})
    c.push_back({{s}, attrs});
  return c;
}

Cases binary_cases(bool big) {
  Cases c;
  for (int64_t n : flat_sizes(big)) c.push_back({{Shape{n}, Shape{n}}, {}});
  if (big) {
    c.push_back({{Shape{kBig}, Shape{}}, {}});
    c.push_back({{Shape{1}, Shape{kBig}}, {}});
  }
  const std::pair<Shape, Shape> pairs[] = {
      {Shape{1, 17}, Shape{5, 1}}, {Shape{17}, Shape{5, 17}},      {Shape{}, Shape{5, 17}},
      {Shape{}, Shape{}},          {Shape{3, 1, 17}, Shape{5, 1}}, {Shape{5, 17}, Shape{5, 17}},
      {Shape{0}, Shape{0}},        {Shape{0, 5}, Shape{5}},        {Shape{0, 1}, Shape{1, 5}},
      {Shape{0, 5}, Shape{}}};
  for (const auto& [a, b] : pairs) {
    c.push_back({{a, b}, {}});
    if (a != b) c.push_back({{b, a}, {}});
  }
  return c;
}

Cases select_cases(bool big) {
  Cases c;
  for (int64_t n : flat_sizes(big)) c.push_back({{Shape{n}, Shape{n}, Shape{n}}, {}});
  if (big) c.push_back({{Shape{kBig}, Shape{}, Shape{kBig}}, {}});
  const std::vector<Shape> triples[] = {
      {Shape{5, 1}, Shape{1, 17}, Shape{17}},    {Shape{17}, Shape{5, 1}, Shape{}},
      {Shape{}, Shape{5, 17}, Shape{5, 1}},      {Shape{5, 17}, Shape{}, Shape{}},
      {Shape{1, 17}, Shape{5, 17}, Shape{5, 1}}, {Shape{}, Shape{}, Shape{}},
      {Shape{0, 5}, Shape{5}, Shape{0, 1}},      {Shape{0}, Shape{}, Shape{0}}};
  for (const auto& t : triples) c.push_back({t, {}});
  return c;
}

std::vector<std::vector<int64_t>> axis_subsets() {
  // [] means all axes; also negative spellings.
  return {{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}, {-1}, {-3, -1}};
}

Cases reduce_cases(bool big, bool empty_reduction_ok) {
  Cases c;
  for (const auto& axes : axis_subsets())
    for (bool keep : {false, true})
      c.push_back({{Shape{3, 5, 7}}, {{"axes", axes}, {"keepdims", keep}}});
  for (int64_t n : flat_sizes(big))
    for (bool keep : {false, true})
      c.push_back({{Shape{n}}, {{"axes", std::vector<int64_t>{}}, {"keepdims", keep}}});
  c.push_back({{Shape{17, 1}}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}}});
  c.push_back({{Shape{0, 5}}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}}});
  if (empty_reduction_ok) {  // max / min of nothing are rejected by the shape rules
    c.push_back({{Shape{0, 5}}, {{"axes", std::vector<int64_t>{0}}, {"keepdims", true}}});
    c.push_back({{Shape{0}}, {{"axes", std::vector<int64_t>{}}, {"keepdims", false}}});
  }
  return c;
}

Cases arg_reduce_cases(bool big) {
  Cases c;
  for (int64_t axis : {0, 1, 2, -1})
    for (bool keep : {false, true})
      c.push_back({{Shape{3, 5, 7}}, {{"axis", axis}, {"keepdims", keep}}});
  for (int64_t n : flat_sizes(big))
    c.push_back({{Shape{n}}, {{"axis", int64_t{0}}, {"keepdims", false}}});
  c.push_back({{Shape{0, 5}}, {{"axis", int64_t{1}}, {"keepdims", false}}});
  return c;
}

Cases softmax_cases(bool big) {
  Cases c;
  for (int64_t axis : {0, 1, 2, -1}) c.push_back({{Shape{3, 5, 7}}, {{"axis", axis}}});
  for (int64_t n : flat_sizes(big)) c.push_back({{Shape{n}}, {{"axis", int64_t{0}}}});
  c.push_back({{Shape{0, 5}}, {{"axis", int64_t{1}}}});
  c.push_back({{Shape{0, 5}}, {{"axis", int64_t{0}}}});
  c.push_back({{Shape{5, 0}}, {{"axis", int64_t{1}}}});
  return c;
}

Cases broadcast_to_cases(bool big, bool like) {
  Cases c;
  const std::pair<Shape, Shape> pairs[] = {{Shape{17}, Shape{5, 17}},
                                           {Shape{1, 17}, Shape{5, 17}},
                                           {Shape{5, 1}, Shape{5, 17}},
                                           {Shape{}, Shape{3}},
                                           {Shape{1}, Shape{1}},
                                           {Shape{3}, Shape{3}},
                                           {Shape{3, 1, 7}, Shape{2, 3, 5, 7}},
                                           {Shape{1, 5}, Shape{0, 5}},
                                           {Shape{}, Shape{0}}};
  auto add = [&](const Shape& from, const Shape& to) {
    if (like)
      c.push_back({{from, to}, {}});
    else
      c.push_back({{from}, {{"shape", to.to_vector()}}});
  };
  for (const auto& [from, to] : pairs) add(from, to);
  if (big) add(Shape{1}, Shape{kBig});
  return c;
}

Cases reshape_cases(bool big) {
  Cases c;
  const std::pair<Shape, std::vector<int64_t>> pairs[] = {{Shape{17}, {17, 1}},
                                                          {Shape{3, 5, 7}, {7, 15}},
                                                          {Shape{3, 5, 7}, {105}},
                                                          {Shape{5, 17}, {17, 5}},
                                                          {Shape{3, 5, 7}, {5, -1, 3}},
                                                          {Shape{0, 5}, {5, 0}},
                                                          {Shape{}, {1, 1}},
                                                          {Shape{1}, {}},
                                                          {Shape{3}, {3}}};
  for (const auto& [from, to] : pairs) c.push_back({{from}, {{"shape", to}}});
  if (big) c.push_back({{Shape{kBig}}, {{"shape", std::vector<int64_t>{kBig, 1}}}});
  return c;
}

Cases transpose_cases(bool big) {
  Cases c;
  for (std::vector<int64_t> p : std::vector<std::vector<int64_t>>{
           {0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}})
    c.push_back({{Shape{3, 5, 7}}, {{"perm", p}}});
  c.push_back({{Shape{5, 17}}, {{"perm", std::vector<int64_t>{1, 0}}}});
  c.push_back({{Shape{0, 5}}, {{"perm", std::vector<int64_t>{1, 0}}}});
  c.push_back({{Shape{1, 17}}, {{"perm", std::vector<int64_t>{1, 0}}}});
  for (int64_t n : flat_sizes(big)) c.push_back({{Shape{n}}, {{"perm", std::vector<int64_t>{0}}}});
  return c;
}

Cases slice_cases(bool big) {
  Cases c;
  auto add = [&](Shape s, std::vector<int64_t> start, std::vector<int64_t> stop,
                 std::vector<int64_t> step) {
    c.push_back({{s}, {{"start", start}, {"stop", stop}, {"step", step}}});
  };
  add(Shape{17}, {1}, {16}, {3});
  add(Shape{17}, {-5}, {17}, {1});
  add(Shape{3}, {0}, {3}, {1});
  add(Shape{1}, {0}, {1}, {1});
  add(Shape{5, 17}, {1, 2}, {5, 17}, {2, 5});
  add(Shape{5, 17}, {0, 3}, {5, 4}, {1, 1});
  add(Shape{3, 5, 7}, {1, 0, 2}, {3, 5, 7}, {1, 2, 2});
  add(Shape{3, 5, 7}, {0, 4, 0}, {3, 5, 7}, {1, 1, 3});
  add(Shape{17}, {4}, {4}, {1});  // empty result
  add(Shape{0, 5}, {0, 1}, {0, 4}, {1, 1});
  if (big) add(Shape{kBig}, {1}, {kBig - 1}, {2});
  return c;
}

// concat: along the leading axis (a kernel runs it serially), along inner axes with pieces of
// one shape (stored in one pass over the pieces) and of several (a pass per piece), rank 3, a
// negative axis, an empty piece, and pieces wide enough to vectorize.
Cases concat_cases(bool big) {
  Cases c;
  auto add = [&](std::vector<Shape> shapes, int64_t axis) {
    c.push_back({std::move(shapes), {{"axis", axis}}});
  };
  add({Shape{2, 3}, Shape{4, 3}}, 0);
  add({Shape{5, 3}, Shape{5, 3}, Shape{5, 3}, Shape{5, 3}}, 1);
  add({Shape{5, 3}, Shape{5, 4}, Shape{5, 1}}, 1);
  add({Shape{2, 3, 4}, Shape{2, 3, 5}}, 2);
  add({Shape{2, 3, 4}, Shape{2, 1, 4}}, -2);
  add({Shape{3, 0}, Shape{3, 2}}, 1);
  add({Shape{17}, Shape{5}}, 0);
  add({Shape{6, 40}, Shape{6, 40}}, -1);
  if (big) add({Shape{kBig / 4, 2}, Shape{kBig / 4, 2}}, 1);
  return c;
}

Cases element_count_cases() {
  Cases c;
  for (DType t : {f32, f64, i32, i64, u8}) {
    c.push_back({{Shape{3, 5, 7}}, {{"axes", std::vector<int64_t>{}}, {"dtype", t}}});
    c.push_back({{Shape{3, 5, 7}}, {{"axes", std::vector<int64_t>{1, -1}}, {"dtype", t}}});
  }
  c.push_back({{Shape{17}}, {{"axes", std::vector<int64_t>{0}}, {"dtype", i64}}});
  c.push_back({{Shape{0, 5}}, {{"axes", std::vector<int64_t>{}}, {"dtype", f32}}});
  c.push_back({{Shape{}}, {{"axes", std::vector<int64_t>{}}, {"dtype", f32}}});
  return c;
}

Cases one_hot_cases() {
  Cases c;
  for (DType t : {f32, f64, i32, u8, b8})
    for (Shape s : {Shape{17}, Shape{5, 3}, Shape{}, Shape{0}})
      c.push_back({{s}, {{"depth", int64_t{7}}, {"dtype", t}}});
  c.push_back({{Shape{17}}, {{"depth", int64_t{1}}, {"dtype", f32}}});
  c.push_back({{Shape{4}}, {{"depth", int64_t{0}}, {"dtype", f32}}});
  return c;
}

// max_pool2d (and max_pool2d_grad, whose second operand is the pooled shape): odd image
// sizes, strides other than the window (overlapping windows, gaps between windows), "same"
// (windows clipped at the edges) and "valid" (rows and columns left over), channel counts
// around a vector's width, an empty batch.
Cases pool_cases(bool grad) {
  struct Geometry {
    Shape input;
    std::vector<int64_t> pool, strides;
    const char* padding;
  };
  const Geometry geometries[] = {
      {Shape{3, 5, 5, 3}, {2, 2}, {2, 2}, "valid"}, {Shape{3, 5, 5, 3}, {2, 2}, {2, 2}, "same"},
      {Shape{1, 7, 6, 17}, {3, 3}, {2, 2}, "same"}, {Shape{2, 6, 7, 5}, {3, 2}, {1, 2}, "valid"},
      {Shape{3, 4, 5, 2}, {2, 2}, {3, 3}, "same"},  {Shape{1, 9, 9, 1}, {3, 3}, {1, 1}, "same"},
      {Shape{2, 1, 1, 3}, {1, 1}, {1, 1}, "valid"}, {Shape{0, 4, 4, 2}, {2, 2}, {2, 2}, "valid"},
  };
  Cases c;
  for (const Geometry& g : geometries) {
    Attrs a{{"pool_size", g.pool}, {"strides", g.strides}, {"padding", std::string(g.padding)}};
    std::vector<Shape> shapes = {g.input};
    if (grad) {
      const TensorType in[] = {{f32, g.input}};
      shapes.push_back(infer_type(OpKind::MaxPool2D, in, a).shape);
    }
    c.push_back({shapes, a});
  }
  return c;
}

// ---- rows

enum class Fuse {
  kPipeline,  // the fusion pass must group neg(op(neg(x))) into a fusion node
  kHand,      // fusion never groups the op: the test builds the fusion node itself
};

struct OpRow {
  std::string name;
  OpKind op;
  std::vector<DType> dtypes;
  std::function<Cases(bool big)> cases;
  // Regular float inputs are drawn from [lo, hi]; integers from [ilo, ihi] (u8 clamped to
  // [0, 255]).
  double lo = -3, hi = 3;
  bool specials = true;  // float inputs also hold NaN, +-inf, -0.0, +0.0
  bool big = false;      // also run at 1000003 elements
  Fuse fuse = Fuse::kPipeline;
  int64_t ilo = -20, ihi = 20;
  bool nonzero = false;  // no zero integers (integer division by zero is an error)
  double special_rate = 0.2;
  // Special values left out (bits: 1 NaN, 2 +inf, 4 -inf, 8 -0.0, 16 +0.0), for eager quirks
  // documented in the row.
  int no_special = 0;
  // The sign of a zero result may differ (documented in the row); else it must match.
  bool any_zero_sign = false;
};
[[maybe_unused]] void PrintTo(const OpRow& row, std::ostream* os) { *os << row.name; }

// Builders of rows (the reasons for each row's settings are in the table below).
OpRow unary(std::string name, OpKind op, std::vector<DType> dtypes, Attrs attrs = {}) {
  OpRow r;
  r.name = std::move(name);
  r.op = op;
  r.dtypes = std::move(dtypes);
  r.cases = [attrs](bool big) { return unary_cases(big, attrs); };
  return r;
}
OpRow binary(std::string name, OpKind op, std::vector<DType> dtypes) {
  OpRow r;
  r.name = std::move(name);
  r.op = op;
  r.dtypes = std::move(dtypes);
  r.cases = binary_cases;
  return r;
}
OpRow reduction(std::string name, OpKind op, std::vector<DType> dtypes, bool empty_ok) {
  OpRow r;
  r.name = std::move(name);
  r.op = op;
  r.dtypes = std::move(dtypes);
  r.cases = [empty_ok](bool big) { return reduce_cases(big, empty_ok); };
  r.special_rate = 0.01;  // sparse: most reduced rows stay finite
  return r;
}
OpRow with(OpRow r, auto&& edit) {
  edit(r);
  return r;
}

std::vector<OpRow> op_rows() {
  std::vector<OpRow> rows;
  auto add = [&](OpRow r) { rows.push_back(std::move(r)); };

  // ---- elementwise binary
  add(with(binary("add", OpKind::Add, kNumeric), [](OpRow& r) { r.big = true; }));
  add(binary("sub", OpKind::Sub, kNumeric));
  add(binary("mul", OpKind::Mul, kNumeric));
  // integer division truncates; zero divisors are an error on both paths (not tested here)
  add(with(binary("div", OpKind::Div, kNumeric), [](OpRow& r) {
    r.nonzero = true;
    r.big = true;
  }));
  // pow: libm powf / pow (codegen) against Eigen's vectorized pow; base in (0, 3]
  add(with(binary("pow", OpKind::Pow, kFloat), [](OpRow& r) {
    r.lo = 0.05;
    r.hi = 3;
  }));
  // maximum / minimum of -0.0 and +0.0: codegen orders -0 < +0 (llvm.maximum/minimum), eager
  // (Eigen's NaN-propagating max/min) returns one operand by position: zero signs differ
  add(with(binary("maximum", OpKind::Maximum, kNumeric), [](OpRow& r) { r.any_zero_sign = true; }));
  add(with(binary("minimum", OpKind::Minimum, kNumeric), [](OpRow& r) { r.any_zero_sign = true; }));
  add(binary("equal", OpKind::Equal, kAny));
  add(binary("not_equal", OpKind::NotEqual, kAny));
  add(binary("less", OpKind::Less, kNumeric));
  add(binary("less_equal", OpKind::LessEqual, kNumeric));
  add(binary("greater", OpKind::Greater, kNumeric));
  add(binary("greater_equal", OpKind::GreaterEqual, kNumeric));
  add(binary("logical_and", OpKind::LogicalAnd, {b8}));
  add(binary("logical_or", OpKind::LogicalOr, {b8}));

  // ---- elementwise unary
  add(with(unary("neg", OpKind::Neg, kNumeric), [](OpRow& r) { r.big = true; }));
  add(unary("abs", OpKind::Abs, kNumeric));
  add(unary("sign", OpKind::Sign, kNumeric));
  add(unary("square", OpKind::Square, kNumeric));
  // sqrt: codegen is IEEE sqrt; eager float32 is Eigen's fast-math sqrt (rsqrt estimate and a
  // Newton step: up to 2 ulp off, sqrt(+inf) = NaN, sqrt(-0.0) = +0.0): +inf
  // left out, zero signs not compared
  add(with(unary("sqrt", OpKind::Sqrt, kFloat), [](OpRow& r) {
    r.lo = 0;
    r.any_zero_sign = true;
    r.no_special = 2;
  }));
  // rsqrt: 1 / sqrt(x) (two roundings) against Eigen's rsqrt: <= 2 ulp apart
  add(with(unary("rsqrt", OpKind::Rsqrt, kFloat), [](OpRow& r) {
    r.lo = 0.01;
    r.hi = 100;
  }));
  add(with(unary("exp", OpKind::Exp, kFloat), [](OpRow& r) {
    r.lo = -80;
    r.hi = 80;
    r.big = true;
  }));
  // log on positive values (its result crosses 0 at 1: the absolute term)
  add(with(unary("log", OpKind::Log, kFloat), [](OpRow& r) {
    r.lo = 1e-3;
    r.hi = 1e4;
  }));
  add(with(unary("log1p", OpKind::Log1p, kFloat), [](OpRow& r) {
    r.lo = -0.9;
    r.hi = 100;
  }));
  add(with(unary("tanh", OpKind::Tanh, kFloat), [](OpRow& r) {
    r.lo = -10;
    r.hi = 10;
    r.big = true;
  }));
  add(with(unary("sigmoid", OpKind::Sigmoid, kFloat), [](OpRow& r) {
    r.lo = -30;
    r.hi = 30;
  }));
  add(unary("relu", OpKind::Relu, kNumeric));
  add(unary("leaky_relu", OpKind::LeakyRelu, kFloat, {{"alpha", 0.2}}));
  // gelu(-inf): eager computes 0.5 * x * (1 + erf(..)) = -inf * 0 = NaN; codegen gives -0
  // (the limit): an eager quirk, so -inf is left out
  add(with(unary("gelu_tanh", OpKind::Gelu, kFloat, {{"approximate", true}}), [](OpRow& r) {
    r.big = true;
    r.no_special = 4;
  }));
  add(with(unary("gelu_erf", OpKind::Gelu, kFloat, {{"approximate", false}}),
           [](OpRow& r) { r.no_special = 4; }));
  add(unary("erf", OpKind::Erf, kFloat));
  add(with(unary("softplus", OpKind::Softplus, kFloat), [](OpRow& r) {
    r.lo = -30;
    r.hi = 30;
  }));
  add(unary("logical_not", OpKind::LogicalNot, {b8}));
  // casts to every dtype: float -> integer only within range and without specials (eager:
  // undefined out of range or for NaN; codegen saturates)
  for (DType to : kAny) {
    add(with(unary("cast_to_" + std::string(dtype_name(to)), OpKind::Cast, kAny, {{"dtype", to}}),
             [&](OpRow& r) {
               r.specials = to == f32 || to == f64 || to == b8;
               r.lo = to == u8 ? 0 : -100;
               r.hi = to == u8 ? 255 : 100;
               r.big = to == i32;
             }));
  }
  add(with(binary("select", OpKind::Select, kAny), [](OpRow& r) { r.cases = select_cases; }));
  add(with(unary("copy", OpKind::Copy, kAny), [](OpRow& r) { r.fuse = Fuse::kHand; }));

  // ---- layout
  add(with(unary("broadcast_to", OpKind::BroadcastTo, kAny),
           [](OpRow& r) { r.cases = [](bool big) { return broadcast_to_cases(big, false); }; }));
  add(with(unary("broadcast_like", OpKind::BroadcastLike, kAny),
           [](OpRow& r) { r.cases = [](bool big) { return broadcast_to_cases(big, true); }; }));
  add(with(unary("reshape", OpKind::Reshape, kAny), [](OpRow& r) { r.cases = reshape_cases; }));
  add(with(unary("transpose", OpKind::Transpose, kAny), [](OpRow& r) {
    r.cases = transpose_cases;
    r.fuse = Fuse::kHand;
  }));
  add(with(unary("slice", OpKind::Slice, kAny), [](OpRow& r) {
    r.cases = slice_cases;
    r.fuse = Fuse::kHand;
  }));
  // concat: alone it runs as the runtime's kernel (codegen/lower_kernel.h, runs_in_library);
  // in a hand-made group, stored into its windows and read back by the group's neg
  add(with(unary("concat", OpKind::Concat, kAny), [](OpRow& r) {
    r.cases = concat_cases;
    r.fuse = Fuse::kHand;
  }));
  // one_hot: indices from [-3, 9] against depths 7, 1 and 0, so some fall outside [0, depth)
  // (all-zero rows on both paths); every output dtype
  add(with(unary("one_hot", OpKind::OneHot, {i32, i64}), [](OpRow& r) {
    r.cases = [](bool) { return one_hot_cases(); };
    r.ilo = -3;
    r.ihi = 9;
  }));
  // a constant at compile time; constant folding removes it from pipeline-fused graphs
  add(with(unary("element_count", OpKind::ElementCount, kAny), [](OpRow& r) {
    r.cases = [](bool) { return element_count_cases(); };
    r.fuse = Fuse::kHand;
  }));

  // ---- reductions
  // positive inputs for sum and mean: no cancellation, so relative errors stay small
  add(with(reduction("sum", OpKind::Sum, kNumeric, true), [](OpRow& r) {
    r.lo = 0.5;
    r.hi = 2;
    r.big = true;
  }));
  add(with(reduction("mean", OpKind::Mean, kFloat, true), [](OpRow& r) {
    r.lo = 0.5;
    r.hi = 2;
    r.big = true;
  }));
  add(with(reduction("max", OpKind::Max, kNumeric, false), [](OpRow& r) { r.big = true; }));
  add(reduction("min", OpKind::Min, kNumeric, false));
  // prod: values near 1 (no overflow in floats; integers wrap the same way on both paths)
  add(with(reduction("prod", OpKind::Prod, kNumeric, true), [](OpRow& r) {
    r.lo = 0.8;
    r.hi = 1.25;
    r.ilo = -2;
    r.ihi = 2;
  }));
  // logsumexp: decomposed (max, exp, sum, log): vector math and a reassociated sum
  add(with(reduction("logsumexp", OpKind::LogSumExp, kFloat, true), [](OpRow& r) {
    r.lo = -20;
    r.hi = 20;
    r.big = true;
  }));
  add(with(reduction("argmax", OpKind::ArgMax, kNumeric, false), [](OpRow& r) {
    r.cases = arg_reduce_cases;
    r.ilo = -3;  // ties: the first extreme index wins on both paths
    r.ihi = 3;
  }));
  add(with(reduction("argmin", OpKind::ArgMin, kNumeric, false), [](OpRow& r) {
    r.cases = arg_reduce_cases;
    r.ilo = -3;
    r.ihi = 3;
  }));
  // softmax / log_softmax: decomposed like the eager kernel (max, exp, sum), with vector
  // math exp and log and a reassociated sum
  for (OpKind k : {OpKind::Softmax, OpKind::LogSoftmax}) {
    add(with(reduction(k == OpKind::Softmax ? "softmax" : "log_softmax", k, kFloat, true),
             [](OpRow& r) {
               r.cases = softmax_cases;
               r.lo = -20;
               r.hi = 20;
               r.big = true;
             }));
  }

  // ---- pooling: selections (bitwise equal to the eager kernels); ties among integers (and
  // between -0.0 and +0.0) go to the window's first maximum, NaN counts as the maximum
  add(with(unary("max_pool2d", OpKind::MaxPool2D, kNumeric), [](OpRow& r) {
    r.cases = [](bool) { return pool_cases(false); };
    r.ilo = -3;
    r.ihi = 3;
  }));
  // the gradient sums the output gradients of the overlapping windows whose first maximum is
  // the element, in the eager kernel's order (row-major over windows)
  add(with(unary("max_pool2d_grad", OpKind::MaxPool2DGrad, kFloat),
           [](OpRow& r) { r.cases = [](bool) { return pool_cases(true); }; }));
  return rows;
}

// ---- the one-op graph of a row's case

std::vector<TensorType> operand_types(const OpRow& row, DType dt, const Case& c) {
  std::vector<TensorType> t;
  for (size_t i = 0; i < c.shapes.size(); ++i)
    t.push_back({row.op == OpKind::Select && i == 0 ? b8 : dt, c.shapes[i]});
  return t;
}

[[maybe_unused]] std::unique_ptr<ir::Graph> alone_graph(const OpRow& row,
                                                        const std::vector<TensorType>& types,
                                                        const Attrs& attrs) {
  auto g = std::make_unique<ir::Graph>("alone_" + row.name);
  std::vector<ir::Value*> in;
  for (const TensorType& t : types) in.push_back(g->add_parameter(t));
  g->set_outputs({g->add_op(row.op, in, attrs)->output()});
  return g;
}

}  // namespace
}  // namespace kiln
