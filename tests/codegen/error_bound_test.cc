// Tests of the error-bound checker (tests/support/error_bound.h) that the codegen tests use
// instead of fixed tolerances: its bounds are tight where nothing amplifies rounding, wide
// where the computation is ill-conditioned, and a kernel with a real error (a wrong constant,
// a dropped term) still fails it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/codegen/random_fused_graph.h"
#include "tests/support/error_bound.h"

namespace kiln {
namespace {

using runtime::Array;

// y = v - 3 * tanh(layer_norm(x)): results near 0 from terms near 3, and a layer norm whose
// rows have a small variance (the graph that failed with fixed tolerances on Zen 5).
// `eps` and `three` are the constants a faulty kernel might get wrong.
std::string layer_norm_graph(const std::string& eps, const std::string& three) {
  return R"(graph @f(%x: f32[8,32], %v: f32[8,32]) -> (f32[8,32]) {
  %mu = mean(%x) {axes=[-1], keepdims=true} : f32[8,1]
  %d = sub(%x, %mu) : f32[8,32]
  %sq = square(%d) : f32[8,32]
  %var = mean(%sq) {axes=[-1], keepdims=true} : f32[8,1]
  %eps = constant dense<)" +
         eps + R"(> : f32[]
  %ve = add(%var, %eps) : f32[8,1]
  %rs = rsqrt(%ve) : f32[8,1]
  %nrm = mul(%d, %rs) : f32[8,32]
  %t = tanh(%nrm) : f32[8,32]
  %three = constant dense<)" +
         three + R"(> : f32[]
  %s = mul(%t, %three) : f32[8,32]
  %y = sub(%v, %s) : f32[8,32]
  return %y
})";
}

// x: rows of 1 + 0.01 * noise (small variance); v: 3 * tanh of the normalised row, so y ~ 0.
std::vector<Array> layer_norm_inputs(const ir::Graph& g) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  Array x = Array::empty(g.parameter(0)->type()), v = Array::empty(g.parameter(1)->type());
  float* px = x.data<float>();
  float* pv = v.data<float>();
  for (int64_t i = 0; i < x.size(); ++i) {
    px[i] = float(1 + 0.01 * u(rng));
    pv[i] = float(3 * std::tanh(u(rng) * 1.7) + 1e-3 * u(rng));
  }
  return {x, v};
}

Array first_output(const ir::Graph& g, const std::vector<Array>& args) {
  return testing::run_compiled(g, args, {}).outputs[0];
}

TEST(ErrorBound, CompiledLayerNormPassesAndWrongKernelsFail) {
  testing::ScopedCacheDir cache;
  auto good = testing::optimized_graph(layer_norm_graph("1e-05", "3.0"));
  std::vector<Array> args = layer_norm_inputs(*good);
  testing::ErrorBoundedReference want(*good, args, {}, 1);
  EXPECT_TRUE(want.check({first_output(*good, args)}));

  // A wrong constant 1e-4 relative (3.0003 for 3) and a dropped term (the epsilon of the
  // variance, 1e-5 against variances near 3e-5): each moves results far beyond the bounds.
  auto wrong_constant = testing::optimized_graph(layer_norm_graph("1e-05", "3.0003"));
  EXPECT_FALSE(want.check({first_output(*wrong_constant, args)}));
  auto dropped_eps = testing::optimized_graph(layer_norm_graph("0.0", "3.0"));
  EXPECT_FALSE(want.check({first_output(*dropped_eps, args)}));
}

