// Variables updated in place (codegen/compile_graph.cc finds the kernel, lower_kernel.cc
// stores the output through the variable's pointer, runtime/executable.cc binds the buffer):
// results equal the reference executor whether or not the update happens in place, a donated
// variable keeps its buffer, and an undonated one is never written.
#include <gtest/gtest.h>

#include "kiln/codegen/lower_kernel.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/support/error_bound.h"

namespace kiln {
namespace {

using testing::all_close;

size_t overwrite_pairs(const runtime::Executable& exe) {
  size_t n = 0;
  for (const auto& s : exe.steps())
    if (s.kernel) n += s.kernel->layout.overwrites.size();
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
  EXPECT_EQ(overwrite_pairs(*exe), 1u);
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

TEST(InPlaceUpdate, RowKernelsInPlaceOnlyWhereSafe) {
  testing::ScopedCacheDir cache;
  // w: a row kernel (the row mean is materialized before the output reads w at its own
  // index): in place. v: the add reads v and the buffer of a transpose kernel (fusion leaves
  // transposes alone): in place. u: its old value is read after the kernel computing its new
  // value (the sum, before the assignment): not in place.
  auto g = testing::optimized_graph(R"(graph @step(%0: f32[8,16]) -> (f32[8,16], f32[]) {
  variables {
    $0 = "w" : f32[8,16] read write -> %1
    $1 = "v" : f32[8,8] read write -> %2
    $2 = "u" : f32[8,16] read write -> %3
  }
  %4 = mean(%1) {axes=[-1], keepdims=true} : f32[8,1]
  %5 = sub(%1, %4) : f32[8,16]
  %6 = assign $0, %5 : f32[8,16]
  %7 = transpose(%2) {perm=[1, 0]} : f32[8,8]
  %8 = add(%2, %7) : f32[8,8]
  %9 = assign $1, %8 : f32[8,8]
  %10 = mul(%3, %0) : f32[8,16]
  %11 = sum(%3) {axes=[], keepdims=false} : f32[]
  %12 = assign $2, %10 : f32[8,16]
  return %5, %11
})");
  auto exe = codegen::compile_graph(*g);
  EXPECT_EQ(overwrite_pairs(*exe), 2u);
  std::mt19937 rng(5);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  std::vector<runtime::Array> vars;
  for (size_t i = 0; i < 3; ++i) vars.push_back(testing::random_array(g->variable(i).type, rng));
  std::vector<runtime::Array> inputs, reference;
  for (const auto& v : vars) {
    inputs.push_back(testing::copy_of(v));
    reference.push_back(testing::copy_of(v));
  }
  testing::ErrorBoundedReference want(*g, args, reference, 5);
  const void *w_buffer = inputs[0].raw(), *u_buffer = inputs[2].raw();
  std::vector<runtime::Array> out = exe->run(args, inputs, {true, true, true});
  EXPECT_EQ(inputs[0].raw(), w_buffer);
  EXPECT_NE(inputs[2].raw(), u_buffer);
  out.insert(out.end(), inputs.begin(), inputs.end());  // outputs, then variables
  EXPECT_TRUE(want.check(out));
}

// A kernel whose output reads its input transposed may not overwrite it.
TEST(InPlaceUpdate, KernelRefusesAnInputReadAtOtherIndices) {
  ir::Graph body("k");
  ir::Value* p = body.add_parameter({DType::f32, Shape{6, 6}});
  ir::Value* t =
      body.add_op(OpKind::Transpose, {p}, {{"perm", std::vector<int64_t>{1, 0}}})->output();
  body.set_outputs({body.add_op(OpKind::Add, {p, t})->output()});
  codegen::LoweredKernel k = codegen::lower_kernel(body, "k", nullptr, {{0, 0}});
  EXPECT_TRUE(k.layout.overwrites.empty()) << k.layout.iteration;
}

// A serial kernel (a full sum) with two outputs: p * 2 written over p, and sum(p). Only when
// the sum is materialized first may p be overwritten.
TEST(InPlaceUpdate, SerialKernelRefusesWhenALaterValueReadsTheInput) {
  for (bool sum_first : {false, true}) {
    ir::Graph body("k");
    ir::Value* p = body.add_parameter({DType::f32, Shape{4, 5}});
    const float two_value = 2.0f;
    ir::Value* two =
        body.add_constant(ir::Literal::copy_of({DType::f32, Shape{}}, &two_value))->output();
    ir::Value* s = nullptr;
    if (sum_first)
      s = body.add_op(OpKind::Sum, {p}, {{"axes", std::vector<int64_t>{}}, {"keepdims", false}})
              ->output();
    ir::Value* doubled = body.add_op(OpKind::Mul, {p, two})->output();
    if (!sum_first)
      s = body.add_op(OpKind::Sum, {p}, {{"axes", std::vector<int64_t>{}}, {"keepdims", false}})
              ->output();
    body.set_outputs({doubled, s});
    codegen::LoweredKernel k = codegen::lower_kernel(body, "k", nullptr, {{0, 0}});
    EXPECT_EQ(k.layout.iteration, "serial");
    EXPECT_EQ(k.layout.overwrites.size(), sum_first ? 1u : 0u) << "sum first: " << sum_first;
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// w <- w + x @ w: the matmul's epilogue computes w's new value, but the product reads all of w,
// block by block alongside the epilogue (runtime/executable.cc), so the update is not in place
// (codegen/compile_graph.cc, overwrite_pairs): in place, the epilogue of the first row blocks
// would overwrite rows of w that later blocks still multiply by.
TEST(InPlaceUpdate, NotInPlaceOverAVariableTheContractionReads) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(R"(graph @step(%0: f32[384,384]) -> (f32[]) {
  variables {
    $0 = "w" : f32[384,384] read write -> %1
  }
  %2 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[384,384]
  %3 = add(%1, %2) : f32[384,384]
  %4 = assign $0, %3 : f32[384,384]
  %5 = sum(%3) {axes=[], keepdims=false} : f32[]
  return %5
})");
  auto exe = codegen::compile_graph(*g);
  EXPECT_EQ(overwrite_pairs(*exe), 0u);
  std::mt19937 rng(9);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  runtime::Array w = testing::random_array(g->variable(0).type, rng);
  testing::ErrorBoundedReference want(*g, args, {testing::copy_of(w)}, 1);
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<runtime::Array> vars = {testing::copy_of(w)};
    std::vector<runtime::Array> out = exe->run(args, vars, {true});
    std::vector<runtime::Array> results = {out[0], vars[0]};
    EXPECT_TRUE(want.check(results)) << threads << " thread(s)";
  }
  set_num_threads(saved);
}

}  // namespace
}  // namespace kiln
