// Graph::clone: the copy prints exactly like the original (golden files with variables,
// assignments, control flow, constants of every dtype, and a fusion node), owns its own
// values, and editing it leaves the original untouched.
#include <gtest/gtest.h>

#include <string>

#include "kiln/ir/graph.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"

namespace kiln::ir {
namespace {

constexpr const char* kFusionText =
    "graph @f(%0: f32[2,3], %1: f32[3]) -> (f32[2,3], f32[2,3]) {\n"
    "  %2, %3 = fusion(%0, %1) : f32[2,3], f32[2,3] kind(\"loop\") @fused_add_relu_0 "
    "name(\"dense/fused\") loc(\"x.cc\":3:7) {\n"
    "    body (%0: f32[2,3], %1: f32[3]) -> (f32[2,3], f32[2,3]) {\n"
    "      %2 = add(%0, %1) : f32[2,3]\n"
    "      %3 = relu(%2) : f32[2,3]\n"
    "      return %2, %3\n"
    "    }\n"
    "  }\n"
    "  %4 = neg(%3) : f32[2,3]\n"
    "  return %4, %2\n"
    "}\n";

TEST(GraphClone, GoldenGraphsPrintTheSame) {
  for (const char* name : {"mlp_train_step", "control_flow", "constants"}) {
    std::string path = std::string(KILN_SOURCE_DIR) + "/tests/ir/golden/" + name + ".kir";
    std::unique_ptr<Graph> g = parse_graph_file(path);
    std::unique_ptr<Graph> copy = g->clone();
    verify_graph(*copy);
    EXPECT_EQ(print_graph(*copy), print_graph(*g)) << path;
    ASSERT_EQ(copy->variables().size(), g->variables().size());
    for (size_t i = 0; i < g->variables().size(); ++i) {
      EXPECT_EQ(copy->variable(i).read, g->variable(i).read);
      EXPECT_EQ(copy->variable(i).written, g->variable(i).written);
      EXPECT_NE(copy->variable(i).entry, g->variable(i).entry);
    }
  }
}

TEST(GraphClone, FusionBodiesAndEditsAreIndependent) {
  std::unique_ptr<Graph> g = parse_graph(kFusionText);
  std::unique_ptr<Graph> copy = g->clone();
  EXPECT_EQ(print_graph(*copy), kFusionText);
  EXPECT_NE(&copy->nodes()[0]->subgraph(0), &g->nodes()[0]->subgraph(0));
  EXPECT_EQ(copy->nodes()[0]->location().line, 3u);
  // Editing the copy (rename, drop the neg node's use) leaves the original as it was.
  copy->set_name("g");
  copy->nodes()[0]->subgraph(0).set_name("renamed");
  copy->set_outputs({copy->nodes()[0]->output(0)});
  copy->erase_nodes_if([](const Node& n) { return n.is_op(OpKind::Neg); });
  EXPECT_EQ(print_graph(*g), kFusionText);
  EXPECT_NE(print_graph(*copy), kFusionText);
}

}  // namespace
}  // namespace kiln::ir
