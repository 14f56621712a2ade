// The op consistency suite (after ggml's test-backend-ops): one row per op that codegen lowers
// (codegen::can_lower), each run through compile_graph and compared with the reference
// executor (eager kernels, node by node) within error bounds derived from the computation
// (tests/support/error_bound.h: float64 evaluation and rounding-model samples):
//   - alone: a graph of that one op, compiled as a one-op kernel;
//   - fused: neg(op(neg(x), ...)) (logical_not for bool), so the op sits inside a fusion
//     group; the pipeline (passes::optimize_pipeline) must make a `fusion` node of it, except
//     for the ops fusion never groups (transpose, slice, copy; element_count folds to a
//     constant), whose fusion node is built by hand (codegen lowers them inside kernels too).
// Cases per row: odd sizes 1, 3, 17 (and 1000003 for the rows marked `big`), scalars,
// broadcasting in every position and both orders, zero-sized tensors ([0], [0,5]), reductions
// over every axis subset of a rank-3 input with keepdims true and false. Float inputs hold
// NaN, +-inf, -0.0 and +0.0 where the row allows special values; NaN must match NaN, and zero
// results must have the same sign (except in the rows that document why not).
// Adding an op that codegen lowers means adding one row here.
//
// Ops codegen does not lower run through compile_graph's eager fallback (EagerFallback below)
// and must agree bitwise.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/codegen/lower_kernel.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pipeline.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/support/error_bound.h"

#include "tests/codegen/op_consistency_rows.h"

namespace kiln {
namespace {

// ---- inputs

double special_value(int k) {
  const double inf = std::numeric_limits<double>::infinity();
  const double s[] = {std::numeric_limits<double>::quiet_NaN(), inf, -inf, -0.0, 0.0};
  return s[k % 5];
}

// Values for operand `t` of a row: regular values in the row's range, and (floats, where the
// row allows) special values at fixed positions and then at random.
Array make_input(const OpRow& row, const TensorType& t, std::mt19937& rng) {
  Array a = Array::empty(t);
  std::uniform_real_distribution<double> u01(0, 1);
  visit_dtype(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = u01(rng) < 0.5;
      } else if constexpr (std::is_floating_point_v<T>) {
        bool special = row.specials && (i < 25 ? i % 5 == 1 && u01(rng) < 5 * row.special_rate
                                               : u01(rng) < row.special_rate / 10);
        int k = int(u01(rng) * 5);
        if (special && (row.no_special & (1 << k)) == 0)
          p[i] = T(special_value(k));
        else
          p[i] = T(row.lo + (row.hi - row.lo) * u01(rng));
      } else {
        int64_t lo = row.ilo, hi = row.ihi;
        if (std::is_same_v<T, uint8_t>) {  // the same number of values, from 0
          lo = 0;
          hi = std::min<int64_t>(row.ihi - row.ilo, 255);
        }
        int64_t v = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
        if (row.nonzero && v == 0) v = 1;
        p[i] = T(v);
      }
    }
  });
  return a;
}

// -x elementwise (neg for numbers, logical not for bools): the fused graphs read neg(param),
// so their parameters hold the negated inputs.
Array negated(const Array& x) {
  Array a = Array::empty(x.type());
  visit_dtype(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = static_cast<const T*>(x.raw());
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < x.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>)
        p[i] = !s[i];
      else if constexpr (std::is_same_v<T, uint8_t>)
        p[i] = T(0u - unsigned(s[i]));
      else
        p[i] = T(-s[i]);
    }
  });
  return a;
}

ir::Value* negate(ir::Graph& g, ir::Value* v) {
  return g.add_op(v->dtype() == b8 ? OpKind::LogicalNot : OpKind::Neg, {v})->output();
}

// ---- graphs

// neg(op(neg(p0), neg(p1), ...)) with op(...) as a second output (a multi-output group).
// The neg row (neg(neg(x)) folds to x) is square(neg(abs(p))) instead, on its raw inputs.
bool negates_inputs(const OpRow& row) { return row.op != OpKind::Neg; }
void build_fused_body(ir::Graph& g, const OpRow& row, const std::vector<ir::Value*>& params,
                      const Attrs& attrs) {
  if (!negates_inputs(row)) {
    ir::Value* r =
        g.add_op(row.op, {g.add_op(OpKind::Abs, {params[0]})->output()}, attrs)->output();
    g.set_outputs({g.add_op(OpKind::Square, {r})->output(), r});
    return;
  }
  std::vector<ir::Value*> in;
  for (ir::Value* p : params) in.push_back(negate(g, p));
  ir::Value* r = g.add_op(row.op, in, attrs)->output();
  g.set_outputs({negate(g, r), r});
}

