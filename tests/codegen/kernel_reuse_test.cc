// Kernels whose bodies are equal but for node names are lowered once and share their code
// (codegen/compiler.cc, compile_kernels); bodies that differ anywhere else (a constant, a
// type) get their own kernels. Results are checked against the reference executor.
#include <gtest/gtest.h>

#include <set>

#include "kiln/codegen/compile_graph.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/support/error_bound.h"

namespace kiln {
namespace {

TEST(KernelReuse, EqualBodiesShareCodeAndDifferentOnesDoNot) {
  // Four independent tanh(x * c + y) chains: the first two equal but for names and operands,
  // the third with another constant, the fourth on another shape.
  auto g = testing::optimized_graph(
      R"(graph @f(%0: f32[8,16], %1: f32[8,16], %2: f32[4,16]) -> (f32[8,16], f32[8,16], f32[8,16], f32[4,16]) {
  %3 = constant dense<1.5> : f32[]
  %4 = mul(%0, %3) : f32[8,16] name("layer_a/scale")
  %5 = add(%4, %1) : f32[8,16] name("layer_a/shift")
  %6 = tanh(%5) : f32[8,16] name("layer_a/act")
  %7 = mul(%1, %3) : f32[8,16] name("layer_b/scale")
  %8 = add(%7, %0) : f32[8,16] name("layer_b/shift")
  %9 = tanh(%8) : f32[8,16] name("layer_b/act")
  %10 = constant dense<2.5> : f32[]
  %11 = mul(%0, %10) : f32[8,16] name("layer_c/scale")
  %12 = add(%11, %1) : f32[8,16] name("layer_c/shift")
  %13 = tanh(%12) : f32[8,16] name("layer_c/act")
  %14 = mul(%2, %3) : f32[4,16]
  %15 = add(%14, %2) : f32[4,16]
  %16 = tanh(%15) : f32[4,16]
  return %6, %9, %13, %16
})");
  codegen::CompiledGraph c = codegen::compile_graph_in_full(*g);
  std::vector<std::string> symbols;
  std::set<std::string> names;
  for (const codegen::KernelRecord& k : c.kernels) {
    symbols.push_back(k.compiled.jit_symbol);
    names.insert(k.compiled.layout.symbol);
  }
  ASSERT_EQ(symbols.size(), 4u) << "one kernel per chain expected";
  EXPECT_EQ(names.size(), 4u) << "each kernel keeps its own group name";
  EXPECT_EQ(symbols[0], symbols[1]);
  EXPECT_NE(symbols[0], symbols[2]);
  EXPECT_NE(symbols[0], symbols[3]);
  EXPECT_NE(symbols[2], symbols[3]);
  EXPECT_NE(c.kernels[1].compiled.source, codegen::KernelSource::kCompiled);

  std::mt19937 rng(3);
  std::vector<runtime::Array> args;
  for (size_t i = 0; i < 3; ++i)
    args.push_back(testing::random_array(g->parameter(i)->type(), rng));
  testing::ErrorBoundedReference want(*g, args, {}, 1);
  EXPECT_TRUE(want.check(testing::run_compiled(*g, args, {}).outputs));
}

}  // namespace
}  // namespace kiln
