// specialize_parameters / refine-shapes: a shape-polymorphic graph specialised to a concrete
// signature gets every dimension, broadcast_like becomes broadcast_to, element_count folds,
// and the results stay bitwise equal.
#include <gtest/gtest.h>

#include "kiln/ir/graph.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/support/error_of.h"

namespace kiln::passes {
namespace {

// mean(x) over a [?,3] input and its gradient as kiln's tracer writes it.
std::unique_ptr<ir::Graph> polymorphic_mean_grad() {
  auto g = std::make_unique<ir::Graph>("mean_grad");
  ir::Value* x = g->add_parameter({DType::f32, Shape{kUnknownDim, 3}});
  ir::Value* m =
      g->add_op(OpKind::Mean, {x}, Attrs{{"axes", std::vector<int64_t>{}}, {"keepdims", false}})
          ->output();
  ir::Value* count = g->add_op(OpKind::ElementCount, {x},
                               Attrs{{"axes", std::vector<int64_t>{0, 1}}, {"dtype", DType::f32}})
                         ->output();
  float one = 1;
  ir::Value* c1 = g->add_constant(ir::Literal::copy_of({DType::f32, Shape{}}, &one))->output();
  ir::Value* r = g->add_op(OpKind::Div, {c1, count})->output();
  ir::Value* grad = g->add_op(OpKind::BroadcastLike, {r, x})->output();
  g->set_outputs({m, grad});
  return g;
}

TEST(RefineShapesTest, SpecializedGraphKnowsEveryDimensionAndAgrees) {
  auto g = polymorphic_mean_grad();
  runtime::Array x = runtime::Array::empty(DType::f32, Shape{4, 3});
  for (int i = 0; i < 12; ++i) x.data<float>()[i] = float(i) * 0.5f - 2;
  std::vector<runtime::Array> vars;
  std::vector<runtime::Array> want = runtime::execute_reference(*g, {&x, 1}, vars);

  EXPECT_TRUE(specialize_parameters(*g, {{DType::f32, Shape{4, 3}}}));
  default_pipeline({}).run(*g);
  ir::verify_graph(*g);
  std::string text = ir::print_graph(*g);
  EXPECT_EQ(text.find('?'), std::string::npos) << text;
  EXPECT_EQ(text.find("broadcast_like"), std::string::npos) << text;
  EXPECT_EQ(text.find("element_count"), std::string::npos) << text;  // folded to 12
  std::vector<runtime::Array> got = runtime::execute_reference(*g, {&x, 1}, vars);
  for (size_t o = 0; o < want.size(); ++o)
    for (int64_t i = 0; i < want[o].size(); ++i)
      EXPECT_EQ(want[o].data<float>()[i], got[o].data<float>()[i]) << "output " << o;
}

TEST(RefineShapesTest, NonConformingSignatureIsAnError) {
  auto g = polymorphic_mean_grad();
  EXPECT_NE(test::error_of([&] {
              specialize_parameters(*g, {{DType::f32, Shape{4, 5}}});
            }).find("parameter %0 of graph @mean_grad is f32[?,3]; f32[4,5] does not conform"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { specialize_parameters(*g, {}); }).find("has 1 parameters"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::passes
