// fusion and lower-assignments keep results bitwise identical: the reference executor runs
// each graph before and after (fusion bodies run the same kernels in the same order) and
// every output and variable must match bit for bit. Also checks the kernel structure of the
// traced MLP training step (tests/passes/fusion_mlp_train_step.kir).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/reference_executor.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using runtime::Array;

// An array of type `t` (fully known shape) with reproducible contents; integer tensors get
// values in [0, int_range).
Array random_array(const TensorType& t, std::mt19937& rng, int64_t int_range) {
  Array a = Array::empty(t);
  int64_t n = a.size();
  switch (t.dtype) {
    case DType::f32: {
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = d(rng);
      break;
    }
    case DType::f64: {
      std::uniform_real_distribution<double> d(-1.0, 1.0);
      for (int64_t i = 0; i < n; ++i) a.data<double>()[i] = d(rng);
      break;
    }
    case DType::i64: {
      std::uniform_int_distribution<int64_t> d(0, int_range - 1);
      for (int64_t i = 0; i < n; ++i) a.data<int64_t>()[i] = d(rng);
      break;
    }
    default:
      ADD_FAILURE() << "no random values for " << t.to_string();
  }
  return a;
}

struct Result {
  std::vector<Array> outputs;
  std::vector<Array> variables;
};

// Runs `g` on inputs drawn from a fixed seed; variables that hold non-negative state
// (velocities, iteration counters) get their absolute values.
Result run(const Graph& g, int64_t int_range) {
  std::mt19937 rng(1234);
  std::vector<Array> args;
  for (const auto& p : g.parameters()) args.push_back(random_array(p->type(), rng, int_range));
  std::vector<Array> vars;
  for (const auto& v : g.variables()) {
    Array a = random_array(v.type, rng, int_range);
    if (v.type.dtype == DType::f32)
      for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = std::abs(a.data<float>()[i]);
    vars.push_back(a);
  }
  Result r;
  r.outputs = runtime::execute_reference(g, args, vars);
  r.variables = std::move(vars);
  return r;
}

void expect_bitwise_equal(const std::vector<Array>& a, const std::vector<Array>& b,
                          const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].type(), b[i].type()) << what << " " << i;
    EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()), 0)
        << what << " " << i << " differs";
  }
}

size_t count_fusions(const Graph& g) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node->kind() == NodeKind::kFusion;
  return n;
}

// Kernels: fusion nodes and op nodes outside fusions (constants and stores are not kernels).
size_t count_kernels(const Graph& g) {
  size_t n = 0;
  for (const auto& node : g.nodes())
    n += node->kind() == NodeKind::kFusion || node->kind() == NodeKind::kOp;
  return n;
}

// Parses `text`, runs the default pipeline (the baseline) and, on a second copy, the optimize
// pipeline; checks the results match bitwise. Returns the optimized graph.
std::unique_ptr<Graph> check_same_results(const std::string& text, int64_t int_range = 10) {
  PipelineOptions o;
  o.verify = true;
  auto before = ir::parse_graph(text);
  default_pipeline(o).run(*before);
  auto after = ir::parse_graph(text);
  optimize_pipeline(o).run(*after);
  ir::verify_graph(*after);
  EXPECT_EQ(ir::print_graph(*ir::parse_graph(ir::print_graph(*after))), ir::print_graph(*after));
  Result want = run(*before, int_range);
  Result got = run(*after, int_range);
  expect_bitwise_equal(want.outputs, got.outputs, "output");
  expect_bitwise_equal(want.variables, got.variables, "variable");
  return after;
}

TEST(FusionTest, ElementwiseChainIsOneFusionWithTheSameResults) {
  auto g = check_same_results(R"(
graph @chain(%x: f32[4,8], %b: f32[8]) -> (f32[4,8], f32[4,8]) {
  %a = add(%x, %b) : f32[4,8]
  %e = exp(%a) : f32[4,8]
  %r = relu(%e) : f32[4,8]
  %n = neg(%r) : f32[4,8]
  %m = mul(%e, %n) : f32[4,8]
  return %n, %m
}
)");
  EXPECT_EQ(count_fusions(*g), 1u);
  EXPECT_EQ(count_kernels(*g), 1u);
}

