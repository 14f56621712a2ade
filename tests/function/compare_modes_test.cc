// kiln::compare_modes: on a small training step the eager results are the reference
// executor's (bitwise) and the compiled ones are within the rounding-model bounds of
// docs/testing.md, and the reported differences are exactly those of the returned results;
// variables are restored before each mode and at the end (a counter that each step increments
// shows no difference and ends where it started); a function whose traced (compiled) path is
// made to differ from its eager path is caught.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "kiln/kiln.h"
#include "tests/support/error_bound.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

double max_abs_difference(const Tensor& a, const Tensor& b) {
  std::vector<float> x = floats(a), y = floats(b);
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(double(x[i]) - double(y[i])));
  return m;
}

TEST(CompareModes, TrainingStepAgreesWithinRoundingBounds) {
  Dense layer(6);
  Optimizer opt = SGD({.learning_rate = 0.1});
  auto step = [&](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor loss = mean(square(tanh(layer(x)) - y));
    std::vector<Variable> vars = layer->trainable_weights();
    opt->apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  Tensor x = random_normal({16, 5}, 1), y = random_normal({16, 6}, 2);
  layer(x);  // build, so the starting weights are known before compare_modes
  std::vector<Variable> weights = layer->trainable_weights();
  std::vector<std::vector<float>> start;
  for (const Variable& v : weights) start.push_back(floats(v.value()));

  std::ostringstream report;
  ModeComparison c = compare_modes(
      CompareOptions{.name = "step", .warmup = 1, .steps = 3, .print_to = &report}, step, x, y);

  // The variables end as they started.
  for (size_t i = 0; i < weights.size(); ++i) EXPECT_EQ(floats(weights[i].value()), start[i]);
  // Outputs (the loss) then the assigned variables (kernel, bias, the SGD's iteration count).
  auto traced = function(step, {.name = "step_reference"});
  ConcreteFunction cf = traced.concrete(x, y);
  size_t written = 0;
  for (const VariableUse& v : cf.variables()) written += v.written;
  ASSERT_EQ(c.differences.size(), 1 + written);
  EXPECT_EQ(c.differences[0].name, "output 0");
  EXPECT_NE(report.str().find("variable " + weights[0].name()), std::string::npos);
  for (size_t i = 0; i < c.differences.size(); ++i)
    EXPECT_EQ(c.differences[i].max_abs,
              max_abs_difference(c.eager_results[i], c.compiled_results[i]));

  // Bounds from the computation: the traced graph from the same starting values on the
  // reference executor (float32: equal to eager; float64 with the rounding model: bounds).
  std::vector<runtime::Array> vars;
  for (const VariableUse& v : cf.variables()) vars.push_back(v.variable.value().array());
  testing::ErrorBoundedReference reference(cf.graph(), {x.array(), y.array()}, vars, 7);
  std::vector<runtime::Array> got;
  got.push_back(c.compiled_results[0].array());
  size_t next = 1;
  for (size_t i = 0; i < cf.variables().size(); ++i) {
    if (!cf.variables()[i].written) {
      got.push_back(vars[i]);
      continue;
    }
    ASSERT_LT(next, c.eager_results.size());
    EXPECT_EQ(floats(c.eager_results[next]), floats(Tensor(reference.float32_results()[1 + i])))
        << "eager equals the reference executor";
    got.push_back(c.compiled_results[next++].array());
  }
  EXPECT_EQ(floats(c.eager_results[0]), floats(Tensor(reference.float32_results()[0])));
  EXPECT_TRUE(reference.check(got));

  EXPECT_EQ(c.eager.step_seconds.size(), 3u);
  EXPECT_EQ(c.compiled.step_seconds.size(), 3u);
  EXPECT_GT(c.arena_bytes, 0u);
  EXPECT_GT(c.compile_seconds, 0.0);
  EXPECT_GT(c.eager_peak_bytes, 0);
  EXPECT_EQ(report.str(), c.to_string());
  for (const char* row : {"step time (median)", "speedup", "compile time", "arena",
                          "peak tensor memory", "variable " /* one line per result */})
    EXPECT_NE(report.str().find(row), std::string::npos) << row << "\n" << report.str();
}

TEST(CompareModes, VariablesAreRestoredBeforeEachMode) {
  // Each call adds 1: without restoring, the compiled mode would start from where the eager
  // calls (1 + warmup + steps) left the counter, and differ by that much.
  Variable counter("counter", zeros({3}));
  auto step = [&](const Tensor& x) {
    counter.assign_add(x);
    return counter.value() * scalar(2.0f);
  };
  Tensor one = ones({3});
  ModeComparison c = compare_modes(CompareOptions{.steps = 2, .print_to = nullptr}, step, one);
  ASSERT_EQ(c.differences.size(), 2u);
  EXPECT_EQ(c.differences[1].name, "variable counter");
  for (const ResultDifference& d : c.differences) {
    EXPECT_EQ(d.max_abs, 0.0) << d.name;  // 0 + 1 and 2 * 1: exact in both modes
    EXPECT_EQ(d.max_rel, 0.0) << d.name;
  }
  EXPECT_EQ(floats(c.compiled_results[1]), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(floats(counter.value()), (std::vector<float>{0, 0, 0}));
}

TEST(CompareModes, CatchesAnEagerCompiledMismatch) {
  // An injected mismatch: the traced (compiled) path scales by 1 + 2^-7, the eager path not.
  auto f = [](const Tensor& x) {
    Tensor y = exp(x);
    return detail::tracing() ? y * scalar(1.0f + 0x1p-7f) : y;
  };
  Tensor x = random_normal({64}, 3);
  ModeComparison c = compare_modes(CompareOptions{.steps = 1, .print_to = nullptr}, f, x);
  ASSERT_EQ(c.differences.size(), 1u);
  // exp is within a few ulps in each mode (< 2^-20 relative); the injected error is 2^-7.
  EXPECT_GT(c.differences[0].max_rel, 0x1p-8);
  EXPECT_LT(c.differences[0].max_rel, 0x1p-6);
}

// bf16 results are also compared with the float32 run of the same step: a bf16 product of
// float32 weights and inputs (as mixed_bfloat16 computes) is within bf16's rounding of it
// (operands rounded once each, the result once: |rel| <= 3 * 2^-8 plus the float32 sum's
// 16 * 2^-24, relative to the sum of |terms|, which the positive operands make the result),
// and not equal to it; float32 results report -1.
TEST(CompareModes, Bf16ResultsAreComparedWithTheFloat32Run) {
  Variable w("w", random_uniform({16, 8}, 5, 0.5, 1.5));
  auto f = [&](const Tensor& x) {
    Tensor y = matmul(cast(x, DType::bf16), cast(w.value(), DType::bf16));
    return std::vector<Tensor>{y, sum(cast(y, DType::f32))};
  };
  Tensor x = random_uniform({4, 16}, 6, 0.5, 1.5);
  ModeComparison c = compare_modes(CompareOptions{.steps = 1, .print_to = nullptr}, f, x);
  ASSERT_EQ(c.differences.size(), 2u);
  const ResultDifference& d = c.differences[0];
  EXPECT_EQ(d.type.dtype, DType::bf16);
  const double bound = 3 * 0x1p-8 + 16 * 0x1p-24;
  EXPECT_GT(d.eager_vs_float32, 0.0);
  EXPECT_LE(d.eager_vs_float32, bound);
  EXPECT_GT(d.compiled_vs_float32, 0.0);
  EXPECT_LE(d.compiled_vs_float32, bound);
  EXPECT_EQ(c.differences[1].eager_vs_float32, -1.0);
  EXPECT_NE(c.to_string().find("vs float32: eager rel"), std::string::npos);
}

TEST(CompareModes, BadOptionsAreErrors) {
  auto f = [](const Tensor& x) { return x + scalar(1.0f); };
  std::string e = test::error_of(
      [&] { compare_modes(CompareOptions{.steps = 0, .print_to = nullptr}, f, ones({2})); });
  EXPECT_NE(e.find("steps must be >= 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln
