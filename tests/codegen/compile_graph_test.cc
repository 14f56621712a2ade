// Whole graphs through codegen (fusion kernels, contraction epilogues, eager fallbacks,
// assignments, control flow) against the reference executor, within the error bounds of
// tests/support/error_bound.h.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "kiln/ir/error.h"
#include "kiln/ir/printer.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/profiler.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/support/error_bound.h"

namespace kiln {
namespace {

// Compiled outputs, then variables, against the float64 reference and its bounds.
::testing::AssertionResult compiled_within_bounds(const ir::Graph& g,
                                                  const std::vector<runtime::Array>& args,
                                                  const std::vector<runtime::Array>& vars) {
  testing::ErrorBoundedReference want(g, args, vars, 1);
  testing::RunResult got = testing::run_compiled(g, args, vars);
  std::vector<runtime::Array> results = got.outputs;
  results.insert(results.end(), got.variables.begin(), got.variables.end());
  return want.check(results);
}

using testing::random_args;

TEST(CompileGraph, ElementwiseChain) {
  auto g = testing::optimized_graph(R"(graph @f(%0: f32[17,33], %1: f32[33]) -> (f32[17,33]) {
  %2 = add(%0, %1) : f32[17,33]
  %3 = tanh(%2) : f32[17,33]
  %4 = mul(%3, %0) : f32[17,33]
  return %4
})");
  EXPECT_TRUE(compiled_within_bounds(*g, random_args(*g, 1), {}));
}

TEST(CompileGraph, AffineWithVariable) {
  auto g = testing::optimized_graph(R"(graph @affine(%0: f32[5,3]) -> (f32[5,2]) {
  variables {
    $0 = "layer/w" : f32[3,2] read write -> %1
  }
  %2 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[5,2]
  %3 = constant dense<[1.0, -1.0]> : f32[2]
  %4 = add(%2, %3) : f32[5,2]
  %5 = relu(%4) : f32[5,2]
  %6 = constant dense<0.5> : f32[3,2]
  %7 = assign_add $0, %6 : f32[3,2]
  return %5
})");
  std::mt19937 rng(2);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  std::vector<runtime::Array> vars = {testing::random_array(g->variable(0).type, rng)};
  EXPECT_TRUE(compiled_within_bounds(*g, args, vars));
}

TEST(CompileGraph, LayerNormRows) {
  auto g = testing::optimized_graph(R"(graph @ln(%0: f32[64,256]) -> (f32[64,256]) {
  %1 = mean(%0) {axes=[-1], keepdims=true} : f32[64,1]
  %2 = sub(%0, %1) : f32[64,256]
  %3 = square(%2) : f32[64,256]
  %4 = mean(%3) {axes=[-1], keepdims=true} : f32[64,1]
  %5 = constant dense<1e-5> : f32[]
  %6 = add(%4, %5) : f32[64,1]
  %7 = rsqrt(%6) : f32[64,1]
  %8 = mul(%2, %7) : f32[64,256]
  return %8
})");
  EXPECT_TRUE(compiled_within_bounds(*g, random_args(*g, 3), {}));
}

// A contraction group that also returns the product itself (a CNN's forward convolution: the
// backward pass recomputes the ReLU mask from it): the product is computed straight into that
// output, so the epilogue kernel has only the other output and no scratch product is laid out.
// The conv returned next to its ReLU + max-pool; a matmul returned next to its bias + ReLU and
// as the graph's own output (a pooled buffer).
TEST(CompileGraph, ContractionProductReturnedByTheGroupIsNotCopied) {
  const char* texts[] = {
      R"(graph @conv(%0: f32[4,12,12,1], %1: f32[3,3,1,16], %2: f32[16]) -> (f32[4,6,6,16], f32[]) {
  %3 = conv2d(%0, %1) {strides=[1, 1], dilations=[1, 1], padding="same"} : f32[4,12,12,16]
  %4 = add(%3, %2) : f32[4,12,12,16]
  %5 = relu(%4) : f32[4,12,12,16]
  %6 = max_pool2d(%5) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[4,6,6,16]
  %7 = mul(%3, %3) : f32[4,12,12,16]
  %8 = sum(%7) {axes=[], keepdims=false} : f32[]
  return %6, %8
})",
      R"(graph @dense(%0: f32[40,30], %1: f32[30,20], %2: f32[20]) -> (f32[40,20], f32[40,20]) {
  %3 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[40,20]
  %4 = add(%3, %2) : f32[40,20]
  %5 = relu(%4) : f32[40,20]
  return %3, %5
})"};
  for (const char* text : texts) {
    testing::ScopedCacheDir cache;
    auto g = testing::optimized_graph(text);
    auto exe = codegen::compile_graph(*g);
    bool found = false;
    for (const runtime::ExecutableStep& s : exe->steps()) {
      if (s.kind != runtime::ExecutableStep::Kind::kContraction) continue;
      found = true;
      ASSERT_NE(s.kernel, nullptr) << text;
      EXPECT_EQ(s.kernel->layout.num_outputs, 1u) << text;
    }
    EXPECT_TRUE(found) << "no contraction group in\n" << ir::print_graph(*g);
    const std::vector<runtime::Array> args = random_args(*g, 4);
    EXPECT_TRUE(compiled_within_bounds(*g, args, {})) << text;
  }
}

