// Variables updated in place (codegen/compile_graph.cc finds the kernel, lower_kernel.cc
// stores the output through the variable's pointer, runtime/executable.cc binds the buffer):
// results equal the reference executor whether or not the update happens in place, a donated
// variable keeps its buffer, and an undonated one is never written.
#include <gtest/gtest.h>

#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using testing::all_close;

size_t in_place_pairs(const runtime::Executable& exe) {
  size_t n = 0;
  for (const auto& s : exe.steps())
    if (s.kernel) n += s.kernel->layout.in_place.size();
  return n;
}

// The new value (2x) is stored before the graph output reads the old value of w: the kernel
// must load w[i] before it overwrites it.
constexpr const char* kStoreBeforeRead = R"(graph @step(%0: f32[1003]) -> (f32[1003]) {
  variables {
    $0 = "w" : f32[1003] read write -> %1
  }
  %2 = constant dense<2.0> : f32[]
  %3 = mul(%0, %2) : f32[1003]
  %4 = add(%1, %3) : f32[1003]
  %5 = assign $0, %3 : f32[1003]
  return %4
})";

TEST(InPlaceUpdate, DonatedVariableKeepsItsBufferAndMatchesReference) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(kStoreBeforeRead);
  auto exe = codegen::compile_graph(*g);
  EXPECT_EQ(in_place_pairs(*exe), 1u);
  std::mt19937 rng(3);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  runtime::Array w = testing::random_array(g->variable(0).type, rng);
  auto want = testing::run_reference(*g, args, {testing::copy_of(w)});
  for (int call = 0; call < 2; ++call) {  // the second call reuses the same buffer again
    std::vector<runtime::Array> vars = {testing::copy_of(w)};
    const void* buffer = vars[0].raw();
    std::vector<runtime::Array> out = exe->run(args, vars, {true});
    EXPECT_EQ(vars[0].raw(), buffer) << "the donated buffer holds the new value";
    EXPECT_TRUE(all_close(out[0], want.outputs[0], 1e-6, 1e-6));
    EXPECT_TRUE(all_close(vars[0], want.variables[0], 0, 0));
  }
}

TEST(InPlaceUpdate, UndonatedVariableIsNeverWritten) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(kStoreBeforeRead);
  auto exe = codegen::compile_graph(*g);
  std::mt19937 rng(4);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  runtime::Array w = testing::random_array(g->variable(0).type, rng);
  const runtime::Array saved = testing::copy_of(w);
  auto want = testing::run_reference(*g, args, {testing::copy_of(w)});
  for (int call = 0; call < 3; ++call) {  // pooled copies are reused from the second call
    std::vector<runtime::Array> vars = {w};
    std::vector<runtime::Array> out = exe->run(args, vars);
    EXPECT_NE(vars[0].raw(), w.raw());
    EXPECT_TRUE(all_close(w, saved, 0, 0)) << "the caller's array was written";
    EXPECT_TRUE(all_close(out[0], want.outputs[0], 1e-6, 1e-6));
    EXPECT_TRUE(all_close(vars[0], want.variables[0], 0, 0));
  }
}

TEST(InPlaceUpdate, RowKernelsAndLaterReadersAreNotInPlace) {
  testing::ScopedCacheDir cache;
  // A row kernel (the mean is read at every element of its row) and a variable whose old
  // value is read after the kernel computing its new value (the output reads w after the
  // assignment in program order).
  auto g = testing::optimized_graph(R"(graph @step(%0: f32[8,16]) -> (f32[8,16], f32[]) {
  variables {
    $0 = "w" : f32[8,16] read write -> %1
    $1 = "v" : f32[8,16] read write -> %2
  }
  %3 = mean(%1) {axes=[-1], keepdims=true} : f32[8,1]
  %4 = sub(%1, %3) : f32[8,16]
  %5 = assign $0, %4 : f32[8,16]
  %6 = mul(%2, %0) : f32[8,16]
  %7 = assign $1, %6 : f32[8,16]
  %8 = sum(%2) {axes=[], keepdims=false} : f32[]
  return %4, %8
})");
  auto exe = codegen::compile_graph(*g);
  EXPECT_EQ(in_place_pairs(*exe), 0u);
  std::mt19937 rng(5);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  std::vector<runtime::Array> vars = {testing::random_array(g->variable(0).type, rng),
                                      testing::random_array(g->variable(1).type, rng)};
  std::vector<runtime::Array> inputs = {testing::copy_of(vars[0]), testing::copy_of(vars[1])};
  auto want =
      testing::run_reference(*g, args, {testing::copy_of(vars[0]), testing::copy_of(vars[1])});
  std::vector<runtime::Array> out = exe->run(args, inputs, {true, true});
  EXPECT_TRUE(all_close(out[0], want.outputs[0], 1e-6, 1e-6));
  EXPECT_TRUE(all_close(out[1], want.outputs[1], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(inputs[0], want.variables[0], 1e-6, 1e-6));
  EXPECT_TRUE(all_close(inputs[1], want.variables[1], 0, 0));
}

}  // namespace
}  // namespace kiln