// Where nothing amplifies rounding the bound is a few ulps; through the small-variance layer
// norm it is much wider (the amplification, not a fixed number, sets it).
TEST(ErrorBound, BoundsFollowTheConditioning) {
  auto simple = ir::parse_graph(R"(graph @f(%x: f32[64]) -> (f32[64]) {
  %c = constant dense<3.0> : f32[]
  %y = mul(%x, %c) : f32[64]
  %z = add(%y, %x) : f32[64]
  return %z
})",
                                "simple");
  std::mt19937 rng(3);
  std::vector<Array> args = {testing::random_array(simple->parameter(0)->type(), rng, 0.5, 2)};
  testing::ErrorBoundedReference tight(*simple, args, {}, 1);
  for (size_t i = 0; i < 64; ++i) {
    double y = std::abs(tight.float64_value(0, i));
    EXPECT_LE(tight.bound(0, i), 40 * 0x1p-24 * y) << "element " << i;  // <= 20 ulp
    EXPECT_GT(tight.bound(0, i), 0x1p-24 * y) << "element " << i;
  }

  auto ln = ir::parse_graph(layer_norm_graph("1e-05", "3.0"), "layer_norm");
  std::vector<Array> ln_args = layer_norm_inputs(*ln);
  testing::ErrorBoundedReference wide(*ln, ln_args, {}, 1);
  double widest = 0;
  for (size_t i = 0; i < 256; ++i) widest = std::max(widest, wide.bound(0, i));
  // terms near 3 (ulp 2.4e-7) divided by a standard deviation near 0.006: far above 3's ulp
  EXPECT_GT(widest, 20 * 0x1p-22);
}

// A result that needs more than the first samples to be judged fairly gets them: the checker
// draws more before it reports a failure, and the same seed gives the same bounds.
TEST(ErrorBound, DeterministicAndResamplesBeforeFailing) {
  auto g = ir::parse_graph(layer_norm_graph("1e-05", "3.0"), "layer_norm");
  std::vector<Array> args = layer_norm_inputs(*g);
  testing::ErrorBoundedReference a(*g, args, {}, 5), b(*g, args, {}, 5);
  for (size_t i = 0; i < 256; ++i) EXPECT_EQ(a.bound(0, i), b.bound(0, i));
  // The float64 values rounded to float32 pass; element 0 moved by 5 bounds does not.
  Array near = Array::empty(DType::f32, Shape{8, 32});
  for (size_t i = 0; i < 256; ++i) near.data<float>()[i] = float(a.float64_value(0, i));
  EXPECT_TRUE(a.check({near}));
  EXPECT_EQ(a.samples(), testing::ErrorBoundOptions{}.samples);
  Array off = testing::copy_of(near);
  off.data<float>()[0] = float(a.float64_value(0, 0) + 5 * a.bound(0, 0));
  EXPECT_FALSE(a.check({off}));
  EXPECT_EQ(a.samples(), testing::ErrorBoundOptions{}.max_samples);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The failure that fixed tolerances gave on an AMD Zen 5 (znver5, AVX-512): random fused graph
// 84, output 0, element 409 = v - 3 * tanh(layer_norm(...)) compiled there to 0.0315873 where
// the float32 reference gives 0.0315711 (rtol 1e-4 failed). The float64 value and the bound
// show that the Zen 5 result is a correct rounding, and a result 10x further off is not.
TEST(ErrorBound, Zen5ResultOfRandomGraph84IsWithinItsBound) {
  std::unique_ptr<ir::Graph> g = testing::random_fused_graph(84);
  passes::optimize_pipeline({}).run(*g);
  std::mt19937_64 rng(84);
  std::vector<Array> args, vars;
  for (const auto& p : g->parameters())
    args.push_back(testing::RandomFusedGraphBuilder::input(p->type(), rng));
  for (const auto& v : g->variables())
    vars.push_back(testing::RandomFusedGraphBuilder::input(v.type, rng));
  testing::ErrorBoundedReference want(*g, args, vars, 84);
  ASSERT_GT(want.float32_results()[0].size(), 409);
  // The float64 value (0.0315903) is nearer the Zen 5 result than the float32 reference.
  const double y64 = want.float64_value(0, 409);
  EXPECT_NEAR(y64, 0.03159, 1e-5);
  std::vector<Array> results;
  for (const Array& a : want.float32_results()) results.push_back(testing::copy_of(a));
  results[0].data<float>()[409] = 0.0315873f;
  EXPECT_TRUE(want.check(results));
  results[0].data<float>()[409] = float(y64 + 10 * want.bound(0, 409));
  EXPECT_FALSE(want.check(results));
}

}  // namespace
}  // namespace kiln