// A step's byte estimate counts each operand read once and its result written once, except the
// input a slice or gather selects from (op trait kSelects), read only as much as the result:
// 16 rows of a 1000 x 64 table are 4 KiB of reads, not 250 KiB.
TEST(CompileGraph, SliceAndGatherStepsCountOnlyTheBytesTheySelect) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(
      R"(graph @pick(%0: f32[1000,64], %1: i32[16]) -> (f32[16,64], f32[16,64]) {
  %2 = gather(%0, %1) {axis=0} : f32[16,64]
  %3 = slice(%0) {start=[100, 0], stop=[116, 64], step=[1, 1]} : f32[16,64]
  return %2, %3
})");
  auto exe = codegen::compile_graph(*g);
  const double rows = 16 * 64 * 4, indices = 16 * 4;
  int checked = 0;
  for (const runtime::ExecutableStep& s : exe->steps()) {
    if (s.name.find("gather") != std::string::npos) {
      EXPECT_TRUE(s.selects);
      EXPECT_EQ(s.bytes, rows + indices + rows) << s.name;  // selected rows, indices, result
      ++checked;
    } else if (s.name.find("slice") != std::string::npos) {
      EXPECT_TRUE(s.selects);
      EXPECT_EQ(s.bytes, rows + rows) << s.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2) << ir::print_graph(*g);
}

