// Finite-difference checks of the gradient rules of reductions, logsumexp and the softmax
// family (frontend/grad_reduce.cc).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::away_from_zero;
using gradcheck::distinct;
using gradcheck::uniform;

using Reduction = std::function<Tensor(const Tensor&, const Axes&, bool)>;

std::string axes_name(const Axes& axes, bool keepdims) {
  return fmt::format("axes [{}] keepdims {}", fmt::join(axes, ", "), keepdims);
}

const std::vector<Axes>& axis_sets() {
  static const std::vector<Axes> sets = {{}, {0}, {1}, {-1}, {0, 2}, {2, 0, 1}, {-2, -1}};
  return sets;
}

// Checks `op` over shape (2, 3, 4) for every axis set, with and without keepdims.
void check_reduction(const Reduction& op, const Tensor& x) {
  for (const Axes& axes : axis_sets()) {
    for (bool keepdims : {false, true}) {
      SCOPED_TRACE(axes_name(axes, keepdims));
      EXPECT_GRADIENTS([&](const std::vector<Tensor>& in) { return op(in[0], axes, keepdims); },
                       {x});
    }
  }
}

TEST(ReduceGradients, Sum) {
  check_reduction([](const Tensor& x, const Axes& a, bool k) { return sum(x, a, k); },
                  uniform({2, 3, 4}, 1, -2, 2));
}

TEST(ReduceGradients, Mean) {
  check_reduction([](const Tensor& x, const Axes& a, bool k) { return mean(x, a, k); },
                  uniform({2, 3, 4}, 2, -2, 2));
}

// Distinct values: no ties within any reduced group.
TEST(ReduceGradients, Max) {
  check_reduction([](const Tensor& x, const Axes& a, bool k) { return max(x, a, k); },
                  distinct({2, 3, 4}, 3));
}

TEST(ReduceGradients, Min) {
  check_reduction([](const Tensor& x, const Axes& a, bool k) { return min(x, a, k); },
                  distinct({2, 3, 4}, 4));
}

TEST(ReduceGradients, Prod) {
  check_reduction([](const Tensor& x, const Axes& a, bool k) { return prod(x, a, k); },
                  away_from_zero({2, 3, 4}, 5, 0.6, 1.4));
}

TEST(ReduceGradients, LogSumExp) {
  check_reduction([](const Tensor& x, const Axes& a, bool k) { return logsumexp(x, a, k); },
                  uniform({2, 3, 4}, 6, -3, 3));
}

// logsumexp must stay exact for inputs whose exp overflows (the rule uses exp(x - lse)).
TEST(ReduceGradients, LogSumExpLargeInputs) {
  Tensor x = uniform({2, 5}, 7, 800, 805);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return logsumexp(in[0], {1}, false); }, {x});
}

TEST(ReduceGradients, ReductionOfScalarAndRank1) {
  Tensor s = uniform({}, 8), v = away_from_zero({5}, 9, 0.5, 1.5);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return sum(in[0]); }, {s});
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return prod(in[0], {0}, true); }, {v});
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return mean(in[0]); }, {v});
}

// Zeros get exact gradients (the product of the other elements), not inf/nan: prod is
// linear in each element, so central differences are exact there too.
TEST(ReduceGradients, ProdWithZeros) {
  // Groups (rows) with no zero, one zero and two zeros.
  Tensor x = tensor<double>({1.5, 2, -3, 0, 2, 3, 4, 0, 0}, {3, 3});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(sum(prod(x, {1})), x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{-6, -4.5, 3, 6, 0, 0, 0, 0, 0}));
  for (const Axes& axes : {Axes{}, Axes{0}, Axes{1}}) {
    for (bool keepdims : {false, true}) {
      SCOPED_TRACE(axes_name(axes, keepdims));
      EXPECT_GRADIENTS([&](const std::vector<Tensor>& in) { return prod(in[0], axes, keepdims); },
                       {x});
    }
  }
}

// Ties: the gradient of max/min is shared equally by the tied elements.
TEST(ReduceGradients, MaxAndMinShareTheGradientAmongTies) {
  Tensor x = tensor<double>({1, 3, 3, 0, -2, 0, -2, 5}, {2, 4});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor gmax = tape.gradient(sum(max(x, {1})), x);
  Tensor gmin = tape.gradient(sum(min(x)), x);
  EXPECT_EQ(gmax.to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0, 0, 0, 0, 1}));
  EXPECT_EQ(gmin.to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 0.5, 0, 0.5, 0}));
}

// ---- softmax family ----

TEST(ReduceGradients, Softmax) {
  Tensor x2 = uniform({3, 4}, 10, -2, 2), x3 = uniform({2, 3, 4}, 11, -2, 2);
  for (int64_t axis : {0, 1, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    EXPECT_GRADIENTS([axis](const std::vector<Tensor>& in) { return softmax(in[0], axis); }, {x2});
    EXPECT_GRADIENTS([axis](const std::vector<Tensor>& in) { return softmax(in[0], axis); }, {x3});
  }
}

TEST(ReduceGradients, LogSoftmax) {
  Tensor x2 = uniform({3, 4}, 12, -2, 2), x3 = uniform({2, 3, 4}, 13, -2, 2);
  for (int64_t axis : {0, 1, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    EXPECT_GRADIENTS([axis](const std::vector<Tensor>& in) { return log_softmax(in[0], axis); },
                     {x2});
    EXPECT_GRADIENTS([axis](const std::vector<Tensor>& in) { return log_softmax(in[0], axis); },
                     {x3});
  }
}

// Cross-entropy as users write it: -sum(labels * log_softmax(logits)), mean over the batch.
TEST(ReduceGradients, SoftmaxCrossEntropyMatchesSoftmaxMinusLabels) {
  Tensor logits = uniform({4, 5}, 14, -2, 2);
  Tensor labels = one_hot(tensor<int64_t>({1, 0, 4, 2}), 5, DType::f64);
  GradientTape tape;
  tape.watch(logits);
  Tensor loss = mean(-sum(labels * log_softmax(logits, -1), {-1}));
  Tensor g = tape.gradient(loss, logits);
  ASSERT_TRUE(g.defined());
  Tensor expected = (softmax(logits, -1) - labels) / 4.0;
  EXPECT_LT(gradcheck::max_abs_diff(g, expected), 1e-12);
}

}  // namespace
}  // namespace kiln
