// Property test of the default pipeline: on 3,000 random valid graphs (random_graph.h,
// seeded, deterministic), the optimized graph verifies and computes bitwise the same outputs
// and final variable values as the unoptimized one on random inputs (the passes are exact
// rewrites; NaNs compare equal whatever their payload). A failure prints the seed and the
// original graph's IR.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/passes/random_graph.h"
#include "tests/support/generator_ops.h"

namespace kiln::passes {
namespace {

constexpr uint64_t kFirstSeed = 20261121;
constexpr int kGraphs = 3000;

// Empty when `a` and `b` are bitwise equal (any NaN equals any NaN); a description otherwise.
std::string difference(const runtime::Array& a, const runtime::Array& b) {
  if (!(a.type() == b.type()))
    return "type " + a.type().to_string() + " vs " + b.type().to_string();
  std::string diff;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(a.raw());
    const T* y = static_cast<const T*>(b.raw());
    for (int64_t i = 0; i < a.size() && diff.empty(); ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(x[i]) && std::isnan(y[i])) continue;
      }
      if (std::memcmp(&x[i], &y[i], sizeof(T)) != 0)
        diff = "element " + std::to_string(i) + ": " + std::to_string(double(x[i])) + " vs " +
               std::to_string(double(y[i]));
    }
  });
  return diff;
}

struct Run {
  std::vector<runtime::Array> outputs;
  std::vector<runtime::Array> variables;
};

Run run_reference(const ir::Graph& g, const std::vector<runtime::Array>& args,
                  std::vector<runtime::Array> variables) {
  Run r;
  r.outputs = runtime::execute_reference(g, args, variables);
  r.variables = std::move(variables);
  return r;
}

struct PipelineStats {
  int graphs = 0;
  int changed = 0;
  size_t nodes_before = 0;
  size_t nodes_after = 0;
  int with_control_flow = 0;
  int with_assignments = 0;
  std::map<std::string, int64_t> pass_changes;  // runs that changed the graph, per pass
};

// Checks one seed; returns a failure description or "".
std::string check_seed(uint64_t seed, PipelineStats& stats,
                       PassPipeline (*make_pipeline)(const PipelineOptions&)) {
  std::unique_ptr<ir::Graph> original = test::random_graph(seed);
  std::unique_ptr<ir::Graph> optimized = test::random_graph(seed);
  std::string text = ir::print_graph(*original);
  auto fail = [&](const std::string& what) {
    return "seed " + std::to_string(seed) + ": " + what + "\noriginal graph:\n" + text +
           "optimized graph:\n" + ir::print_graph(*optimized);
  };
  try {
    ir::verify_graph(*original);
  } catch (const Error& e) {
    return fail(std::string("the generator made an invalid graph: ") + e.what());
  }

  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<runtime::Array> args, variables;
  for (const auto& p : original->parameters()) args.push_back(test::random_array(p->type(), rng));
  for (const auto& v : original->variables()) variables.push_back(test::random_array(v.type, rng));

  // The knobs apply (KILN_DISABLE_PASSES=... narrows a failure down); verification is on.
  PipelineOptions options = PipelineOptions::from_environment();
  options.verify = true;
  PassPipeline pipeline = make_pipeline(options);
  try {
    if (pipeline.run(*optimized)) ++stats.changed;
    for (const PassTiming& t : pipeline.timings()) stats.pass_changes[t.name] += t.changed;
    ir::verify_graph(*optimized);
  } catch (const Error& e) {
    return fail(std::string("the pipeline failed: ") + e.what());
  }
  ++stats.graphs;
  if (original->total_node_count() > original->nodes().size()) ++stats.with_control_flow;
  for (const auto& n : original->nodes())
    if (n->is_assignment()) {
      ++stats.with_assignments;
      break;
    }
  stats.nodes_before += original->total_node_count();
  stats.nodes_after += optimized->total_node_count();

  Run want, got;
  try {
    want = run_reference(*original, args, variables);
  } catch (const Error& e) {
    return fail(std::string("the original graph failed to run: ") + e.what());
  }
  try {
    got = run_reference(*optimized, args, variables);
  } catch (const Error& e) {
    return fail(std::string("the optimized graph failed to run: ") + e.what());
  }
  if (want.outputs.size() != got.outputs.size()) return fail("different number of outputs");
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    std::string d = difference(want.outputs[i], got.outputs[i]);
    if (!d.empty()) return fail("output " + std::to_string(i) + " differs: " + d);
  }
  for (size_t i = 0; i < want.variables.size(); ++i) {
    std::string d = difference(want.variables[i], got.variables[i]);
    if (!d.empty()) return fail("variable " + std::to_string(i) + " differs: " + d);
  }
  return "";
}

