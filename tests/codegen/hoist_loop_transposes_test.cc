// hoist-loop-transposes in the compile path: a loop whose body reads invariant weights
// transposed (as a recurrent layer's gradient loop does) compiles with the transposes made once
// before the loop, and gives bitwise the results of the same graph compiled without the pass
// (kiln's GEMM engine sums each element in the same order for either layout), and the
// reference executor's within the float32 rounding of the products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen_test_util.h"
#include "kiln/codegen/compile_driver.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln {
namespace {

// h <- tanh(h U^T V) + 0.5 h for 5 iterations (batch 32, 300 x 70 weights: k above the GEMM's
// packing thresholds and not a multiple of its blocks); acc += W (W^T (h^T h)) reads W
// transposed as an a operand (hoisted) and h transposed (a loop variable: not hoisted).
constexpr const char* kLoop = R"(
graph @loop(%h0: f32[32,300], %u: f32[70,300], %v: f32[70,300], %w: f32[300,32]) -> (f32[32,300], f32[300,300]) {
  %n = constant dense<5> : i64[]
  %acc0 = constant dense<0.0> : f32[300,300]
  %i_out, %h_out, %acc_out = while(%n, %h0, %acc0, %u, %v, %w) : i64[], f32[32,300], f32[300,300] {
    cond (%i: i64[], %h: f32[32,300], %acc: f32[300,300], %cu: f32[70,300], %cv: f32[70,300], %cw: f32[300,32]) -> (bool[]) {
      %zero = constant dense<0> : i64[]
      %p = greater(%i, %zero) : bool[]
      return %p
    }
    body (%i: i64[], %h: f32[32,300], %acc: f32[300,300], %cu: f32[70,300], %cv: f32[70,300], %cw: f32[300,32]) -> (i64[], f32[32,300], f32[300,300]) {
      %one = constant dense<1> : i64[]
      %j = sub(%i, %one) : i64[]
      %a = matmul(%h, %cu) {transpose_a=false, transpose_b=true} : f32[32,70]
      %b = matmul(%a, %cv) {transpose_a=false, transpose_b=false} : f32[32,300]
      %t = tanh(%b) : f32[32,300]
      %half = constant dense<0.5> : f32[]
      %s = mul(%h, %half) : f32[32,300]
      %next = add(%t, %s) : f32[32,300]
      %m = matmul(%next, %next) {transpose_a=true, transpose_b=false} : f32[300,300]
      %g = matmul(%cw, %m) {transpose_a=true, transpose_b=false} : f32[32,300]
      %o = matmul(%cw, %g) {transpose_a=false, transpose_b=false} : f32[300,300]
      %acc2 = add(%acc, %o) : f32[300,300]
      return %j, %next, %acc2
    }
  }
  return %h_out, %acc_out
}
)";

std::vector<runtime::Array> run_compiled(const ir::Graph& g,
                                         const std::vector<runtime::Array>& args, bool hoist,
                                         std::string* optimized_ir) {
  passes::PipelineOptions options;
  if (!hoist) options.disabled.insert("hoist-loop-transposes");
  codegen::CompiledFunction f = codegen::compile_function(g, g.parameter_types(), options);
  *optimized_ir = ir::print_graph(*f.optimized);
  std::vector<runtime::Array> vars;
  return f.code.executable->run(args, vars);
}

TEST(HoistLoopTransposesTest, CompiledLoopIsBitwiseUnchangedAndMatchesTheReference) {
  std::unique_ptr<ir::Graph> g = ir::parse_graph(kLoop);
  ir::verify_graph(*g);
  std::mt19937 rng(21);
  std::vector<runtime::Array> args;
  for (const TensorType& t : g->parameter_types())
    args.push_back(testing::random_array(t, rng, -0.05, 0.05));

  std::string with_ir, without_ir;
  std::vector<runtime::Array> with = run_compiled(*g, args, true, &with_ir);
  std::vector<runtime::Array> without = run_compiled(*g, args, false, &without_ir);
  // Both transposed captures (U read as b, W read as a) are hoisted; nothing is without it.
  EXPECT_EQ(std::string::npos, without_ir.find("hoisted_transpose"));
  size_t first = with_ir.find("hoisted_transpose");
  ASSERT_NE(std::string::npos, first) << with_ir;
  EXPECT_NE(std::string::npos, with_ir.find("hoisted_transpose", first + 1)) << with_ir;
  EXPECT_EQ(std::string::npos, with_ir.find("transpose_b=true")) << with_ir;
  // The one transposed read left is of the loop variable h (h^T h).
  size_t ta = with_ir.find("transpose_a=true");
  ASSERT_NE(std::string::npos, ta) << with_ir;
  EXPECT_EQ(std::string::npos, with_ir.find("transpose_a=true", ta + 1)) << with_ir;

  ASSERT_EQ(with.size(), without.size());
  for (size_t o = 0; o < with.size(); ++o) {
    ASSERT_EQ(with[o].size(), without[o].size());
    EXPECT_EQ(0, std::memcmp(with[o].raw(), without[o].raw(), with[o].nbytes())) << "output " << o;
  }
  // Against the reference executor. With weights in [-0.05, 0.05] the loop is a contraction
  // (|U^T V| about 0.25, plus 0.5 h), so rounding errors do not grow over the iterations: each
  // element's error stays below (iterations x terms on its path, 5 x 370) float32 roundings
  // of the magnitudes summed, taken as 4x the largest reference value (random signs cancel).
  std::vector<runtime::Array> vars;
  std::vector<runtime::Array> ref = runtime::execute_reference(*g, args, vars);
  const double eps = std::ldexp(1.0, -24);
  for (size_t o = 0; o < ref.size(); ++o) {
    double largest = 0;
    for (int64_t e = 0; e < ref[o].size(); ++e)
      largest = std::max(largest, std::abs(testing::element(ref[o], e)));
    EXPECT_TRUE(testing::all_close(with[o], ref[o], 0, 5 * 370 * eps * 4 * largest))
        << "output " << o;
  }
}

}  // namespace
}  // namespace kiln
