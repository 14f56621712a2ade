// DOT export: exact output for a small graph, and clusters for control-flow sub-graphs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/dot.h"
#include "kiln/ir/graph.h"

namespace kiln::ir {
namespace {

using ::testing::HasSubstr;

TensorType tensor_type(DType dtype, std::initializer_list<int64_t> dims) {
  return {dtype, Shape(dims)};
}

TEST(Dot, SmallGraphWithAnAssignment) {
  Graph g("train_step");
  Value* x = g.add_parameter(tensor_type(DType::f32, {kUnknownDim, 4}));
  int v = g.add_variable("dense/kernel", tensor_type(DType::f32, {4, 2}), true);
  Value* w = g.variable(size_t(v)).entry;
  Node* mm = g.add_op(OpKind::MatMul, {x, w}, {{"transpose_a", false}, {"transpose_b", false}});
  mm->set_name("dense_1/matmul");
  float half = 0.5f;
  Node* c = g.add_constant(Literal::copy_of(tensor_type(DType::f32, {}), &half));
  Node* m = g.add_op(OpKind::Mul, {w, c->output()});
  Node* a = g.add_assignment(NodeKind::kAssignSub, v, m->output());
  a->set_name("say \"hi\" \\o/");
  g.set_outputs({mm->output()});
  EXPECT_EQ(graph_to_dot(g),
            "digraph \"train_step\" {\n"
            "  p0 [shape=box, label=\"%0\\nparam 0\\nf32[?,4]\"];\n"
            "  v0 [shape=box, label=\"$0 dense/kernel\\nf32[4,2]\"];\n"
            "  n0 [label=\"dense_1/matmul\\nmatmul\\nf32[?,2]\"];\n"
            "  p0 -> n0;\n"
            "  v0 -> n0;\n"
            "  n1 [label=\"constant dense<0.5>\\nf32[]\"];\n"
            "  n2 [label=\"mul\\nf32[4,2]\"];\n"
            "  v0 -> n2;\n"
            "  n1 -> n2;\n"
            "  n3 [label=\"say \\\"hi\\\" \\\\o/\\nassign_sub $0\\nf32[4,2]\", style=bold, "
            "color=red];\n"
            "  n2 -> n3;\n"
            "  n3 -> v0 [style=bold, color=red, constraint=false];\n"
            "  return [label=\"return\"];\n"
            "  n0 -> return;\n"
            "}\n");
}

std::unique_ptr<Graph> identity_branch(const std::string& name, bool negate) {
  auto b = std::make_unique<Graph>(name);
  Value* x = b->add_parameter(tensor_type(DType::f32, {3}));
  Value* y = negate ? b->add_op(OpKind::Neg, {x})->output() : x;
  b->set_outputs({y, x});
  return b;
}

TEST(Dot, ControlFlowSubGraphsAreClusters) {
  Graph g("branchy \"g\"");
  Value* p = g.add_parameter(tensor_type(DType::b8, {}));
  Value* x = g.add_parameter(tensor_type(DType::f32, {3}));
  std::vector<std::unique_ptr<Graph>> branches;
  branches.push_back(identity_branch("then", true));
  branches.push_back(identity_branch("else", false));
  Node* c = g.add_control_flow(NodeKind::kCond, {p, x}, std::move(branches),
                               {tensor_type(DType::f32, {3}), tensor_type(DType::f32, {3})});
  Node* add = g.add_op(OpKind::Add, {c->output(1), c->output(0)});
  g.set_outputs({add->output()});
  std::string dot = graph_to_dot(g);
  EXPECT_EQ(dot,
            "digraph \"branchy \\\"g\\\"\" {\n"
            "  p0 [shape=box, label=\"%0\\nparam 0\\nbool[]\"];\n"
            "  p1 [shape=box, label=\"%1\\nparam 1\\nf32[3]\"];\n"
            "  n0 [label=\"cond\\nf32[3], f32[3]\"];\n"
            "  p0 -> n0;\n"
            "  p1 -> n0;\n"
            "  subgraph cluster_0 {\n"
            "    label=\"then\";\n"
            "    c0_p0 [shape=box, label=\"%0\\nparam 0\\nf32[3]\"];\n"
            "    c0_n0 [label=\"neg\\nf32[3]\"];\n"
            "    c0_p0 -> c0_n0;\n"
            "    c0_return [label=\"return\"];\n"
            "    c0_n0 -> c0_return;\n"
            "    c0_p0 -> c0_return;\n"
            "  }\n"
            "  n0 -> c0_p0 [style=dashed];\n"
            "  subgraph cluster_1 {\n"
            "    label=\"else\";\n"
            "    c1_p0 [shape=box, label=\"%0\\nparam 0\\nf32[3]\"];\n"
            "    c1_return [label=\"return\"];\n"
            "    c1_p0 -> c1_return;\n"
            "    c1_p0 -> c1_return;\n"
            "  }\n"
            "  n0 -> c1_p0 [style=dashed];\n"
            "  n1 [label=\"add\\nf32[3]\"];\n"
            "  n0 -> n1 [label=\"1\"];\n"
            "  n0 -> n1 [label=\"0\"];\n"
            "  return [label=\"return\"];\n"
            "  n1 -> return;\n"
            "}\n");
  EXPECT_EQ(graph_to_dot(g), dot) << "output must be deterministic";
}

}  // namespace
}  // namespace kiln::ir
