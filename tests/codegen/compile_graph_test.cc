// Whole graphs through codegen (fusion kernels, contraction epilogues, eager fallbacks,
// assignments, control flow) against the reference executor.
#include <gtest/gtest.h>

#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using testing::all_close;

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
  auto want = testing::run_reference(*g, args, {});
  auto got = testing::run_compiled(*g, args, {});
  EXPECT_TRUE(all_close(got.outputs[0], want.outputs[0], 1e-6, 1e-6));
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
  auto want = testing::run_reference(*g, args, vars);
  auto got = testing::run_compiled(*g, args, vars);
  EXPECT_TRUE(all_close(got.outputs[0], want.outputs[0], 1e-5, 1e-6));
  EXPECT_TRUE(all_close(got.variables[0], want.variables[0], 0, 0));
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
  auto want = testing::run_reference(*g, args, {});
  auto got = testing::run_compiled(*g, args, {});
  EXPECT_TRUE(all_close(got.outputs[0], want.outputs[0], 1e-4, 1e-5));
}

}  // namespace
}  // namespace kiln