// A convolution's epilogue that reads the product only at its own image runs image by image
// right after it (runtime/executable.cc, conv_by_images): a direct forward convolution and a
// shallow one, each with bias, ReLU and max-pool, and a direct input gradient with the
// max-pool and ReLU gradients (the CNN's three), in float32 and in bf16 (on the float32
// kernels, where a bf16 convolution runs the direct kernels on widened operands, and on the
// VDPBF16PS sets this CPU runs, where it runs them on bf16 pairs: each image is rounded right
// before its epilogue rows, conv_bf16_by_images). On the AMX sets, whose bf16 passes are im2col
// chunks, the graphs of many images (several chunks or image groups; one chunk is one product
// split over the threads, its epilogue after it). No separate epilogue event is profiled for
// them, and the outputs equal the reference executor bitwise at 1, 2 and 3 threads.
const char* const kConvEpilogueGraphs[] = {
    R"(graph @direct(%0: f32[3,10,10,16], %1: f32[3,3,16,24], %2: f32[24]) -> (f32[3,5,5,24], f32[3,10,10,24]) {
  %3 = conv2d(%0, %1) {strides=[1, 1], dilations=[1, 1], padding="same"} : f32[3,10,10,24]
  %4 = add(%3, %2) : f32[3,10,10,24]
  %5 = relu(%4) : f32[3,10,10,24]
  %6 = max_pool2d(%5) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[3,5,5,24]
  return %6, %3
})",
    R"(graph @shallow(%0: f32[3,12,12,1], %1: f32[3,3,1,16], %2: f32[16]) -> (f32[3,6,6,16]) {
  %3 = conv2d(%0, %1) {strides=[1, 1], dilations=[1, 1], padding="same"} : f32[3,12,12,16]
  %4 = add(%3, %2) : f32[3,12,12,16]
  %5 = relu(%4) : f32[3,12,12,16]
  %6 = max_pool2d(%5) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[3,6,6,16]
  return %6
})",
    R"(graph @input_grad(%0: f32[3,12,12,16], %1: f32[16], %2: f32[3,3,16,24], %3: f32[3,6,6,24]) -> (f32[3,12,12,16]) {
  %4 = conv2d_backprop_input(%2, %3) {strides=[1, 1], dilations=[1, 1], padding="same", input_shape=[3, 6, 6, 16]} : f32[3,6,6,16]
  %5 = add(%0, %1) : f32[3,12,12,16]
  %6 = relu(%5) : f32[3,12,12,16]
  %7 = max_pool2d_grad(%6, %4) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[3,12,12,16]
  %8 = constant dense<0.0> : f32[]
  %9 = greater(%6, %8) : bool[3,12,12,16]
  %10 = select(%9, %7, %8) : f32[3,12,12,16]
  return %10
})",
    // Many images: each task of the image loops takes several.
    R"(graph @many_forward(%0: f32[40,14,14,16], %1: f32[3,3,16,32], %2: f32[32]) -> (f32[40,7,7,32]) {
  %3 = conv2d(%0, %1) {strides=[1, 1], dilations=[1, 1], padding="same"} : f32[40,14,14,32]
  %4 = add(%3, %2) : f32[40,14,14,32]
  %5 = relu(%4) : f32[40,14,14,32]
  %6 = max_pool2d(%5) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[40,7,7,32]
  return %6
})",
    R"(graph @many_images(%0: f32[160,28,28,1], %1: f32[3,3,1,32], %2: f32[32]) -> (f32[160,14,14,32]) {
  %3 = conv2d(%0, %1) {strides=[1, 1], dilations=[1, 1], padding="same"} : f32[160,28,28,32]
  %4 = add(%3, %2) : f32[160,28,28,32]
  %5 = relu(%4) : f32[160,28,28,32]
  %6 = max_pool2d(%5) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[160,14,14,32]
  return %6
})",
    R"(graph @many_input_grads(%0: f32[96,28,28,32], %1: f32[32], %2: f32[3,3,32,16], %3: f32[96,14,14,16]) -> (f32[96,28,28,32]) {
  %4 = conv2d_backprop_input(%2, %3) {strides=[1, 1], dilations=[1, 1], padding="same", input_shape=[96, 14, 14, 32]} : f32[96,14,14,32]
  %5 = add(%0, %1) : f32[96,28,28,32]
  %6 = relu(%5) : f32[96,28,28,32]
  %7 = max_pool2d_grad(%6, %4) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[96,28,28,32]
  %8 = constant dense<0.0> : f32[]
  %9 = greater(%6, %8) : bool[96,28,28,32]
  %10 = select(%9, %7, %8) : f32[96,28,28,32]
  return %10
})"};

std::string conv_graph_as(std::string text, const std::string& dtype) {
  for (size_t at = text.find("f32"); at != std::string::npos;
       at = text.find("f32", at + dtype.size()))
    text.replace(at, 3, dtype);
  return text;
}

TEST(CompileGraph, ConvolutionEpiloguesRunImageByImage) {
  const std::string bf16_kernels = runtime::gemm_bf16_kernels();
  runtime::set_gemm_bf16_kernels("float32");
  // The derived blocking: a tuned table in the cache directory may give these small images
  // tiles the direct convolution does not run (then the product runs whole and its epilogue
  // after it: right, but not what this test checks).
  const runtime::gemm_detail::MicroKernels* mk = runtime::gemm_detail::active_microkernels();
  if (mk != nullptr) runtime::gemm_detail::use_gemm_tuning(*mk, std::nullopt);
  struct Restore {
    std::string kernels;
    const runtime::gemm_detail::MicroKernels* mk;
    ~Restore() {
      runtime::set_gemm_bf16_kernels(kernels);
      if (mk != nullptr) runtime::gemm_detail::reload_gemm_tuning(*mk);
    }
  } restore{bf16_kernels, mk};
  std::vector<std::pair<std::string, std::string>> runs = {{"f32", "float32"}, {"bf16", "float32"}};
  for (const char* pairs : {"avx512bf16-emulated", "avx512bf16", "amx-emulated", "amx"}) {
    try {
      runtime::set_gemm_bf16_kernels(pairs);
      runs.emplace_back("bf16", pairs);
    } catch (const Error&) {  // this CPU cannot run them
    }
  }
  for (const auto& [dtype, bf16_set] : runs)
    for (const char* graph : kConvEpilogueGraphs) {
      if (bf16_set.starts_with("amx") && !std::string_view(graph).starts_with("graph @many"))
        continue;
      runtime::set_gemm_bf16_kernels(bf16_set);
      const std::string text = conv_graph_as(graph, dtype);
      SCOPED_TRACE("bf16 kernels " + bf16_set);
      testing::ScopedCacheDir cache;
      auto g = testing::optimized_graph(text);
      const std::vector<runtime::Array> args = random_args(*g, 5);
      testing::expect_bitwise_at_thread_counts(*g, args, text);
      auto exe = codegen::compile_graph(*g);
      std::vector<runtime::Array> vars;
      runtime::start_profiling();
      exe->run(args, vars);
      int contractions = 0;
      for (const runtime::ProfileEvent& e : runtime::stop_profiling()) {
        EXPECT_NE(e.category, "epilogue") << e.name << " in\n" << text;
        contractions += e.category == "contraction";
      }
      EXPECT_EQ(contractions, 1) << text;
    }
}

