// Casts to bf16 of a matmul's or convolution's float32 operands fused into its contraction group
// (operand prologues: ir/operand_prologue.h, fusion rule 5e): after the optimize pipeline no
// cast feeding a bf16 contraction is left outside a fusion, the runtime receives the float32
// values and rounds them where it reads them, and the compiled results equal the reference executor
// (which runs the cast, then the product of bf16 values) bit for bit at 1, 2 and 3 threads, on
// every bf16 kernel set this CPU runs. Graphs: a Dense layer (input and kernel cast, bias, ReLU), a
// kernel cast read by a forward product and a transposed input-gradient product and a
// weight gradient of a cast input (ta), a product with no epilogue, a batched product, the
// CNN's convolutions and their gradients (on the float32 kernels their direct kernels, on the
// pair kernels bf16 im2col chunks), and a cast read by the epilogue too.
#include <gtest/gtest.h>

#include "kiln/ir/printer.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/profiler.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

// The bf16 kernel sets this CPU runs (the pair layouts' emulations need avx512 float32 kernels).
std::vector<std::string> prologue_bf16_sets() {
  std::vector<std::string> sets;
  for (const char* name : {"float32", "avx512bf16-emulated", "amx-emulated", "avx512bf16", "amx"}) {
    const std::string before = runtime::gemm_bf16_kernels();
    try {
      runtime::set_gemm_bf16_kernels(name);
      sets.push_back(name);
    } catch (const Error&) {  // this CPU cannot run them
    }
    runtime::set_gemm_bf16_kernels(before);
  }
  return sets;
}

struct RestorePrologueKernels {
  std::string kernels = runtime::gemm_bf16_kernels();
  ~RestorePrologueKernels() { runtime::set_gemm_bf16_kernels(kernels); }
};

// Casts outside fusions that feed a matmul or convolution (none may be left).
int unfused_operand_casts(const ir::Graph& g) {
  int count = 0;
  for (const auto& n : g.nodes())
    if (n->is_op(OpKind::Cast))
      for (const auto& m : g.nodes())
        if (m->kind() == ir::NodeKind::kOp && op_info(m->op()).has(kContraction))
          for (const ir::Value* v : m->inputs()) count += v == n->output();
  return count;
}