// Runs the property over `graphs` seeds; returns the stats.
PipelineStats check_pipeline(PassPipeline (*make_pipeline)(const PipelineOptions&), int graphs) {
  PipelineStats stats;
  int failures = 0;
  for (int i = 0; i < graphs; ++i) {
    std::string f = check_seed(kFirstSeed + uint64_t(i), stats, make_pipeline);
    if (f.empty()) continue;
    ADD_FAILURE() << f;
    if (++failures == 5) break;  // enough to debug with
  }
  EXPECT_EQ(failures, 0);
  return stats;
}

// KILN_PROPERTY_GRAPHS=N runs N graphs instead (a longer hunt for bugs).
int graph_count() {
  const char* n = std::getenv("KILN_PROPERTY_GRAPHS");
  return n ? std::atoi(n) : kGraphs;
}

void print_stats(const char* pipeline, const PipelineStats& stats) {
  std::printf("[ property ] %s: %d graphs, %d changed, %zu -> %zu nodes;", pipeline, stats.graphs,
              stats.changed, stats.nodes_before, stats.nodes_after);
  for (const auto& [name, n] : stats.pass_changes)
    std::printf(" %s %lld", name.c_str(), (long long)n);
  std::printf(" (changing runs); %d with cond / while, %d with assignments\n",
              stats.with_control_flow, stats.with_assignments);
}

TEST(PassPropertyTest, DefaultPipelineIsExactOnRandomGraphs) {
  int graphs = graph_count();
  PipelineStats stats = check_pipeline(default_pipeline, graphs);
  print_stats("default", stats);
  if (::testing::Test::HasFailure()) return;
  EXPECT_EQ(stats.graphs, graphs);
  // The generator must exercise the passes: most graphs change, every pass has work to do,
  // and control flow and variable updates are common.
  EXPECT_GT(stats.changed, graphs / 2);
  for (const char* pass : {"algebraic-simplify", "constant-fold", "cse", "dce"})
    EXPECT_GT(stats.pass_changes[pass], graphs / 10) << pass;
  EXPECT_GT(stats.with_control_flow, graphs / 20);
  EXPECT_GT(stats.with_assignments, graphs / 20);
}

// The same property for optimize_pipeline (simplify, hoist-loop-transposes, lower-assignments,
// fusion, schedule-last-uses, schedule-collectives); KILN_DISABLE_PASSES narrows a failure down.
// Without split-reductions, the one pass of it that sums in another order (its test,
// tests/codegen/split_reductions_test.cc, holds it to the float32 summation bound).
PassPipeline exact_optimize_pipeline(const PipelineOptions& options) {
  PipelineOptions exact = options;
  exact.disabled.insert("split-reductions");
  return optimize_pipeline(exact);
}

TEST(PassPropertyTest, OptimizePipelineIsExactOnRandomGraphs) {
  int graphs = graph_count();
  PipelineStats stats = check_pipeline(exact_optimize_pipeline, graphs);
  print_stats("optimize", stats);
  if (::testing::Test::HasFailure()) return;
  EXPECT_GT(stats.pass_changes["fusion"], graphs / 2);
}

// schedule-last-uses alone on the unoptimized graphs, where it moves nodes more often than
// after fusion (69 of the 3,000 graphs against 12): the moved graphs compute the same bits.
PassPipeline last_uses_pipeline(const PipelineOptions& options) {
  PassPipeline p(options);
  p.add(make_schedule_last_uses());
  return p;
}