// A reshape of an arena value is a view of its bytes (codegen/memory_plan.h): no step runs for
// it, and the operand's buffer stays alive while the view is read, even where the operand
// itself is read for the last time (%6 below could otherwise be written over %4). A reshape
// of a parameter into a graph output still copies (neither is in the arena). Results equal the
// reference executor's within the error bounds.
TEST(CompileGraph, ReshapesOfArenaValuesAreViews) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(
      R"(graph @views(%0: f32[8,4,16], %1: f32[8,4,16], %2: f32[16,8], %3: f32[4,16]) -> (f32[64,8], f32[16,4,16], f32[64]) {
  %4 = concat(%0, %1) {axis=0} : f32[16,4,16]
  %5 = reshape(%4) {shape=[64, 16]} : f32[64,16]
  %6 = tanh(%4) : f32[16,4,16]
  %7 = matmul(%5, %2) {transpose_a=false, transpose_b=false} : f32[64,8]
  %8 = reshape(%3) {shape=[64]} : f32[64]
  return %7, %6, %8
})");
  const std::vector<runtime::Array> args = random_args(*g, 6);
  EXPECT_TRUE(compiled_within_bounds(*g, args, {})) << ir::print_graph(*g);
  codegen::CompiledGraph compiled = codegen::compile_graph_in_full(*g);
  const auto& exe = compiled.executable;
  int reshape_nodes = 0, reshape_steps = 0;
  for (const auto& n : g->nodes()) reshape_nodes += n->is_op(OpKind::Reshape);
  for (const runtime::ExecutableStep& s : exe->steps())
    reshape_steps += s.name.find("reshape") != std::string::npos;
  ASSERT_EQ(reshape_nodes, 2) << "the optimized graph changed:\n" << ir::print_graph(*g);
  EXPECT_EQ(reshape_steps, 1) << "%5 is a view, %8 copies the argument into the output";
  EXPECT_EQ(compiled.arena.plan.view_values(), 1) << compiled.arena.plan.to_table(*g);
}

// A concat's computed operands are written in their place in its result (codegen/memory_plan.h)
// and the concat moves only the rest (here the parameter); the values are the reference's.
TEST(CompileGraph, ConcatOperandsAreComputedInTheirPlace) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(
      R"(graph @stack(%0: f32[3,4,16], %1: f32[2,4,16], %2: f32[16,8]) -> (f32[96,8], f32[4,4,32]) {
  %3 = tanh(%0) : f32[3,4,16]
  %4 = constant dense<[2, 1, 0]> : i64[3]
  %5 = gather(%3, %4) {axis=0} : f32[3,4,16]
  %6 = exp(%1) : f32[2,4,16]
  %7 = concat(%5, %1, %6) {axis=0} : f32[7,4,16]
  %8 = reshape(%7) {shape=[28, 16]} : f32[28,16]
  %9 = slice(%8) {start=[0, 0], stop=[24, 16], step=[1, 1]} : f32[24,16]
  %10 = concat(%9, %9, %9, %9) {axis=0} : f32[96,16]
  %11 = matmul(%10, %2) {transpose_a=false, transpose_b=false} : f32[96,8]
  %12 = slice(%7) {start=[0, 0, 0], stop=[4, 4, 16], step=[1, 1, 1]} : f32[4,4,16]
  %13 = neg(%12) : f32[4,4,16]
  %14 = concat(%12, %13) {axis=2} : f32[4,4,32]
  return %11, %14
})");
  const std::vector<runtime::Array> args = random_args(*g, 7);
  EXPECT_TRUE(compiled_within_bounds(*g, args, {})) << ir::print_graph(*g);
  codegen::CompiledGraph compiled = codegen::compile_graph_in_full(*g);
  const codegen::MemoryPlan& plan = compiled.arena.plan;
  // %5 and %6 (or what the optimizer made of them) in %7; %9 is read four times and %14's
  // windows are not whole blocks: copied.
  EXPECT_EQ(plan.placed_values(), 2) << ir::print_graph(*g) << plan.to_table(*g);
  // The steps' byte counts (the profiler's): the concat of %7 moves only the parameter %1.
  int concats = 0;
  for (const runtime::ExecutableStep& s : compiled.executable->steps())
    if (s.kind == runtime::ExecutableStep::Kind::kOp && s.op == OpKind::Concat &&
        s.type.shape == Shape{7, 4, 16}) {
      ++concats;
      EXPECT_EQ(s.bytes, 2.0 * 2 * 4 * 16 * 4) << "read and written: %1, f32[2,4,16]";
    }
  EXPECT_EQ(concats, 1) << ir::print_graph(*g);
}