std::unique_ptr<ir::Graph> fused_graph(const OpRow& row, const std::vector<TensorType>& types,
                                       const Attrs& attrs) {
  auto g = std::make_unique<ir::Graph>("fused_" + row.name);
  std::vector<ir::Value*> params;
  for (const TensorType& t : types) params.push_back(g->add_parameter(t));
  if (row.fuse == Fuse::kPipeline) {
    build_fused_body(*g, row, params, attrs);
    passes::optimize_pipeline({}).run(*g);
    return g;
  }
  auto body = std::make_unique<ir::Graph>("body");
  std::vector<ir::Value*> body_params;
  for (const TensorType& t : types) body_params.push_back(body->add_parameter(t));
  build_fused_body(*body, row, body_params, attrs);
  std::vector<TensorType> out_types = body->output_types();
  ir::Node* f =
      g->add_fusion("fused_" + row.name + "_0", "loop", params, std::move(body), out_types);
  g->set_outputs({f->output(0), f->output(1)});
  ir::verify_graph(*g);
  return g;
}

// Is there a node of `op` in `g` (in fusion bodies too)?
bool holds_op(const ir::Graph& g, OpKind op) {
  for (const auto& n : g.nodes()) {
    if (n->is_op(op)) return true;
    for (const auto& sub : n->subgraphs())
      if (holds_op(*sub, op)) return true;
  }
  return false;
}

// The fusion node holding the row's op, or null.
const ir::Node* fusion_with(const ir::Graph& g, OpKind op) {
  for (const auto& n : g.nodes()) {
    if (n->kind() != ir::NodeKind::kFusion) continue;
    for (const auto& m : n->subgraph(0).nodes())
      if (m->is_op(op)) return n.get();
  }
  return nullptr;
}

std::string describe(const OpRow& row, DType dt, const Case& c, bool fused) {
  std::string s = row.name;
  s.append(" ").append(dtype_name(dt)).append(fused ? " fused" : " alone").append(" operands");
  for (const Shape& sh : c.shapes) s.append(" ").append(sh.to_string());
  return s;
}

// Where both results are zeros, their signs agree.
::testing::AssertionResult same_zero_signs(const Array& got, const Array& want) {
  for (int64_t i = 0; i < want.size(); ++i) {
    double g = testing::element(got, i), w = testing::element(want, i);
    if (g == 0 && w == 0 && std::signbit(g) != std::signbit(w))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << g << ", want " << w << " (sign of zero)";
  }
  return ::testing::AssertionSuccess();
}

// Runs one case through the reference executor and compile_graph and compares. Errors
// (integer division by zero) must happen on both paths.
int cases_run = 0;
void check_case(const OpRow& row, DType dt, const Case& c, bool fused, uint32_t seed) {
  ++cases_run;
  std::vector<TensorType> types = operand_types(row, dt, c);
  std::unique_ptr<ir::Graph> g =
      fused ? fused_graph(row, types, c.attrs) : alone_graph(row, types, c.attrs);
  std::string what = describe(row, dt, c, fused);
  // An identity (cast to its own dtype, reshape or broadcast to its own shape) is folded away
  // by algebraic simplification: nothing to fuse then.
  const bool identity = fused && !holds_op(*g, row.op) &&
                        (row.op == OpKind::Cast || op_info(row.op).has(kLayout)) &&
                        alone_graph(row, types, c.attrs)->outputs()[0]->type() == types[0];
  if (fused && row.fuse == Fuse::kPipeline && !identity) {
    ASSERT_NE(fusion_with(*g, row.op), nullptr)
        << what << ": the fusion pass made no fusion node holding the op:\n"
        << ir::print_graph(*g);
  }
  std::mt19937 rng(seed);
  std::vector<Array> args;
  for (const TensorType& t : types) {
    Array x = make_input(row, t, rng);
    args.push_back(fused && negates_inputs(row) ? negated(x) : x);
  }
  std::unique_ptr<testing::ErrorBoundedReference> want;
  testing::RunResult got;
  std::string want_error, got_error;
  try {
    want = std::make_unique<testing::ErrorBoundedReference>(*g, args, std::vector<Array>{}, seed);
  } catch (const Error& e) {
    want_error = e.what();
  }
  try {
    got = testing::run_compiled(*g, args, {});
  } catch (const Error& e) {
    got_error = e.what();
  }
  ASSERT_EQ(want_error.empty(), got_error.empty())
      << what << ": reference error '" << want_error << "', compiled error '" << got_error << "'\n"
      << ir::print_graph(*g);
  if (!want_error.empty()) return;
  EXPECT_TRUE(want->check(got.outputs)) << what << " (seed " << seed << ")\n"
                                        << ir::print_graph(*g);
  for (size_t i = 0; i < got.outputs.size() && i < want->result_count(); ++i) {
    const Array& ref = want->float32_results()[i];
    if (!row.any_zero_sign && is_floating(ref.dtype)) {
      EXPECT_TRUE(same_zero_signs(got.outputs[i], ref))
          << what << ", output " << i << " (seed " << seed << ")\n"
          << ir::print_graph(*g);
    }
  }
}