TEST(FusionTest, SoftmaxCrossEntropyAndLayerNormKeepTheirResults) {
  auto g = check_same_results(R"(
graph @loss(%logits: f32[8,10], %labels: i64[8], %x: f32[8,32], %gamma: f32[32]) -> (f32[], f32[8,32]) {
  %ls = log_softmax(%logits) {axis=-1} : f32[8,10]
  %oh = one_hot(%labels) {depth=10, dtype=f32} : f32[8,10]
  %m = mul(%oh, %ls) : f32[8,10]
  %s = sum(%m) {axes=[-1], keepdims=false} : f32[8]
  %n = neg(%s) : f32[8]
  %l = mean(%n) {axes=[], keepdims=false} : f32[]
  %mu = mean(%x) {axes=[-1], keepdims=true} : f32[8,1]
  %d = sub(%x, %mu) : f32[8,32]
  %sq = square(%d) : f32[8,32]
  %var = mean(%sq) {axes=[-1], keepdims=true} : f32[8,1]
  %eps = constant dense<1e-05> : f32[]
  %ve = add(%var, %eps) : f32[8,1]
  %rs = rsqrt(%ve) : f32[8,1]
  %nrm = mul(%d, %rs) : f32[8,32]
  %y = mul(%nrm, %gamma) : f32[8,32]
  return %l, %y
}
)");
  EXPECT_LE(count_fusions(*g), 4u);
}

TEST(FusionTest, ReductionsAlongAndAcrossRowsStayInSeparateGroups) {
  // The per-example loss (log_softmax, sum along rows) is row-parallel; the batch mean and
  // the bias gradient (sum over the batch) read every row: rule 5b keeps them apart.
  auto g = check_same_results(R"(
graph @loss(%logits: f32[8,10], %labels: i64[8]) -> (f32[], f32[10]) {
  %ls = log_softmax(%logits) {axis=-1} : f32[8,10]
  %oh = one_hot(%labels) {depth=10, dtype=f32} : f32[8,10]
  %m = mul(%oh, %ls) : f32[8,10]
  %s = sum(%m) {axes=[-1], keepdims=false} : f32[8]
  %n = neg(%s) : f32[8]
  %l = mean(%n) {axes=[], keepdims=false} : f32[]
  %e = exp(%ls) : f32[8,10]
  %d = sub(%e, %oh) : f32[8,10]
  %b = sum(%d) {axes=[0], keepdims=false} : f32[10]
  return %l, %b
}
)");
  for (const auto& n : g->nodes()) {
    if (n->kind() != NodeKind::kFusion) continue;
    bool along = false, across = false;
    for (const auto& m : n->subgraph(0).nodes()) {
      if (!m->is_op(OpKind::Sum) && !m->is_op(OpKind::Mean) && !m->is_op(OpKind::LogSoftmax))
        continue;
      const auto& axes = m->is_op(OpKind::LogSoftmax) ? std::vector<int64_t>{-1}
                                                      : m->attrs().get_ints("axes", "reduction");
      const bool leading = axes.empty() || axes.front() == 0;
      (leading ? across : along) = true;
    }
    EXPECT_FALSE(along && across) << n->fusion_name();
  }
}

TEST(FusionTest, MatmulEpilogueKeepsItsResults) {
  auto g = check_same_results(R"(
graph @dense(%x: f32[16,32], %w: f32[32,8], %b: f32[8]) -> (f32[16,8]) {
  %mm = matmul(%x, %w) {transpose_a=false, transpose_b=false} : f32[16,8]
  %a = add(%mm, %b) : f32[16,8]
  %r = tanh(%a) : f32[16,8]
  return %r
}
)");
  ASSERT_EQ(count_fusions(*g), 1u);
  EXPECT_EQ(g->nodes()[0]->fusion_kind(), "contraction");
}