// A transpose standing alone that moves the innermost axis runs as the library's tiled copy (an
// op step), one that keeps it as a generated kernel; both move every element bitwise, at any
// thread count, for any element size (bf16, bool and int64 included).
TEST(CompileGraph, LoneTransposesOfTheInnerAxisRunInTheLibrary) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(
      R"(graph @t(%0: f32[37,300], %1: bf16[5,7,9], %2: bool[6,10], %3: i64[4,6,8]) -> (f32[300,37], bf16[9,5,7], bool[10,6], i64[6,4,8], f32[37,300]) {
  %4 = transpose(%0) {perm=[1, 0]} : f32[300,37]
  %5 = transpose(%1) {perm=[2, 0, 1]} : bf16[9,5,7]
  %6 = transpose(%2) {perm=[1, 0]} : bool[10,6]
  %7 = transpose(%3) {perm=[1, 0, 2]} : i64[6,4,8]
  %8 = neg(%0) : f32[37,300]
  return %4, %5, %6, %7, %8
})");
  testing::expect_bitwise_at_thread_counts(*g, random_args(*g, 8), "lone transposes");
  auto exe = codegen::compile_graph(*g);
  int library = 0, generated = 0;
  for (const runtime::ExecutableStep& s : exe->steps()) {
    library += s.kind == runtime::ExecutableStep::Kind::kOp && s.op == OpKind::Transpose;
    generated += s.kind == runtime::ExecutableStep::Kind::kKernel &&
                 s.name.find("transpose") != std::string::npos;
  }
  EXPECT_EQ(library, 3) << ir::print_graph(*g);
  EXPECT_EQ(generated, 1) << "perm [1, 0, 2] keeps the inner axis: a generated row copy";
}

// Executable::run's `into`: an output with a buffer of its own is computed in the caller's
// array of its type and returned as that array; an array of another type, an output returned
// twice or a parameter returned as an output are left alone (their outputs as without it),
// and an argument is returned as that very array even when it is a view.
TEST(CompileGraph, OutputsComputedInTheCallersArrays) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(
      R"(graph @f(%0: f32[8,16]) -> (f32[8,16], f32[8,16], f32[8,16], f32[8,16], f32[8,16]) {
  %1 = exp(%0) : f32[8,16]
  %2 = neg(%0) : f32[8,16]
  %3 = tanh(%0) : f32[8,16]
  return %1, %2, %0, %3, %3
})");
  auto exe = codegen::compile_graph(*g);
  std::mt19937 rng(9);
  // The argument a view (as a while body's operand is): passed back as it is, not copied.
  const runtime::Array owner = testing::random_array(g->parameter(0)->type(), rng);
  std::vector<runtime::Array> args = {
      {owner.dtype, owner.shape,
       runtime::Storage::view(owner.raw(), owner.nbytes(), owner.storage)}};
  std::vector<runtime::Array> vars;
  const std::vector<runtime::Array> want = exe->run(args, vars);
  std::vector<runtime::Array> into;
  for (int i = 0; i < 5; ++i) into.push_back(runtime::Array::empty(DType::f32, Shape{8, 16}));
  into[1] = runtime::Array::empty(DType::f32, Shape{16, 8});  // another type
  const std::vector<runtime::Array> got = exe->run(args, vars, {}, into);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].storage, into[0].storage);
  for (int i = 1; i < 5; ++i) EXPECT_NE(got[size_t(i)].storage, into[size_t(i)].storage) << i;
  EXPECT_EQ(got[2].storage, args[0].storage) << "the argument itself";
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(testing::bitwise_equal(got[i], want[i])) << i;
}

}  // namespace
}  // namespace kiln