const char* const kPrologueGraphs[] = {
    R"(graph @dense(%0: f32[70,96], %1: f32[96,40], %2: f32[40]) -> (bf16[70,40]) {
  %3 = cast(%0) {dtype=bf16} : bf16[70,96]
  %4 = cast(%1) {dtype=bf16} : bf16[96,40]
  %5 = matmul(%3, %4) {transpose_a=false, transpose_b=false} : bf16[70,40]
  %6 = cast(%2) {dtype=bf16} : bf16[40]
  %7 = add(%5, %6) : bf16[70,40]
  %8 = relu(%7) : bf16[70,40]
  return %8
})",
    // The kernel's cast read by the forward product and the input gradient (tb); the input's
    // cast by the forward product and the weight gradient (ta), whose epilogue is float32.
    R"(graph @dense_grads(%0: f32[130,64], %1: f32[64,48], %2: bf16[130,48]) -> (bf16[130,48], bf16[130,64], f32[64,48]) {
  %3 = cast(%0) {dtype=bf16} : bf16[130,64]
  %4 = cast(%1) {dtype=bf16} : bf16[64,48]
  %5 = matmul(%3, %4) {transpose_a=false, transpose_b=false} : bf16[130,48]
  %6 = tanh(%5) : bf16[130,48]
  %7 = matmul(%2, %4) {transpose_a=false, transpose_b=true} : bf16[130,64]
  %8 = constant dense<2.0> : bf16[]
  %9 = mul(%7, %8) : bf16[130,64]
  %10 = matmul(%3, %2) {transpose_a=true, transpose_b=false} : bf16[64,48]
  %11 = cast(%10) {dtype=f32} : f32[64,48]
  %12 = sub(%1, %11) : f32[64,48]
  return %6, %9, %12
})",
    // No epilogue: the product is the group's output (softmax reads it in its own group).
    R"(graph @alone(%0: bf16[50,200], %1: f32[200,12]) -> (bf16[50,12]) {
  %2 = cast(%1) {dtype=bf16} : bf16[200,12]
  %3 = matmul(%0, %2) {transpose_a=false, transpose_b=false} : bf16[50,12]
  %4 = softmax(%3) {axis=-1} : bf16[50,12]
  return %4
})",
    R"(graph @batched(%0: f32[4,33,40], %1: f32[40,24]) -> (bf16[4,33,24]) {
  %2 = cast(%0) {dtype=bf16} : bf16[4,33,40]
  %3 = cast(%1) {dtype=bf16} : bf16[40,24]
  %4 = matmul(%2, %3) {transpose_a=false, transpose_b=false} : bf16[4,33,24]
  %5 = neg(%4) : bf16[4,33,24]
  return %5
})",
    // The CNN's convolutions: a shallow first layer (one channel: its direct kernel) and a
    // deeper one with the image and filter cast, bias, ReLU and max-pool as the epilogue run
    // image by image; the filter's cast in the input gradient, the image's in the filter
    // gradient.
    R"(graph @conv(%0: f32[3,12,12,1], %1: f32[3,3,1,16], %2: f32[3,3,16,8], %3: bf16[8]) -> (bf16[3,6,6,8]) {
  %4 = cast(%0) {dtype=bf16} : bf16[3,12,12,1]
  %5 = cast(%1) {dtype=bf16} : bf16[3,3,1,16]
  %6 = conv2d(%4, %5) {strides=[1, 1], dilations=[1, 1], padding="same"} : bf16[3,12,12,16]
  %7 = relu(%6) : bf16[3,12,12,16]
  %8 = cast(%2) {dtype=bf16} : bf16[3,3,16,8]
  %9 = conv2d(%7, %8) {strides=[1, 1], dilations=[1, 1], padding="same"} : bf16[3,12,12,8]
  %10 = add(%9, %3) : bf16[3,12,12,8]
  %11 = relu(%10) : bf16[3,12,12,8]
  %12 = max_pool2d(%11) {pool_size=[2, 2], strides=[2, 2], padding="valid"} : bf16[3,6,6,8]
  return %12
})",
    R"(graph @conv_grads(%0: f32[3,10,10,4], %1: f32[3,3,4,8], %2: bf16[3,10,10,8]) -> (bf16[3,10,10,4], f32[3,3,4,8]) {
  %3 = cast(%0) {dtype=bf16} : bf16[3,10,10,4]
  %4 = cast(%1) {dtype=bf16} : bf16[3,3,4,8]
  %5 = conv2d_backprop_input(%4, %2) {strides=[1, 1], dilations=[1, 1], padding="same", input_shape=[3, 10, 10, 4]} : bf16[3,10,10,4]
  %6 = neg(%5) : bf16[3,10,10,4]
  %7 = conv2d_backprop_filter(%3, %2) {filter_shape=[3, 3, 4, 8], strides=[1, 1], dilations=[1, 1], padding="same"} : bf16[3,3,4,8]
  %8 = cast(%7) {dtype=f32} : f32[3,3,4,8]
  %9 = sub(%1, %8) : f32[3,3,4,8]
  return %6, %9
})",
    // The cast is read by the epilogue as well: the epilogue kernel computes it there.
    R"(graph @epilogue_reads_it(%0: f32[64,64], %1: bf16[64,64]) -> (bf16[64,64]) {
  %2 = cast(%0) {dtype=bf16} : bf16[64,64]
  %3 = matmul(%2, %1) {transpose_a=false, transpose_b=false} : bf16[64,64]
  %4 = add(%3, %2) : bf16[64,64]
  return %4
})"};

