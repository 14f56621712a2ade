// Kernels by rows whose values share passes over the row, keep exponentials in a row buffer
// (codegen/row_passes.h), and stream their outputs (KernelPlan::streaming_stores): each form
// against the float64 reference with error bounds (tests/support/error_bound.h), and the plan
// and code that make them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <random>
#include <string>

#include "kiln/codegen/decompose.h"
#include "kiln/codegen/jit.h"
#include "kiln/codegen/kernel_plan.h"
#include "kiln/codegen/lower_kernel.h"
#include "kiln/codegen/row_passes.h"
#include "kiln/codegen/target.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/support/error_bound.h"

namespace kiln {
namespace {

using runtime::Array;

// Sparse softmax cross-entropy (mean over rows) and its gradient of the logits, as traced by
// losses::sparse_categorical_crossentropy and GradientTape.
std::string softmax_xent_graph(int64_t rows, int64_t cols) {
  return fmt::format(R"(graph @f(%0: f32[{0},{1}], %1: i64[{0}]) -> (f32[], f32[{0},{1}]) {{
  %2 = log_softmax(%0) {{axis=-1}} : f32[{0},{1}]
  %3 = one_hot(%1) {{depth={1}, dtype=f32}} : f32[{0},{1}]
  %4 = mul(%3, %2) : f32[{0},{1}]
  %5 = sum(%4) {{axes=[-1], keepdims=false}} : f32[{0}]
  %6 = neg(%5) : f32[{0}]
  %7 = mean(%6) {{axes=[], keepdims=false}} : f32[]
  %8 = constant dense<{2}> : f32[{0},{1}]
  %9 = mul(%8, %3) : f32[{0},{1}]
  %10 = sum(%9) {{axes=[-1], keepdims=true}} : f32[{0},1]
  %11 = exp(%2) : f32[{0},{1}]
  %12 = mul(%11, %10) : f32[{0},{1}]
  %13 = sub(%9, %12) : f32[{0},{1}]
  return %7, %13
}})",
                     rows, cols, -1.0 / double(rows));
}

// The per-row part (the kernel body fusion makes of it): row losses and the gradient.
std::string softmax_xent_body(int64_t rows, int64_t cols) {
  return fmt::format(R"(graph @k(%0: f32[{0},{1}], %1: i64[{0}]) -> (f32[{0}], f32[{0},{1}]) {{
  %2 = log_softmax(%0) {{axis=-1}} : f32[{0},{1}]
  %3 = one_hot(%1) {{depth={1}, dtype=f32}} : f32[{0},{1}]
  %4 = mul(%3, %2) : f32[{0},{1}]
  %5 = sum(%4) {{axes=[-1], keepdims=false}} : f32[{0}]
  %6 = constant dense<-0.125> : f32[{0},{1}]
  %7 = mul(%6, %3) : f32[{0},{1}]
  %8 = sum(%7) {{axes=[-1], keepdims=true}} : f32[{0},1]
  %9 = exp(%2) : f32[{0},{1}]
  %10 = mul(%9, %8) : f32[{0},{1}]
  %11 = sub(%7, %10) : f32[{0},{1}]
  return %5, %11
}})",
                     rows, cols);
}

