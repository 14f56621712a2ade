// Fusion nodes in the IR: building, printing, parsing back, verifying, DOT export and the
// reference executor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/dot.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/support/error_of.h"

namespace kiln::ir {
namespace {

using ::kiln::test::error_of;
using ::testing::HasSubstr;

TensorType f32_of(std::vector<int64_t> dims) { return TensorType{DType::f32, Shape(dims)}; }

// add(x, b) -> relu, both returned: a two-output loop fusion.
std::unique_ptr<Graph> build_fused_graph() {
  auto g = std::make_unique<Graph>("f");
  Value* x = g->add_parameter(f32_of({2, 3}));
  Value* b = g->add_parameter(f32_of({3}));
  auto body = std::make_unique<Graph>("");
  Value* bx = body->add_parameter(f32_of({2, 3}));
  Value* bb = body->add_parameter(f32_of({3}));
  Node* add = body->add_op(OpKind::Add, {bx, bb});
  Node* relu = body->add_op(OpKind::Relu, {add->output()});
  body->set_outputs({add->output(), relu->output()});
  Node* f = g->add_fusion("fused_add_relu_0", "loop", {x, b}, std::move(body),
                          {f32_of({2, 3}), f32_of({2, 3})});
  f->set_name("dense/fused");
  Node* n = g->add_op(OpKind::Neg, {f->output(1)});
  g->set_outputs({n->output(), f->output(0)});
  return g;
}

constexpr const char* kText =
    "graph @f(%0: f32[2,3], %1: f32[3]) -> (f32[2,3], f32[2,3]) {\n"
    "  %2, %3 = fusion(%0, %1) : f32[2,3], f32[2,3] kind(\"loop\") @fused_add_relu_0 "
    "name(\"dense/fused\") {\n"
    "    body (%0: f32[2,3], %1: f32[3]) -> (f32[2,3], f32[2,3]) {\n"
    "      %2 = add(%0, %1) : f32[2,3]\n"
    "      %3 = relu(%2) : f32[2,3]\n"
    "      return %2, %3\n"
    "    }\n"
    "  }\n"
    "  %4 = neg(%3) : f32[2,3]\n"
    "  return %4, %2\n"
    "}\n";

TEST(FusionIrTest, PrintsParsesBackAndVerifies) {
  auto g = build_fused_graph();
  verify_graph(*g);
  EXPECT_EQ(print_graph(*g), kText);
  auto parsed = parse_graph(kText);
  verify_graph(*parsed);
  EXPECT_EQ(print_graph(*parsed), kText);
  const Node& f = *parsed->nodes()[0];
  EXPECT_EQ(f.kind(), NodeKind::kFusion);
  EXPECT_EQ(f.op_name(), "fusion");
  EXPECT_EQ(f.fusion_name(), "fused_add_relu_0");
  EXPECT_EQ(f.fusion_kind(), "loop");
  EXPECT_EQ(parsed->total_node_count(), 4u);
}

TEST(FusionIrTest, QuotesANameThatIsNotAnIdentifier) {
  auto g = build_fused_graph();
  g->nodes()[0]->subgraph(0).set_name("fused add");
  std::string text = print_graph(*g);
  EXPECT_THAT(text, HasSubstr("kind(\"loop\") @\"fused add\" name("));
  EXPECT_EQ(print_graph(*parse_graph(text)), text);
}

TEST(FusionIrTest, ParserErrorsSayWhatIsExpected) {
  std::string no_kind = kText;
  no_kind.replace(no_kind.find("kind(\"loop\") "), 13, "");
  EXPECT_THAT(error_of([&] { parse_graph(no_kind, "t.kir"); }),
              HasSubstr("t.kir:2:48: error: expected 'kind(\"...\")' after the fusion's result "
                        "types, got '@'"));
  std::string no_body = kText;
  no_body.replace(no_body.find("body ("), 4, "then");
  EXPECT_THAT(error_of([&] { parse_graph(no_body); }), HasSubstr("expected 'body'"));
}

TEST(FusionIrTest, VerifierChecksSignatureKindNameAndBody) {
  {
    auto g = parse_graph(kText);
    g->nodes()[0]->subgraph(0).set_name("");
    EXPECT_THAT(error_of([&] { verify_graph(*g); }), HasSubstr("needs a group name"));
  }
  {
    auto g = parse_graph(kText);
    g->nodes()[0]->mutable_attrs().set("kind", std::string("elementwise"));
    EXPECT_THAT(error_of([&] { verify_graph(*g); }), HasSubstr("kind = \"loop\""));
  }
  {
    std::string bad = kText;
    bad.replace(bad.find("body (%0: f32[2,3], %1: f32[3])"), 31,
                "body (%0: f32[2,3], %1: f32[2,3])");
    auto g = parse_graph(bad);
    EXPECT_THAT(error_of([&] { verify_graph(*g); }),
                HasSubstr("the body sub-graph's parameter 1 is f32[2,3] but operand 1 (%1) is "
                          "f32[3]"));
  }
  {
    auto g = parse_graph(kText);
    g->nodes()[0]->output(0)->set_type(f32_of({3, 2}));
    EXPECT_THAT(error_of([&] { verify_graph(*g); }),
                HasSubstr("the body sub-graph's output 0 is f32[2,3] but the fusion's output %2 "
                          "is f32[3,2]"));
  }
  {
    // A cond inside a fusion body is rejected.
    const char* text =
        "graph @g(%0: bool[], %1: f32[2]) -> (f32[2]) {\n"
        "  %2 = fusion(%0, %1) : f32[2] kind(\"loop\") @fused_cond_0 {\n"
        "    body (%0: bool[], %1: f32[2]) -> (f32[2]) {\n"
        "      %2 = cond(%0, %1) : f32[2] {\n"
        "        then (%0: f32[2]) -> (f32[2]) {\n"
        "          return %0\n"
        "        }\n"
        "        else (%0: f32[2]) -> (f32[2]) {\n"
        "          return %0\n"
        "        }\n"
        "      }\n"
        "      return %2\n"
        "    }\n"
        "  }\n"
        "  return %2\n"
        "}\n";
    EXPECT_THAT(error_of([&] { verify_graph(*parse_graph(text)); }),
                HasSubstr("fusion bodies hold only op and constant nodes"));
  }
}

TEST(FusionIrTest, DotDrawsTheBodyAsAClusterNamedAfterTheGroup) {
  std::string dot = graph_to_dot(*parse_graph(kText));
  EXPECT_THAT(dot, HasSubstr("label=\"fused_add_relu_0 (loop)\";"));
  EXPECT_THAT(dot, HasSubstr("fusion @fused_add_relu_0"));
}

TEST(FusionIrTest, ReferenceExecutorRunsTheBody) {
  auto g = parse_graph(kText);
  runtime::Array x = runtime::Array::empty(f32_of({2, 3}));
  runtime::Array b = runtime::Array::empty(f32_of({3}));
  float xs[] = {-1, 2, -3, 4, -5, 6};
  float bs[] = {0.5f, -0.5f, 1};
  std::memcpy(x.raw(), xs, sizeof xs);
  std::memcpy(b.raw(), bs, sizeof bs);
  std::vector<runtime::Array> args = {x, b}, vars;
  std::vector<runtime::Array> out = runtime::execute_reference(*g, args, vars);
  ASSERT_EQ(out.size(), 2u);
  const float want_neg_relu[] = {-0.0f, -1.5f, -0.0f, -4.5f, -0.0f, -7};
  const float want_add[] = {-0.5f, 1.5f, -2, 4.5f, -5.5f, 7};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(out[0].data<float>()[i], want_neg_relu[i]) << i;
    EXPECT_EQ(out[1].data<float>()[i], want_add[i]) << i;
  }
}

}  // namespace
}  // namespace kiln::ir
