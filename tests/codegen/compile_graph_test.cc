// Whole graphs through codegen (fusion kernels, contraction epilogues, eager fallbacks,
// assignments, control flow) against the reference executor, within the error bounds of
// tests/support/error_bound.h.
#include <gtest/gtest.h>

#include "tests/codegen/codegen_test_util.h"
#include "tests/support/error_bound.h"

namespace kiln {
namespace {

// Compiled outputs, then variables, against the float64 reference and its bounds.
::testing::AssertionResult compiled_within_bounds(const ir::Graph& g,
                                                  const std::vector<runtime::Array>& args,
                                                  const std::vector<runtime::Array>& vars) {
  testing::ErrorBoundedReference want(g, args, vars, 1);
  testing::RunResult got = testing::run_compiled(g, args, vars);
  std::vector<runtime::Array> results = got.outputs;
  results.insert(results.end(), got.variables.begin(), got.variables.end());
  return want.check(results);
}

TEST(CompileGraph, ElementwiseChain) {
  auto g = testing::optimized_graph(R"(graph @f(%0: f32[17,33], %1: f32[33]) -> (f32[17,33]) {
  %2 = add(%0, %1) : f32[17,33]
  %3 = tanh(%2) : f32[17,33]
  %4 = mul(%3, %0) : f32[17,33]
  return %4
})");
  std::mt19937 rng(1);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng),
                                      testing::random_array(g->parameter(1)->type(), rng)};
  EXPECT_TRUE(compiled_within_bounds(*g, args, {}));
}

TEST(CompileGraph, AffineWithVariable) {
  auto g = testing::optimized_graph(R"(graph @affine(%0: f32[5,3]) -> (f32[5,2]) {
  variables {
    $0 = "layer/w" : f32[3,2] read write -> %1
  }
  %2 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[5,2]
  %3 = constant dense<[1.0, -1.0]> : f32[2]
  %4 = add(%2, %3) : f32[5,2]
  %5 = relu(%4) : f32[5,2]
  %6 = constant dense<0.5> : f32[3,2]
  %7 = assign_add $0, %6 : f32[3,2]
  return %5
})");
  std::mt19937 rng(2);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  std::vector<runtime::Array> vars = {testing::random_array(g->variable(0).type, rng)};
  EXPECT_TRUE(compiled_within_bounds(*g, args, vars));
}

TEST(CompileGraph, LayerNormRows) {
  auto g = testing::optimized_graph(R"(graph @ln(%0: f32[64,256]) -> (f32[64,256]) {
  %1 = mean(%0) {axes=[-1], keepdims=true} : f32[64,1]
  %2 = sub(%0, %1) : f32[64,256]
  %3 = square(%2) : f32[64,256]
  %4 = mean(%3) {axes=[-1], keepdims=true} : f32[64,1]
  %5 = constant dense<1e-5> : f32[]
  %6 = add(%4, %5) : f32[64,1]
  %7 = rsqrt(%6) : f32[64,1]
  %8 = mul(%2, %7) : f32[64,256]
  return %8
})");
  std::mt19937 rng(3);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  EXPECT_TRUE(compiled_within_bounds(*g, args, {}));
}

}  // namespace
}  // namespace kiln