TEST(FusionTest, MlpTrainingStepKeepsOutputsAndVariablesBitwise) {
  auto text = ir::print_graph(
      *ir::parse_graph_file(KILN_SOURCE_DIR "/tests/passes/fusion_mlp_train_step.kir"));
  auto g = check_same_results(text);
  // Each variable's new value comes out of one fusion, and the Adam updates of the four
  // weights (m, v, w) each come from one fusion.
  for (const auto& n : g->nodes()) {
    if (!n->is_assignment() || n->variable() == 4) continue;  // 4: the iteration counter
    const Node* producer = n->input(0)->producer();
    ASSERT_NE(producer, nullptr);
    EXPECT_EQ(producer->kind(), NodeKind::kFusion) << g->variable(size_t(n->variable())).name;
  }
  std::vector<const Node*> updates;
  for (int w = 0; w < 4; ++w) {
    std::vector<const Node*> producers;
    for (const auto& n : g->nodes())
      if (n->is_assignment()) {
        const std::string& name = g->variable(size_t(n->variable())).name;
        static const char* kPrefix[] = {"dense_kernel", "dense_bias", "dense_1_kernel",
                                        "dense_1_bias"};
        if (size_t(n->variable()) == size_t(w) ||
            name == std::string("adam/") + kPrefix[w] + "_momentum" ||
            name == std::string("adam/") + kPrefix[w] + "_velocity")
          producers.push_back(n->input(0)->producer());
      }
    ASSERT_EQ(producers.size(), 3u);
    EXPECT_EQ(producers[0], producers[1]);
    EXPECT_EQ(producers[1], producers[2]);
  }
  // 13: rule 5b keeps the batch-mean loss apart from the row-parallel softmax group.
  EXPECT_LE(count_kernels(*g), 13u);
  // Its memory plan: tests/codegen/memory_plan_test.cc (FusedMlpTrainingStep...).
}

TEST(FusionTest, AssignmentsStayOutsideAndInOrder) {
  auto g = check_same_results(R"(
graph @stores(%p: f32[4]) -> (f32[4]) {
  variables {
    $0 = "v" : f32[4] trainable read write -> %v
    $1 = "u" : f32[4] read write -> %u
  }
  %a = neg(%v) : f32[4]
  %k = assign $0, %p : f32[4]
  %b = add(%a, %k) : f32[4]
  %c = exp(%b) : f32[4]
  %k1 = assign_sub $1, %c : f32[4]
  %d = mul(%c, %k1) : f32[4]
  %k2 = assign_add $0, %d : f32[4]
  return %k2
}
)");
  std::vector<int> order;
  for (const auto& n : g->nodes()) {
    if (n->is_assignment()) order.push_back(n->variable());
    for (const auto& sub : n->subgraphs())
      for (const auto& b : sub->nodes()) EXPECT_FALSE(b->is_assignment());
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 0}));
}

TEST(LowerAssignmentsTest, IsBitwiseIdentical) {
  const std::string text = R"(
graph @lower(%d: f32[3], %x: f32[3]) -> (f32[3], f32[3]) {
  variables {
    $0 = "a" : f32[3] trainable read write -> %a
  }
  %r = neg(%a) : f32[3]
  %k1 = assign_add $0, %d : f32[3]
  %k2 = assign_sub $0, %x : f32[3]
  %u = mul(%k2, %d) : f32[3]
  return %u, %r
}
)";
  auto before = ir::parse_graph(text);
  auto after = ir::parse_graph(text);
  EXPECT_TRUE(make_lower_assignments()->run(*after));
  ir::verify_graph(*after);
  for (const auto& n : after->nodes()) {
    if (!n->is_assignment()) continue;
    EXPECT_EQ(n->kind(), NodeKind::kAssign);
  }
  Result want = run(*before, 10);
  Result got = run(*after, 10);
  expect_bitwise_equal(want.outputs, got.outputs, "output");
  expect_bitwise_equal(want.variables, got.variables, "variable");
  EXPECT_FALSE(make_lower_assignments()->run(*after));
}

}  // namespace
}  // namespace kiln::passes
