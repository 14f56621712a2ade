// transpose-folding changes only the GEMM's operand layout: on random matmuls the folded graph
// agrees with the original within a few ulps (not bitwise, which is why the exact default
// pipeline leaves the pass out).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kiln/ir/graph.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/runtime/reference_executor.h"

namespace kiln::passes {
namespace {

runtime::Array random_matrix(const Shape& s, std::mt19937_64& rng) {
  runtime::Array a = runtime::Array::empty(DType::f32, s);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = u(rng);
  return a;
}

TEST(TransposeFoldingTest, FoldedMatmulsAgreeWithinUlps) {
  std::mt19937_64 rng(11);
  int folded = 0;
  for (int trial = 0; trial < 200; ++trial) {
    int64_t m = 1 + int64_t(rng() % 40), k = 1 + int64_t(rng() % 40), n = 1 + int64_t(rng() % 40);
    // a is (k, m) and b is (n, k); the matmul computes a^T b^T in one of three spellings.
    int spelling = int(rng() % 3);
    ir::Graph g("mm");
    ir::Value* a = g.add_parameter({DType::f32, Shape{k, m}});
    ir::Value* b = g.add_parameter({DType::f32, Shape{n, k}});
    Attrs swap{{"perm", std::vector<int64_t>{1, 0}}};
    ir::Value* at = g.add_op(OpKind::Transpose, {a}, swap)->output();
    ir::Value* bt = g.add_op(OpKind::Transpose, {b}, swap)->output();
    ir::Node* mm = spelling == 0   ? g.add_op(OpKind::MatMul, {at, bt},
                                              Attrs{{"transpose_a", false}, {"transpose_b", false}})
                   : spelling == 1 ? g.add_op(OpKind::MatMul, {at, b},
                                              Attrs{{"transpose_a", false}, {"transpose_b", true}})
                                   : g.add_op(OpKind::MatMul, {a, bt},
                                              Attrs{{"transpose_a", true}, {"transpose_b", false}});
    g.set_outputs({mm->output()});
    std::vector<runtime::Array> args{random_matrix(g.parameter(0)->shape(), rng),
                                     random_matrix(g.parameter(1)->shape(), rng)};
    std::vector<runtime::Array> vars;
    runtime::Array want = runtime::execute_reference(g, args, vars)[0];
    folded += make_transpose_folding()->run(g);
    ir::verify_graph(g);
    runtime::Array got = runtime::execute_reference(g, args, vars)[0];
    ASSERT_EQ(want.shape, got.shape);
    for (int64_t i = 0; i < want.size(); ++i) {
      float w = want.data<float>()[i], o = got.data<float>()[i];
      // k products of values in [-1, 1]: a reordered sum differs by at most ~k ulps of k.
      EXPECT_NEAR(w, o, 4e-7 * float(k)) << "trial " << trial << " element " << i;
    }
  }
  EXPECT_GT(folded, 100);  // most trials had a transpose to fold
}

}  // namespace
}  // namespace kiln::passes