TEST(OperandPrologue, CastsJoinTheProductAndGiveTheReferenceBits) {
  RestorePrologueKernels restore;
  for (const std::string& set : prologue_bf16_sets()) {
    runtime::set_gemm_bf16_kernels(set);
    for (const char* text : kPrologueGraphs) {
      testing::ScopedCacheDir cache;
      auto g = testing::optimized_graph(text);
      EXPECT_EQ(unfused_operand_casts(*g), 0) << ir::print_graph(*g);
      testing::expect_bitwise_at_thread_counts(*g, testing::random_args(*g, 9), set + "\n" + text);
    }
  }
}

// What runs shows it: the Dense layer is one contraction step, and its GEMM plan names the
// operands rounded as they are packed or widened ("A f32->bf16 packed", "... rows-widened").
TEST(OperandPrologue, ThePlanNamesTheRoundedOperands) {
  RestorePrologueKernels restore;
  runtime::set_gemm_bf16_kernels("float32");
  if (runtime::gemm_kernels() == "eigen") GTEST_SKIP() << "Eigen's GEMM prints no plans";
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(kPrologueGraphs[0]);
  auto exe = codegen::compile_graph(*g);
  ASSERT_EQ(exe->steps().size(), 1u) << ir::print_graph(*g);
  EXPECT_EQ(exe->steps()[0].kind, runtime::ExecutableStep::Kind::kContraction);
  std::vector<runtime::Array> vars;
  runtime::start_profiling();
  exe->run(testing::random_args(*g, 2), vars);
  int plans = 0;
  for (const runtime::ProfileEvent& e : runtime::stop_profiling())
    if (e.category == "gemm") {
      ++plans;
      EXPECT_NE(e.detail.find("A f32->bf16 "), std::string::npos) << e.detail;
      EXPECT_NE(e.detail.find("B f32->bf16 "), std::string::npos) << e.detail;
    }
  EXPECT_EQ(plans, 1);
}

// A group that updates a variable in place must not do so when its product reads that
// variable through a prologue cast: the GEMM may still pack it while the epilogue writes rows
// (codegen/variable_updates.h). No overwrite pair is asked for, and a donated buffer ends with
// the reference's values.
TEST(OperandPrologue, AVariableReadThroughACastIsNotUpdatedInPlaceByItsGroup) {
  testing::ScopedCacheDir cache;
  auto g = testing::optimized_graph(R"(graph @step(%0: bf16[48,48]) -> (f32[]) {
  variables {
    $0 = "w" : f32[48,40] read write -> %1
  }
  %2 = cast(%1) {dtype=bf16} : bf16[48,40]
  %3 = matmul(%0, %2) {transpose_a=false, transpose_b=false} : bf16[48,40]
  %4 = cast(%3) {dtype=f32} : f32[48,40]
  %5 = constant dense<0.125> : f32[]
  %6 = mul(%4, %5) : f32[48,40]
  %7 = sub(%1, %6) : f32[48,40]
  %8 = assign $0, %7 : f32[48,40]
  %9 = constant dense<1.0> : f32[]
  return %9
})");
  EXPECT_EQ(unfused_operand_casts(*g), 0) << ir::print_graph(*g);
  auto exe = codegen::compile_graph(*g);
  for (const auto& s : exe->steps())
    if (s.kernel) {
      EXPECT_TRUE(s.kernel->layout.overwrites.empty()) << s.name;
    }
  std::mt19937 rng(4);
  const std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng)};
  const runtime::Array w = testing::random_array(g->variable(0).type, rng);
  const testing::RunResult want = testing::run_reference(*g, args, {testing::copy_of(w)});
  std::vector<runtime::Array> vars = {testing::copy_of(w)};
  exe->run(args, vars, {true});
  EXPECT_TRUE(testing::bitwise_equal(vars[0], want.variables[0]));
}

}  // namespace
}  // namespace kiln