// Logits: normal * `scale`, a few rows shifted by +-60 (large exponent arguments), labels in
// range except one -1 and one == depth (all-zero one_hot rows).
std::vector<Array> xent_inputs(const ir::Graph& g, double scale, uint64_t seed) {
  std::mt19937 rng{uint32_t(seed)};
  std::normal_distribution<double> n(0, scale);
  Array x = Array::empty(g.parameter(0)->type()), l = Array::empty(g.parameter(1)->type());
  const int64_t rows = x.shape[0], cols = x.shape[1];
  float* px = x.data<float>();
  int64_t* pl = l.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const double shift = r % 5 == 1 ? 60 : r % 5 == 3 ? -60 : 0;
    for (int64_t c = 0; c < cols; ++c) px[r * cols + c] = float(n(rng) + shift);
    pl[r] = int64_t(rng() % uint64_t(cols));
  }
  pl[0] = -1;
  if (rows > 2) pl[2] = cols;
  return {x, l};
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RowPasses, SoftmaxCrossEntropyReadsEachRowThreeTimesWithOneExp) {
  auto body = ir::parse_graph(softmax_xent_body(8, 37), "test");
  auto g = codegen::decompose_for_codegen(*body);
  codegen::KernelPlan plan = codegen::plan_kernel(*g);
  ASSERT_EQ(plan.mode, codegen::IterationMode::kRows);
  codegen::RowPlan rows = codegen::plan_row_passes(*g, plan, {});
  // max and sum(c * one_hot); exp (into the row buffer) and its sum; loss and gradient.
  ASSERT_EQ(rows.passes.size(), 3u);
  for (const auto& pass : rows.passes) EXPECT_TRUE(pass.shared);
  EXPECT_EQ(rows.passes[0].values.size(), 2u);
  EXPECT_EQ(rows.passes[1].values.size(), 2u);
  EXPECT_EQ(rows.passes[2].values.size(), 2u);
  ASSERT_EQ(rows.row_buffers.size(), 1u);
  EXPECT_EQ(rows.row_buffers[0]->producer()->op(), OpKind::Exp);
  // One exp call site in the unoptimized kernel (the definition is the other mention), one log.
  codegen::LoweredKernel k = codegen::lower_kernel(*body, "k");
  std::string ir = codegen::module_text(*k.module.module);
  EXPECT_EQ(count(ir, "@kiln.math.exp.f32("), 2) << ir;
  EXPECT_EQ(count(ir, "@kiln.math.log.f32("), 2) << ir;
}

TEST(RowPasses, SoftmaxCrossEntropyAndGradientWithinTheirBounds) {
  testing::ScopedCacheDir cache;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{7, 37}, {64, 1000}, {3, 16}}) {
    for (double scale : {1.0, 8.0}) {
      SCOPED_TRACE(fmt::format("[{}, {}] scale {}", rows, cols, scale));
      auto g = testing::optimized_graph(softmax_xent_graph(rows, cols));
      std::vector<Array> args = xent_inputs(*g, scale, uint64_t(rows * cols));
      testing::ErrorBoundedReference want(*g, args, {}, 3);
      EXPECT_TRUE(want.check(testing::run_compiled(*g, args, {}).outputs));
    }
  }
}

// The kernel body alone (its rows are the shared passes), NaN and infinities in some rows.
TEST(RowPasses, SoftmaxCrossEntropyBodyWithSpecialValues) {
  testing::ScopedCacheDir cache;
  auto g = ir::parse_graph(softmax_xent_body(6, 40), "test");
  std::vector<Array> args = xent_inputs(*g, 2.0, 11);
  float* px = args[0].data<float>();
  px[1 * 40 + 3] = -INFINITY;                   // a masked logit: probability 0
  px[3 * 40 + 5] = NAN;                         // NaN row
  px[4 * 40 + 0] = px[4 * 40 + 9] = -INFINITY;  // two masked logits
  testing::ErrorBoundedReference want(*g, args, {}, 4);
  EXPECT_TRUE(want.check(testing::run_compiled(*g, args, {}).outputs));
}