TEST(PassPropertyTest, ScheduleLastUsesIsExactOnRandomGraphs) {
  int graphs = graph_count();
  PipelineStats stats = check_pipeline(last_uses_pipeline, graphs);
  print_stats("schedule-last-uses", stats);
  if (::testing::Test::HasFailure()) return;
  EXPECT_GT(stats.pass_changes["schedule-last-uses"], graphs / 200);
}

// `text` parsed, and again through the default pipeline (verified after every pass), with the
// optimized graph printed; run() gives both graphs' outputs on `args` under the reference
// executor (no variables).
struct Optimized {
  std::unique_ptr<ir::Graph> original, optimized;
  std::string printed;  // the optimized graph
  explicit Optimized(const std::string& text)
      : original(ir::parse_graph(text)), optimized(ir::parse_graph(text)) {
    PipelineOptions options;
    options.verify = true;
    default_pipeline(options).run(*optimized);
    printed = ir::print_graph(*optimized);
  }
  std::pair<std::vector<runtime::Array>, std::vector<runtime::Array>> run(
      const std::vector<runtime::Array>& args) const {
    std::vector<runtime::Array> no_variables;
    return {runtime::execute_reference(*original, args, no_variables),
            runtime::execute_reference(*optimized, args, no_variables)};
  }
};

// The gradient of an LSTM's four gate slices: pads summed, which algebraic-simplify turns into
// one concat of the pieces plus 0.0. Bitwise the same on values whose zeros carry a sign, NaNs
// and infinities (without the `+ 0.0`, a -0.0 in a piece stays -0.0 and this fails).
TEST(PassPropertyTest, SummedPadsOfSlicesBecomeAConcatBitwise) {
  const char* text =
      R"(graph @gates(%i: f32[2,3], %f: f32[2,3], %g: f32[2,3], %o: f32[2,3]) -> (f32[2,12]) {
  %pi = pad(%i) {low=[0, 0], high=[0, 9], interior=[0, 0]} : f32[2,12]
  %pf = pad(%f) {low=[0, 3], high=[0, 6], interior=[0, 0]} : f32[2,12]
  %pg = pad(%g) {low=[0, 6], high=[0, 3], interior=[0, 0]} : f32[2,12]
  %po = pad(%o) {low=[0, 9], high=[0, 0], interior=[0, 0]} : f32[2,12]
  %a = add(%po, %pg) : f32[2,12]
  %b = add(%a, %pf) : f32[2,12]
  %c = add(%b, %pi) : f32[2,12]
  return %c
})";
  const Optimized g(text);
  const std::string& ir = g.printed;
  EXPECT_NE(ir.find("concat("), std::string::npos) << ir;
  EXPECT_EQ(ir.find("pad("), std::string::npos) << ir;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> special = {-0.0f, 0.0f, nan, inf, -inf, -1.5f, 2.25f, -0.0f};
  std::vector<runtime::Array> args;
  for (int k = 0; k < 4; ++k) {
    runtime::Array a = runtime::Array::empty(DType::f32, Shape{2, 3});
    for (int j = 0; j < 6; ++j) a.data<float>()[j] = special[size_t(k + j) % special.size()];
    args.push_back(a);
  }
  const auto [want, got] = g.run(args);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(difference(want[0], got[0]), "") << ir;
  // The sum made every -0.0 a +0.0 (so the check above sees a -0.0 the rewrite would keep).
  const float* w = want[0].data<float>();
  for (int64_t j = 0; j < 24; ++j) EXPECT_FALSE(w[j] == 0.0f && std::signbit(w[j])) << j;
}

