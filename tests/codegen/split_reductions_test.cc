// split-reductions in the compile path (passes/split_reductions.h): a bias gradient's column sum
// over every axis but the last is summed per leading index inside the kernel that computes its
// operand, which runs by rows, and the parts are then added. The results are the same bits at 1,
// 2 and 3 threads (the parts are fixed by the shape), and within the bound of float32 summation
// in any order of the exact (float64) sums; a bf16 sum is the float32 sum rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kiln/codegen/decompose.h"
#include "kiln/codegen/kernel_plan.h"
#include "kiln/ir/bfloat16.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/profiler.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

// A ReLU's gradient d and its bias gradient sum(d) (16 images of 20 x 20 pixels, 16 channels).
constexpr const char* kBiasGradient =
    R"(graph @bias_grad(%x: f32[16,20,20,16], %b: f32[16], %g: f32[16,20,20,16]) -> (f32[16,20,20,16], f32[16]) {
  %a = add(%x, %b) : f32[16,20,20,16]
  %r = relu(%a) : f32[16,20,20,16]
  %zero = constant dense<0.0> : f32[]
  %p = greater(%r, %zero) : bool[16,20,20,16]
  %d = select(%p, %g, %zero) : f32[16,20,20,16]
  %s = sum(%d) {axes=[0, 1, 2], keepdims=false} : f32[16]
  return %d, %s
})";

// The fusion whose body computes `op` and the part sums (sum over axis 1), or null.
const ir::Node* fusion_with_part_sums(const ir::Graph& g, OpKind op) {
  for (const auto& n : g.nodes()) {
    if (n->kind() != ir::NodeKind::kFusion) continue;
    bool computes = false, part_sums = false;
    for (const auto& m : n->subgraph(0).nodes()) {
      computes = computes || m->is_op(op);
      part_sums = part_sums || (m->is_op(OpKind::Sum) &&
                                m->attrs().get_ints("axes", "sum") == std::vector<int64_t>{1});
    }
    if (computes && part_sums) return n.get();
  }
  return nullptr;
}

// The compiled graph's outputs at 1, 2 and 3 threads: the same bits each time.
std::vector<runtime::Array> run_at_thread_counts(const ir::Graph& g,
                                                 const std::vector<runtime::Array>& args) {
  auto exe = codegen::compile_graph(g);
  const int threads = num_threads();
  std::vector<runtime::Array> first;
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    std::vector<runtime::Array> vars;
    std::vector<runtime::Array> got = exe->run(args, vars);
    if (first.empty()) first = got;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(got[i], first[i]))
          << "output " << i << ", " << t << " threads against 1";
  }
  set_num_threads(threads);
  return first;
}

// Each sum against its exact value: float32 summation of its n terms in any order is within
// gamma_n * sum |term| (Higham), with u = 2^-24.
void expect_within_summation_bound(const runtime::Array& d, const runtime::Array& s,
                                   double extra_relative) {
  const int64_t columns = s.size(), terms = d.size() / columns;
  const double u = std::ldexp(1.0, -24), gamma = double(terms) * u / (1 - double(terms) * u);
  for (int64_t c = 0; c < columns; ++c) {
    double exact = 0, magnitude = 0;
    for (int64_t r = 0; r < terms; ++r) {
      exact += testing::element(d, r * columns + c);
      magnitude += std::abs(testing::element(d, r * columns + c));
    }
    const double got = testing::element(s, c);
    EXPECT_LE(std::abs(got - exact), gamma * magnitude + extra_relative * std::abs(exact))
        << "column " << c << ": got " << got << ", exact " << exact;
  }
}

TEST(SplitReductions, BiasGradientSumsByRowsInTheKernelComputingItsOperand) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(kBiasGradient);
  const ir::Node* kernel = fusion_with_part_sums(*g, OpKind::Select);
  ASSERT_NE(kernel, nullptr) << ir::print_graph(*g);
  auto body = codegen::decompose_for_codegen(kernel->subgraph(0));
  EXPECT_EQ(codegen::plan_kernel(*body).mode, codegen::IterationMode::kRows) << ir::print_graph(*g);
  const std::vector<runtime::Array> out = run_at_thread_counts(*g, testing::random_args(*g, 11));
  expect_within_summation_bound(out[0], out[1], 0);
}