// A value of a shared pass read at other indices of its row by another value of that pass
// (through a transpose of the inner axes) is recomputed there, not read before it is stored.
TEST(RowPasses, ValueReadElsewhereInItsPassIsRecomputed) {
  testing::ScopedCacheDir cache;
  auto g = ir::parse_graph(R"(graph @f(%x: f32[5,6,6]) -> (f32[5,6,6], f32[5,6,6], f32[5]) {
  %e = exp(%x) : f32[5,6,6]
  %t = transpose(%e) {perm=[0,2,1]} : f32[5,6,6]
  %w = sub(%t, %x) : f32[5,6,6]
  %s = sum(%w) {axes=[1,2], keepdims=false} : f32[5]
  return %e, %w, %s
})",
                           "test");
  auto d = codegen::decompose_for_codegen(*g);
  codegen::KernelPlan plan = codegen::plan_kernel(*d);
  ASSERT_EQ(plan.mode, codegen::IterationMode::kRows);
  codegen::RowPlan rows = codegen::plan_row_passes(*d, plan, {});
  ASSERT_EQ(rows.passes.size(), 1u);
  EXPECT_EQ(rows.passes[0].values.size(), 3u);
  std::mt19937 rng(5);
  std::vector<Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  testing::ErrorBoundedReference want(*g, args, {}, 6);
  EXPECT_TRUE(want.check(testing::run_compiled(*g, args, {}).outputs));
}

std::string layer_norm_gelu(int64_t rows, int64_t cols) {
  return fmt::format(
      R"(graph @f(%x: f32[{0},{1}], %g: f32[{1}], %b: f32[{1}], %r: f32[{0},{1}]) -> (f32[{0},{1}]) {{
  %mu = mean(%x) {{axes=[-1], keepdims=true}} : f32[{0},1]
  %d = sub(%x, %mu) : f32[{0},{1}]
  %sq = square(%d) : f32[{0},{1}]
  %var = mean(%sq) {{axes=[-1], keepdims=true}} : f32[{0},1]
  %eps = constant dense<1e-05> : f32[]
  %ve = add(%var, %eps) : f32[{0},1]
  %rs = rsqrt(%ve) : f32[{0},1]
  %n = mul(%d, %rs) : f32[{0},{1}]
  %s = mul(%n, %g) : f32[{0},{1}]
  %a = add(%s, %b) : f32[{0},{1}]
  %y = gelu(%a) {{approximate=true}} : f32[{0},{1}]
  %o = add(%y, %r) : f32[{0},{1}]
  return %o
}})",
      rows, cols);
}

// 1024 x 3072: x, r and the output span 36 MiB, so the output is streamed (non-temporal
// vector stores where LLVM knows the row is aligned), and the results stay within bounds.
TEST(StreamingStores, LargeLayerNormGeluIsStreamedAndWithinBounds) {
  testing::ScopedCacheDir cache;
  for (int64_t rows : {int64_t{1024}, int64_t{8}}) {
    SCOPED_TRACE(rows);
    auto g = ir::parse_graph(layer_norm_gelu(rows, 3072), "test");
    auto d = codegen::decompose_for_codegen(*g);
    const bool large = rows == 1024;
    EXPECT_EQ(codegen::plan_kernel(*d).streaming_stores, large);
    codegen::LoweredKernel k = codegen::lower_kernel(*g, "k");
    codegen::optimize_module(k.module);
    std::string ir = codegen::module_text(*k.module.module);
    EXPECT_EQ(ir.find("!nontemporal") != std::string::npos, large) << ir;
    const std::string& features = codegen::current_target()->features;
    if (large && features.find("avx") != std::string::npos) {
      std::string asm_text = codegen::emit_assembly(k.module);
      EXPECT_NE(asm_text.find("vmovntps"), std::string::npos) << asm_text;
      EXPECT_NE(asm_text.find("mfence"), std::string::npos) << asm_text;
    }
    std::mt19937 rng(9);
    std::vector<Array> args;
    for (const auto& p : g->parameters()) args.push_back(testing::random_array(p->type(), rng));
    testing::ErrorBoundOptions options;
    options.samples = 2;
    testing::ErrorBoundedReference want(*g, args, {}, 8, options);
    EXPECT_TRUE(want.check(testing::run_compiled(*g, args, {}).outputs));
  }
}

}  // namespace
}  // namespace kiln