class OpConsistency : public ::testing::TestWithParam<OpRow> {
 protected:
  static void SetUpTestSuite() { cache_ = new testing::ScopedCacheDir(); }
  static void TearDownTestSuite() {
    std::printf("[ op consistency ] %d cases (op x dtype x operand shapes x alone/fused)\n",
                cases_run);
    delete cache_;
    cache_ = nullptr;
  }
  static testing::ScopedCacheDir* cache_;

  void run(bool fused) {
    const OpRow& row = GetParam();
    uint32_t seed = 1;
    for (DType dt : row.dtypes) {
      for (const Case& c : row.cases(row.big)) {
        bool big = false;
        for (const Shape& s : c.shapes) big |= s.num_elements() >= kBig;
        // the large case once per row (float32 or the first dtype), not per dtype
        if (big && dt != row.dtypes.front()) continue;
        auto t0 = std::chrono::steady_clock::now();
        check_case(row, dt, c, fused, seed++);
        if (HasFatalFailure()) return;
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
        if (ms > 1000)
          std::printf("[ slow ] %s: %.0f ms\n", describe(row, dt, c, fused).c_str(), ms);
      }
    }
  }
};
testing::ScopedCacheDir* OpConsistency::cache_ = nullptr;

TEST_P(OpConsistency, Alone) { run(false); }
TEST_P(OpConsistency, Fused) { run(true); }

INSTANTIATE_TEST_SUITE_P(OpConsistency, OpConsistency, ::testing::ValuesIn(op_rows()),
                         [](const auto& info) { return info.param.name; });

// ---- ops without generated code: compile_graph runs their eager kernels (bitwise equal)

// kFallbackRows (tests/codegen/op_consistency_rows.h): one graph per op codegen does not lower.

Array fallback_input(const TensorType& t, std::mt19937& rng) {
  Array a = Array::empty(t);
  visit_dtype(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>)
        p[i] = T(std::uniform_real_distribution<double>(-2, 2)(rng));
      else if constexpr (std::is_same_v<T, bool>)
        p[i] = (rng() & 1) != 0;
      else
        p[i] = T(rng() % 3);  // valid indices for the index operands above
    }
  });
  return a;
}

TEST(OpConsistencyEagerFallback, BitwiseEqual) {
  for (const FallbackRow& row : kFallbackRows) {
    SCOPED_TRACE(row.name);
    auto g = ir::parse_graph(row.ir, row.name);
    for (const auto& n : g->nodes()) EXPECT_FALSE(codegen::can_lower(*n)) << row.name;
    std::mt19937 rng(7);
    std::vector<Array> args;
    for (const auto& p : g->parameters()) args.push_back(fallback_input(p->type(), rng));
    auto want = testing::run_reference(*g, args, {});
    auto got = testing::run_compiled(*g, args, {});
    ASSERT_EQ(got.outputs.size(), want.outputs.size());
    for (size_t i = 0; i < want.outputs.size(); ++i) {
      const Array& a = got.outputs[i];
      const Array& b = want.outputs[i];
      ASSERT_EQ(a.type(), b.type());
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), size_t(a.size()) * dtype_size(a.dtype)), 0)
          << row.name << " differs from the eager kernel";
    }
  }
}

// Every op of ir/ops.def has a row: lowered ops in op_rows() (and can_lower agrees on a node
// built from the row's first case), the others in kFallbackRows (can_lower false).
TEST(OpConsistencyTable, EveryOpHasARow) {
  std::vector<int> rows_of(size_t(kNumOps), 0);
  for (const OpRow& row : op_rows()) {
    ++rows_of[size_t(row.op)];
    Cases cases = row.cases(false);
    const Case& c = cases.front();
    auto g = alone_graph(row, operand_types(row, row.dtypes.front(), c), c.attrs);
    EXPECT_TRUE(codegen::can_lower(*g->nodes().back())) << row.name;
  }
  for (const FallbackRow& row : kFallbackRows) {
    auto g = ir::parse_graph(row.ir, row.name);
    ++rows_of[size_t(g->nodes().back()->op())];
  }
  for (const OpInfo& info : all_ops())
    EXPECT_GT(rows_of[size_t(info.kind)], 0) << info.name << " has no consistency row";
}

}  // namespace
}  // namespace kiln