// C[3, 5] = matmul(A, B) of depth 4, A or B a zero constant (`zero` in `dtype`, the other the
// graph's parameter), both stored transposed or neither.
std::string zero_product_graph(bool zero_a, bool transposed, const std::string& dtype,
                               const std::string& zero) {
  const std::string a = dtype + (transposed ? "[4,3]" : "[3,4]");
  const std::string b = dtype + (transposed ? "[5,4]" : "[4,5]");
  const std::string t = transposed ? "true" : "false";
  return "graph @p(%x: " + (zero_a ? b : a) + ") -> (" + dtype + "[3,5]) {\n" +
         "  %z = constant dense<" + zero + "> : " + (zero_a ? a : b) + "\n" + "  %c = matmul(" +
         (zero_a ? "%z, %x" : "%x, %z") + ") {transpose_a=" + t + ", transpose_b=" + t +
         "} : " + dtype + "[3,5]\n  return %c\n}";
}

// A product by a zero constant (an RNN's zero initial state in its kernel's gradient):
// algebraic-simplify replaces it by a sum of the other operand times zero, broadcast. Bitwise
// the product on columns and rows holding NaN, +-inf and signed zeros (a NaN in the result
// where one is multiplied by zero, +0.0 elsewhere), with either operand zero, transposed or
// not, in float32, float64 and int32.
TEST(PassPropertyTest, ProductsByAZeroConstantAreColumnSumsBitwise) {
  // Signed zeros and finite values, a NaN first and an infinity last: the first and the last
  // line of the operand (its first and last row, or column) are non-finite, the others not.
  const std::vector<double> finite = {-0.0, 0.0, -1.5, 2.25, 3.0, -2.0};
  // Zeros of either sign: -0.0 in float32, +0.0 in float64.
  for (const auto& [dtype, zero] : {std::pair{"f32", "-0.0"}, {"f64", "0.0"}, {"i32", "0"}})
    for (int form = 0; form < 4; ++form) {
      const bool zero_a = form < 2;
      const std::string text = zero_product_graph(zero_a, form % 2 == 1, dtype, zero);
      const Optimized g(text);
      const std::string& ir = g.printed;
      EXPECT_EQ(ir.find("matmul("), std::string::npos) << ir;
      const TensorType in_type = g.original->parameter_types()[0];
      runtime::Array x = runtime::Array::empty(in_type);
      visit_dtype(in_type.dtype, [&](auto tag) {
        using V = typename decltype(tag)::type;
        V* v = x.data<V>();
        for (int64_t j = 0; j < x.size(); ++j) v[j] = V(finite[size_t(j) % finite.size()]);
        if constexpr (std::is_floating_point_v<V>) {
          v[0] = std::numeric_limits<V>::quiet_NaN();
          v[x.size() - 1] = -std::numeric_limits<V>::infinity();
        }
      });
      const auto [want, got] = g.run({x});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(difference(want[0], got[0]), "") << text << ir;
      if (std::string(dtype) == "f32") {
        // Both outcomes: NaN in C's first and last line (a non-finite value times zero), +0.0
        // in the middle one (C is 3 x 5: its lines are columns for a zero B, rows for a zero A).
        const float* w = want[0].data<float>();
        const int64_t nans = std::count_if(w, w + 15, [](float v) { return std::isnan(v); });
        EXPECT_EQ(nans, zero_a ? 6 : 10) << text;
        for (int64_t j = 0; j < 15; ++j) EXPECT_FALSE(w[j] == 0.0f && std::signbit(w[j])) << j;
      }
    }
}

TEST(PassPropertyTest, GeneratorIsDeterministic) {
  for (uint64_t seed : {1ull, 2ull, 99ull})
    EXPECT_EQ(ir::print_graph(*test::random_graph(seed)),
              ir::print_graph(*test::random_graph(seed)));
}

// The generator's list of ops (RandomGraphBuilder::ops(), which the op row completeness test
// reads) is what its graphs hold, no more and no less.
TEST(PassPropertyTest, GeneratorEmitsExactlyItsListedOps) {
  test::expect_generator_makes_exactly([](uint64_t seed) { return test::random_graph(seed); },
                                       test::RandomGraphBuilder::ops(),
                                       "RandomGraphBuilder::ops()");
}

}  // namespace
}  // namespace kiln::passes
