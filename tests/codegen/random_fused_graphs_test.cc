// Random graphs through the whole compiler: seeded graphs of fusable ops
// (tests/codegen/random_fused_graph.h) are optimized with passes::optimize_pipeline, compiled
// with codegen::compile_graph, and run against runtime::execute_reference on the same
// optimized graph (outputs and variables). The count is KILN_RANDOM_FUSED_GRAPHS (default
// 1000); a failure prints the seed and the graph's IR.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "codegen/object_cache.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/codegen/random_fused_graph.h"
#include "tests/passes/random_graph.h"

namespace kiln {
namespace {

using runtime::Array;

// KILN_RANDOM_FUSED_SEED=N runs that one seed only (to reproduce a failure).
uint64_t first_seed() {
  const char* env = std::getenv("KILN_RANDOM_FUSED_SEED");
  return env == nullptr || *env == '\0' ? 1 : std::strtoull(env, nullptr, 10);
}
bool one_seed() {
  const char* env = std::getenv("KILN_RANDOM_FUSED_SEED");
  return env != nullptr && *env != '\0';
}

int graph_count() {
  if (one_seed()) return 1;
  const char* env = std::getenv("KILN_RANDOM_FUSED_GRAPHS");
  if (env == nullptr || *env == '\0') return 1000;
  return std::max(0, std::atoi(env));
}

// Tolerances: f32 kernels use vector math (a few ulp) and reassociated reductions, and the
// errors pass through a few ops; f64 uses libm; integers are exact.
void tolerance(DType t, double& rtol, double& atol) {
  rtol = atol = 0;
  if (t == DType::f32) rtol = 1e-4, atol = 1e-5;
  if (t == DType::f64) rtol = 1e-10, atol = 1e-12;
}

int count_fusions(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->kind() == ir::NodeKind::kFusion;
  return n;
}

TEST(RandomFusedGraphs, CompiledMatchesReference) {
  testing::ScopedCacheDir cache;
  const int count = graph_count();
  int tested = 0, fusions = 0, skipped = 0, multi_output = 0, contraction = 0, failures = 0;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t seed = first_seed(); tested < count; ++seed) {
    std::unique_ptr<ir::Graph> g = testing::random_fused_graph(seed);
    passes::optimize_pipeline({}).run(*g);
    int f = count_fusions(*g);
    if (f == 0) {  // nothing for the fusion pass (e.g. all folded away): not counted
      ++skipped;
      ASSERT_LT(skipped, count / 4 + 10) << "too many random graphs without a fusion node";
      continue;
    }
    ++tested;
    fusions += f;
    for (const auto& n : g->nodes()) {
      if (n->kind() != ir::NodeKind::kFusion) continue;
      multi_output += n->num_outputs() > 1;
      contraction += n->fusion_kind() == "contraction";
    }
    std::mt19937_64 rng(seed);
    std::vector<Array> args, vars;
    for (const auto& p : g->parameters())
      args.push_back(testing::RandomFusedGraphBuilder::input(p->type(), rng));
    for (const auto& v : g->variables())
      vars.push_back(testing::RandomFusedGraphBuilder::input(v.type, rng));
    testing::RunResult want, got;
    try {
      want = testing::run_reference(*g, args, vars);
      got = testing::run_compiled(*g, args, vars);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << seed << ": " << e.what() << "\n" << ir::print_graph(*g);
      ASSERT_LT(++failures, 5) << "stopping after 5 failing graphs";
      continue;
    }
    ASSERT_EQ(got.outputs.size(), want.outputs.size()) << "seed " << seed;
    bool ok = true;
    auto compare = [&](const Array& a, const Array& b, const std::string& what) {
      double rtol, atol;
      tolerance(b.dtype, rtol, atol);
      ::testing::AssertionResult r = testing::all_close(a, b, rtol, atol);
      if (!r) {
        ok = false;
        ADD_FAILURE() << "seed " << seed << ", " << what << ": " << r.message();
      }
    };
    for (size_t i = 0; i < want.outputs.size(); ++i)
      compare(got.outputs[i], want.outputs[i], "output " + std::to_string(i));
    for (size_t i = 0; i < want.variables.size(); ++i)
      compare(got.variables[i], want.variables[i], "variable " + std::to_string(i));
    if (!ok) {
      ADD_FAILURE() << "seed " << seed << " (optimized graph):\n" << ir::print_graph(*g);
      ASSERT_LT(++failures, 5) << "stopping after 5 failing graphs";
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  codegen::CacheStats st = codegen::cache_stats();
  std::printf(
      "[ random fused ] %d graphs (%d skipped without fusion), %d fusion nodes (%d multi-output, "
      "%d contraction), %.1f s; kernels: %lld compiled, %lld memory hits\n",
      tested, skipped, fusions, multi_output, contraction, seconds, (long long)st.misses,
      (long long)st.memory_hits);
}

// Found by seed 1573 (KILN_RANDOM_FUSED_GRAPHS=5000), reduced: an expensive node (softplus)
// read both by a producer of a matmul and by the matmul's epilogue. Fusion rule 4 merges the
// two consumer groups with it, which puts the matmul's producer in the contraction group
// (against rule 5), and compile_graph rejects the group. A bug of passes/fusion.cc: disabled
// until it is fixed there.
TEST(RandomFusedGraphs, ExpensiveNodeFeedingContractionAndEpilogue) {
  auto g = ir::parse_graph(R"(graph @f(%0: f32[1,4], %1: f32[4,4]) -> (f32[1,4]) {
  %2 = softplus(%0) : f32[1,4]
  %3 = mul(%2, %2) : f32[1,4]
  %4 = matmul(%3, %1) {transpose_a=false, transpose_b=false} : f32[1,4]
  %5 = tanh(%2) : f32[1,4]
  %6 = add(%4, %5) : f32[1,4]
  return %6
})",
                           "repro");
  passes::optimize_pipeline({}).run(*g);
  std::mt19937 rng(1);
  std::vector<Array> args = {testing::random_array(g->parameter(0)->type(), rng),
                             testing::random_array(g->parameter(1)->type(), rng)};
  auto want = testing::run_reference(*g, args, {});
  auto got = testing::run_compiled(*g, args, {});
  EXPECT_TRUE(testing::all_close(got.outputs[0], want.outputs[0], 1e-5, 1e-6))
      << ir::print_graph(*g);
}

// The random graphs of the pass tests (tests/passes/random_graph.h: control flow, concat,
// constants, special input values, integer ops) through the same path: fewer graphs, looser
// checks on values that depend on a comparison of computed floats are not needed since the
// seeds are fixed; differences are triaged by hand.
TEST(RandomFusedGraphs, PassRandomGraphsMatchReference) {
  testing::ScopedCacheDir cache;
  const int count = std::max(1, graph_count() / 4);
  int failures = 0;
  for (uint64_t seed = 1; seed <= uint64_t(count); ++seed) {
    std::unique_ptr<ir::Graph> g = test::random_graph(seed);
    passes::optimize_pipeline({}).run(*g);
    std::mt19937_64 rng(seed);
    std::vector<Array> args, vars;
    for (const auto& p : g->parameters()) args.push_back(test::random_array(p->type(), rng));
    for (const auto& v : g->variables()) vars.push_back(test::random_array(v.type, rng));
    testing::RunResult want, got;
    std::string want_error, got_error;
    try {
      want = testing::run_reference(*g, args, vars);
    } catch (const Error& e) {
      want_error = e.what();
    }
    try {
      got = testing::run_compiled(*g, args, vars);
    } catch (const Error& e) {
      got_error = e.what();
    }
    bool ok = want_error.empty() == got_error.empty();
    if (!ok)
      ADD_FAILURE() << "seed " << seed << ": reference error '" << want_error
                    << "', compiled error '" << got_error << "'";
    if (ok && want_error.empty()) {
      for (size_t i = 0; i < want.outputs.size(); ++i) {
        double rtol, atol;
        tolerance(want.outputs[i].dtype, rtol, atol);
        auto r = testing::all_close(got.outputs[i], want.outputs[i], rtol, atol);
        if (!r) {
          ok = false;
          ADD_FAILURE() << "seed " << seed << ", output " << i << ": " << r.message();
        }
      }
      for (size_t i = 0; i < want.variables.size(); ++i) {
        double rtol, atol;
        tolerance(want.variables[i].dtype, rtol, atol);
        auto r = testing::all_close(got.variables[i], want.variables[i], rtol, atol);
        if (!r) {
          ok = false;
          ADD_FAILURE() << "seed " << seed << ", variable " << i << ": " << r.message();
        }
      }
    }
    if (!ok) {
      ADD_FAILURE() << "seed " << seed << " (optimized graph):\n" << ir::print_graph(*g);
      ASSERT_LT(++failures, 5) << "stopping after 5 failing graphs";
    }
  }
}

}  // namespace
}  // namespace kiln
