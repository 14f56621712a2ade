// Concats whose pieces are not contiguous blocks of the result (an inner axis) gathered by
// the group computing their pieces (fusion rule 8, codegen/kernel_plan.h): after the optimize
// pipeline the concat is inside a fusion, nothing runs it as an op step, and the compiled
// results equal the reference executor (which runs the pieces, then the runtime's concat) bit
// for bit at 1, 2 and 3 threads. Graphs: an LSTM gate gradient (a product's epilogue computing
// four pieces of one shape, stored in one pass), pieces of several shapes (a pass each) with
// one also read elsewhere, a group that also reduces across rows (run serially), bf16 pieces,
// and a concat read back inside its group.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/support/error_bound.h"

namespace kiln {
namespace {

// Concat nodes outside fusion bodies, and concats inside them.
std::pair<int, int> concats(const ir::Graph& g) {
  int plain = 0, fused = 0;
  for (const auto& n : g.nodes()) {
    plain += n->is_op(OpKind::Concat);
    if (n->kind() == ir::NodeKind::kFusion)
      for (const auto& m : n->subgraph(0).nodes()) fused += m->is_op(OpKind::Concat);
  }
  return {plain, fused};
}

// An LSTM step's gate gradient: dh = dgates_next W^T, then four gate gradients from the gates'
// activations (`gate` for the input, forget and output gates, `cell` for the candidate),
// concatenated into the next dgates, and a cell-state gradient.
std::string lstm_gate_gradient(const char* gate, const char* cell) {
  return fmt::format(
      R"(graph @lstm_gates(%0: f32[32,256], %1: f32[256,64], %2: f32[32,256], %3: f32[32,64]) -> (f32[32,256], f32[32,64]) {{
  %4 = matmul(%0, %1) {{transpose_a=false, transpose_b=false}} : f32[32,64]
  %5 = slice(%2) {{start=[0, 0], stop=[32, 64], step=[1, 1]}} : f32[32,64]
  %6 = slice(%2) {{start=[0, 64], stop=[32, 128], step=[1, 1]}} : f32[32,64]
  %7 = slice(%2) {{start=[0, 128], stop=[32, 192], step=[1, 1]}} : f32[32,64]
  %8 = slice(%2) {{start=[0, 192], stop=[32, 256], step=[1, 1]}} : f32[32,64]
  %9 = {0}(%5) : f32[32,64]
  %10 = {0}(%6) : f32[32,64]
  %11 = {1}(%7) : f32[32,64]
  %12 = {0}(%8) : f32[32,64]
  %13 = mul(%4, %12) : f32[32,64]
  %14 = mul(%13, %11) : f32[32,64]
  %15 = mul(%13, %9) : f32[32,64]
  %16 = mul(%13, %10) : f32[32,64]
  %17 = mul(%13, %3) : f32[32,64]
  %18 = concat(%14, %15, %16, %17) {{axis=1}} : f32[32,256]
  %19 = add(%13, %3) : f32[32,64]
  return %18, %19
}})",
      gate, cell);
}

// Graphs of exact operations (a product, and ops whose float32 / bf16 result is one correct
// rounding), so that compiled and reference agree bit for bit.
const std::string kWindowGraphs[] = {
    // The gate gradient with exact activations (abs) in place of sigmoid and tanh.
    lstm_gate_gradient("abs", "abs"),
    // Pieces of several shapes along the last axis of a rank-3 value; the abs is a result too.
    R"(graph @uneven(%0: f32[3,17,5], %1: f32[3,17,11], %2: f32[3,17,1]) -> (f32[3,17,17], f32[3,17,11]) {
  %3 = mul(%0, %0) : f32[3,17,5]
  %4 = abs(%1) : f32[3,17,11]
  %5 = neg(%2) : f32[3,17,1]
  %6 = concat(%3, %4, %5) {axis=-1} : f32[3,17,17]
  return %6, %4
})",
    // The square is also reduced across rows: the group runs serially.
    R"(graph @serial(%0: f32[33,20], %1: f32[33,12]) -> (f32[33,32], f32[20]) {
  %2 = mul(%0, %0) : f32[33,20]
  %3 = constant dense<0.5> : f32[]
  %4 = mul(%1, %3) : f32[33,12]
  %5 = concat(%2, %4) {axis=1} : f32[33,32]
  %6 = max(%2) {axes=[0], keepdims=false} : f32[20]
  return %5, %6
})",
    R"(graph @bf16(%0: bf16[40,64], %1: bf16[40,64]) -> (bf16[40,128]) {
  %2 = add(%0, %1) : bf16[40,64]
  %3 = mul(%0, %1) : bf16[40,64]
  %4 = concat(%2, %3) {axis=1} : bf16[40,128]
  return %4
})"};

TEST(ConcatWindows, PiecesAreStoredInTheirWindowsAndGiveTheReferenceBits) {
  for (const std::string& text : kWindowGraphs) {
    testing::ScopedCacheDir cache;
    auto g = testing::optimized_graph(text);
    EXPECT_EQ(concats(*g), std::make_pair(0, 1)) << ir::print_graph(*g);
    auto exe = codegen::compile_graph(*g);
    for (const auto& s : exe->steps())
      EXPECT_FALSE(s.kind == runtime::ExecutableStep::Kind::kOp && s.op == OpKind::Concat)
          << s.name;
    testing::expect_bitwise_at_thread_counts(*g, testing::random_args(*g, 5), text);
  }
}

// The LSTM gate gradient as it is (sigmoid and tanh recomputed from the pre-activations, each
// once per element in the pass that stores the four pieces): within the reference's error
// bounds at 1, 2 and 3 threads, and the same bits at every thread count.
TEST(ConcatWindows, TheLstmGateGradientAgreesWithTheReference) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(lstm_gate_gradient("sigmoid", "tanh"));
  EXPECT_EQ(concats(*g), std::make_pair(0, 1)) << ir::print_graph(*g);
  const std::vector<runtime::Array> args = testing::random_args(*g, 8);
  testing::ErrorBoundedReference want(*g, args, {}, 8);
  std::vector<runtime::Array> first;
  const int before = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const testing::RunResult got = testing::run_compiled(*g, args, {});
    EXPECT_TRUE(want.check(got.outputs)) << threads << " threads";
    if (first.empty()) first = got.outputs;
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(got.outputs[i], first[i])) << threads << " threads";
  }
  set_num_threads(before);
}

// A group may read its concat back (a hand-made fusion: the fusion pass never builds one, but
// kernels take any body): the kernel stores the concat, then its reader loads it. Along an inner
// axis the kernel runs by rows, along the leading axis serially.
TEST(ConcatWindows, AGroupReadingItsConcatLoadsItBack) {
  for (int axis : {0, 1}) {
    testing::ScopedCacheDir cache;
    const std::string result = axis == 1 ? "f32[9,12]" : "f32[18,6]";
    const std::string text = fmt::format(R"(graph @g(%0: f32[9,6], %1: f32[9,6]) -> ({0}) {{
  %2 = fusion(%0, %1) : {0} kind("loop") @fused_abs_concat_neg_0 {{
    body (%0: f32[9,6], %1: f32[9,6]) -> ({0}) {{
      %2 = abs(%0) : f32[9,6]
      %3 = concat(%2, %1) {{axis={1}}} : {0}
      %4 = neg(%3) : {0}
      return %4
    }}
  }}
  return %2
}})",
                                         result, axis);
    auto g = ir::parse_graph(text, "concat read back");
    testing::expect_bitwise_at_thread_counts(*g, testing::random_args(*g, 6), text);
  }
}

}  // namespace
}  // namespace kiln