// The same gradient in bf16: summed as float32 per part and in all, rounded to bf16 once.
TEST(SplitReductions, Bf16SumsAccumulateInFloat32AndRoundOnce) {
  testing::ScopedCacheDir cache;
  std::string text = kBiasGradient;
  for (size_t at = text.find("f32"); at != std::string::npos; at = text.find("f32", at + 4))
    text.replace(at, 3, "bf16");
  auto g = testing::optimized_graph(text);
  ASSERT_NE(fusion_with_part_sums(*g, OpKind::Select), nullptr) << ir::print_graph(*g);
  const std::vector<runtime::Array> out = run_at_thread_counts(*g, testing::random_args(*g, 12));
  // One rounding to bf16 on top of the float32 sum: 2^-8 of the result.
  expect_within_summation_bound(out[0], out[1], std::ldexp(1.0, -8));
}

// A convolution's input gradient and a Dense layer's, each followed by a ReLU gradient whose bias
// gradient is summed: the part sums join the product's group as its epilogue (fusion rule 5),
// finishing each image's or row block's part right after it; the same bits at any thread
// count, within the summation bound.
constexpr const char* kContractionEpilogues[] = {
    R"(graph @conv_grad(%w: f32[3,3,8,16], %dy: f32[16,24,24,16], %pre: f32[16,24,24,8], %b: f32[8]) -> (f32[16,24,24,8], f32[8]) {
  %dx = conv2d_backprop_input(%w, %dy) {strides=[1, 1], dilations=[1, 1], padding="same", input_shape=[16, 24, 24, 8]} : f32[16,24,24,8]
  %a = add(%pre, %b) : f32[16,24,24,8]
  %zero = constant dense<0.0> : f32[]
  %p = greater(%a, %zero) : bool[16,24,24,8]
  %d = select(%p, %dx, %zero) : f32[16,24,24,8]
  %s = sum(%d) {axes=[0, 1, 2], keepdims=false} : f32[8]
  return %d, %s
})",
    R"(graph @dense_grad(%dz: f32[64,10], %k: f32[2048,10], %pre: f32[64,16,8,16]) -> (f32[64,16,8,16], f32[16]) {
  %g = matmul(%dz, %k) {transpose_a=false, transpose_b=true} : f32[64,2048]
  %r = reshape(%g) {shape=[64, 16, 8, 16]} : f32[64,16,8,16]
  %zero = constant dense<0.0> : f32[]
  %p = greater(%pre, %zero) : bool[64,16,8,16]
  %d = select(%p, %r, %zero) : f32[64,16,8,16]
  %s = sum(%d) {axes=[0, 1, 2], keepdims=false} : f32[16]
  return %d, %s
})"};

TEST(SplitReductions, PartSumsFinishAContractionsRowsInItsEpilogue) {
  for (const char* text : kContractionEpilogues) {
    SCOPED_TRACE(text);
    testing::ScopedCacheDir cache;
    auto g = testing::optimized_graph(text);
    const ir::Node* group = fusion_with_part_sums(*g, OpKind::Select);
    ASSERT_NE(group, nullptr) << ir::print_graph(*g);
    EXPECT_EQ(group->attrs().get_string("kind", "fusion"), "contraction") << ir::print_graph(*g);
    const std::vector<runtime::Array> args = testing::random_args(*g, 13);
    const std::vector<runtime::Array> out = run_at_thread_counts(*g, args);
    expect_within_summation_bound(out[0], out[1], 0);
    // The epilogue runs with the product's rows, not as a pass of its own after it.
    auto exe = codegen::compile_graph(*g);
    std::vector<runtime::Array> vars;
    runtime::start_profiling();
    exe->run(args, vars);
    for (const runtime::ProfileEvent& e : runtime::stop_profiling())
      EXPECT_NE(e.category, "epilogue") << e.name;
  }
}

// A product whose rows are not the parts' (a Dense layer on sequences as one [512, 256] product
// whose bias gradient sums 16 sequences of 32 positions): the part sums stay out of its group,
// whose epilogue runs by the product's rows; the values as above.
TEST(SplitReductions, PartSumsOfOtherRowsStayOutOfTheProductsGroup) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(
      R"(graph @sequence_grad(%dz: f32[512,32], %k: f32[256,32]) -> (f32[512,256], f32[256]) {
  %d = matmul(%dz, %k) {transpose_a=false, transpose_b=true} : f32[512,256]
  %r = reshape(%d) {shape=[16, 32, 256]} : f32[16,32,256]
  %s = sum(%r) {axes=[0, 1], keepdims=false} : f32[256]
  return %d, %s
})");
  EXPECT_EQ(fusion_with_part_sums(*g, OpKind::MatMul), nullptr) << ir::print_graph(*g);
  EXPECT_NE(ir::print_graph(*g).find("part_sums"), std::string::npos) << ir::print_graph(*g);
  const std::vector<runtime::Array> out = run_at_thread_counts(*g, testing::random_args(*g, 14));
  expect_within_summation_bound(out[0], out[1], 0);
}

}  // namespace
}  // namespace kiln
