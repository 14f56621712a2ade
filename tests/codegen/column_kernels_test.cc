// Kernels by blocks of columns (codegen IterationMode::kColumns): a bias gradient's sum over the
// batch and the update of the bias, which would otherwise run serially, split the last axis into
// blocks of kColumnBlock columns. Each sum is still combined in row order, so its bits are those
// of a float32 loop over the rows (checked against one), the same at 1, 2 and 3 threads; the plan
// refuses kernels that read a materialized value at another column.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kiln/codegen/decompose.h"
#include "kiln/codegen/kernel_plan.h"
#include "kiln/codegen/lower_kernel.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using runtime::Array;

// A ReLU's gradient d, its bias gradient s = sum(d) over the batch, and a gradient-descent step
// of the bias, b - 0.5 * s.
std::string bias_update_graph(int64_t rows, int64_t cols) {
  return fmt::format(
      R"(graph @bias_update(%x: f32[{0},{1}], %g: f32[{0},{1}], %b: f32[{1}]) -> (f32[{0},{1}], f32[{1}], f32[{1}]) {{
  %zero = constant dense<0.0> : f32[]
  %half = constant dense<0.5> : f32[]
  %p = greater(%x, %zero) : bool[{0},{1}]
  %d = select(%p, %g, %zero) : f32[{0},{1}]
  %s = sum(%d) {{axes=[0], keepdims=false}} : f32[{1}]
  %step = mul(%s, %half) : f32[{1}]
  %nb = sub(%b, %step) : f32[{1}]
  return %d, %s, %nb
}})",
      rows, cols);
}

// The plan of `text`'s body as one kernel.
codegen::KernelPlan plan_of(const std::string& text) {
  auto parsed = ir::parse_graph(text, "test");
  return codegen::plan_kernel(*codegen::decompose_for_codegen(*parsed));
}

TEST(ColumnKernels, BiasGradientAndUpdateRunByBlocksOfColumns) {
  // 100 columns: six whole blocks of 16 and a short one of 4.
  const codegen::KernelPlan plan = plan_of(bias_update_graph(40, 100));
  EXPECT_EQ(plan.mode, codegen::IterationMode::kColumns);
  EXPECT_EQ(plan.columns, 100);
  EXPECT_EQ(plan.extent, 7);
  // One block of columns or fewer: serial.
  EXPECT_EQ(plan_of(bias_update_graph(40, codegen::kColumnBlock)).mode,
            codegen::IterationMode::kSerial);
}

TEST(ColumnKernels, SumsAreTheRowOrderLoopAtEveryThreadCount) {
  testing::ScopedCacheDir cache;
  for (int64_t cols : {int64_t{100}, int64_t{1024}}) {
    SCOPED_TRACE(fmt::format("{} columns", cols));
    const int64_t rows = 37;
    auto g = testing::optimized_graph(bias_update_graph(rows, cols));
    const std::vector<Array> args = testing::random_args(*g, 21);
    auto exe = codegen::compile_graph(*g);
    const int threads = num_threads();
    std::vector<Array> first;
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      std::vector<Array> vars;
      std::vector<Array> got = exe->run(args, vars);
      ASSERT_EQ(got.size(), 3u);
      if (first.empty()) first = got;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(testing::bitwise_equal(got[i], first[i]))
            << "output " << i << ", " << t << " threads against 1";
    }
    set_num_threads(threads);
    const float *x = args[0].data<float>(), *grad = args[1].data<float>(),
                *b = args[2].data<float>();
    for (int64_t c = 0; c < cols; ++c) {
      float sum = 0.0f;  // the kernel's order: row after row, from +0
      for (int64_t r = 0; r < rows; ++r) {
        const float d = x[r * cols + c] > 0.0f ? grad[r * cols + c] : 0.0f;
        ASSERT_EQ(first[0].data<float>()[r * cols + c], d) << "d at " << r << ", " << c;
        sum += d;
      }
      ASSERT_EQ(first[1].data<float>()[c], sum) << "column " << c;
      // b - 0.5 * s: one rounding, or none of the product where it contracts to an FMA.
      const double want = double(b[c]) - 0.5 * double(sum);
      EXPECT_LE(std::abs(double(first[2].data<float>()[c]) - want),
                std::ldexp(std::abs(want), -24) + std::ldexp(1.0, -149))
          << "new bias at " << c;
    }
  }
}

// A value read at another column than the one computed keeps the kernel serial: a block would
// read columns another thread has not written yet.
TEST(ColumnKernels, ReadingAMaterializedValueAtAnotherColumnStaysSerial) {
  // The column sums s, then s's total (a reduction over the last axis) added to every one.
  const std::string total = R"(graph @f(%x: f32[8,64]) -> (f32[64]) {
  %s = sum(%x) {axes=[0], keepdims=false} : f32[64]
  %t = sum(%s) {axes=[0], keepdims=false} : f32[]
  %y = add(%s, %t) : f32[64]
  return %y
})";
  EXPECT_EQ(plan_of(total).mode, codegen::IterationMode::kSerial);
  // s read transposed: column c of y reads row c of s.
  const std::string transposed = R"(graph @f(%x: f32[8,64,64]) -> (f32[64,64]) {
  %s = sum(%x) {axes=[0], keepdims=false} : f32[64,64]
  %t = transpose(%s) {perm=[1, 0]} : f32[64,64]
  %y = add(%s, %t) : f32[64,64]
  return %y
})";
  EXPECT_EQ(plan_of(transposed).mode, codegen::IterationMode::kSerial);
  // The same sums read at their own columns run by columns.
  const std::string own = R"(graph @f(%x: f32[8,64,64]) -> (f32[64,64]) {
  %s = sum(%x) {axes=[0], keepdims=false} : f32[64,64]
  %y = mul(%s, %s) : f32[64,64]
  return %y
})";
  EXPECT_EQ(plan_of(own).mode, codegen::IterationMode::kColumns);
}

// An update written over its input (a variable's new value, in place) stays in place by columns:
// each block reads the input only at the columns it writes.
TEST(ColumnKernels, InPlaceUpdateIsHonoured) {
  auto parsed = ir::parse_graph(bias_update_graph(24, 48), "test");
  // Output 2 (the new bias) over parameter 2 (the bias).
  codegen::LoweredKernel k = codegen::lower_kernel(*parsed, "k", nullptr, {{2, 2}});
  EXPECT_EQ(k.layout.iteration, "columns");
  EXPECT_EQ(k.layout.extent, 3);
  ASSERT_EQ(k.layout.overwrites.size(), 1u);
}

}  // namespace
}  // namespace kiln
