// The gradient of relu -> max_pool2d computed by a compiled function (the pool and its
// gradient are generated kernels, codegen/pool_window.h) against central finite differences
// of the same loss, and against the eager gradient (bitwise: the gradient only routes the
// loss weights). float64; inputs distinct and away from the ReLU's kink by more than the
// step, so the loss is linear in each coordinate over [x - h, x + h].
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

struct MaxPoolGradientCase {
  Shape input;
  Axes pool, strides;
  std::string padding;
};

TEST(CompiledMaxPoolGradient, MatchesFiniteDifferencesAndEager) {
  ScopedExecutionMode compiled_mode(ExecutionMode::kCompiled);  // kiln_tests default: reference
  const MaxPoolGradientCase cases[] = {
      {{3, 6, 6, 4}, {2, 2}, {2, 2}, "valid"},
      {{2, 5, 5, 3}, {2, 2}, {2, 2}, "same"},
      {{2, 7, 6, 2}, {3, 3}, {2, 2}, "same"},  // overlapping windows
      {{2, 6, 7, 3}, {3, 2}, {1, 2}, "valid"},
  };
  uint64_t seed = 40;
  for (const MaxPoolGradientCase& c : cases) {
    SCOPED_TRACE(c.input.to_string() + " " + c.padding);
    // Distinct values 0.03 apart, the nearest to 0 at 0.01 (no ties, no value at the kink).
    Tensor x = gradcheck::distinct(c.input, seed++, -2.01, 0.03);
    Shape out = max_pool2d(x, c.pool, c.strides, c.padding).shape();
    Tensor w = gradcheck::uniform(out, seed++, -1, 1);
    auto loss = [&](const Tensor& v) {
      return sum(max_pool2d(relu(v), c.pool, c.strides, c.padding) * w);
    };
    auto grad = [&](const Tensor& v) {
      GradientTape tape;
      tape.watch(v);
      return tape.gradient(loss(v), v);
    };
    auto compiled = function(std::function<Tensor(const Tensor&)>(grad), {.name = "pool_grad"});
    std::vector<double> got = compiled(x).to_vector<double>();
    // It ran compiled, the pool's gradient inside a generated kernel (a fusion body; the
    // forward pool is dead code here: the loss's gradient with respect to it is w).
    ConcreteFunction cf = compiled.concrete(x);
    EXPECT_EQ(cf.compile_stats().executables, 1);
    std::string optimized = cf.ir_text(Stage::kOptimized);
    for (const char* op : {" max_pool2d_grad("}) {
      ASSERT_NE(optimized.find(op), std::string::npos) << optimized;
      // Top-level nodes are indented by 2 spaces, nodes of fusion bodies by more.
      for (size_t at = optimized.find(op); at != std::string::npos;
           at = optimized.find(op, at + 1)) {
        size_t line = optimized.rfind('\n', at) + 1;
        EXPECT_GT(optimized.find_first_not_of(' ', line) - line, 2u) << op << " outside a fusion";
      }
    }
    std::vector<double> eager = grad(x).to_vector<double>();
    EXPECT_EQ(got, eager);
    // Central differences of a function linear around x are exact up to the rounding of the
    // two sums: each within n u sum|terms| (u = 2^-53), divided by 2h.
    std::vector<double> xs = x.to_vector<double>();
    const double h = 1e-3;
    double terms = sum(abs(w) * max_pool2d(relu(x), c.pool, c.strides, c.padding)).item<double>() +
                   1.0;  // the terms' magnitudes (+ 1 for the steps)
    const double bound = 2 * double(out.num_elements()) * 0x1p-53 * terms / (2 * h);
    for (size_t i = 0; i < xs.size(); i += 7) {  // a sample of the coordinates
      std::vector<double> up = xs, down = xs;
      up[i] += h;
      down[i] -= h;
      double fd =
          (loss(tensor(up, c.input)).item<double>() - loss(tensor(down, c.input)).item<double>()) /
          (2 * h);
      EXPECT_NEAR(got[i], fd, bound) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace kiln
