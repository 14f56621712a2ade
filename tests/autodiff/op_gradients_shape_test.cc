// Finite-difference checks of the gradient rules of shape and data-movement ops
// (frontend/grad_shape.cc), and the coverage tests: every differentiable op in ir/ops.def has
// a gradient rule and a gradient check in this suite.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kiln/frontend/gradients.h"
#include "kiln/ir/op_table.h"
#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::Fn;
using gradcheck::Options;
using gradcheck::uniform;

TEST(ShapeGradients, Reshape) {
  Tensor x = uniform({2, 3, 4}, 1);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return reshape(in[0], {4, -1}); }, {x});
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return reshape(in[0], {24}); }, {x});
  EXPECT_GRADIENTS(
      [](const std::vector<Tensor>& in) { return squeeze(expand_dims(in[0], 1), {1}); }, {x});
}

TEST(ShapeGradients, Transpose) {
  Tensor x = uniform({2, 3, 4}, 2);
  for (const Axes& perm : {Axes{2, 0, 1}, Axes{1, 2, 0}, Axes{0, 2, 1}, Axes{}}) {
    SCOPED_TRACE(fmt::format("perm [{}]", fmt::join(perm, ", ")));
    EXPECT_GRADIENTS([perm](const std::vector<Tensor>& in) { return transpose(in[0], perm); }, {x});
  }
}

TEST(ShapeGradients, BroadcastTo) {
  struct Case {
    Shape from, to;
  };
  uint64_t seed = 3;
  for (const Case& c :
       {Case{{3, 1}, {2, 3, 4}}, Case{{}, {2, 3}}, Case{{4}, {3, 4}}, Case{{1, 3, 1}, {2, 3, 5}}}) {
    SCOPED_TRACE(c.from.to_string() + " -> " + c.to.to_string());
    Shape to = c.to;
    EXPECT_GRADIENTS([to](const std::vector<Tensor>& in) { return broadcast_to(in[0], to); },
                     {uniform(c.from, seed++)});
  }
}

TEST(ShapeGradients, Copy) {
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return copy(in[0]) * in[0]; },
                   {uniform({2, 3}, 24)});
}

// all_reduce in a world of one process (the sum over one rank; tests/distributed/ checks the
// data-parallel gradients across ranks against one process).
TEST(ShapeGradients, AllReduce) {
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return all_reduce(in[0]) * in[0]; },
                   {uniform({2, 3}, 25)});
}

// broadcast_like: x gets the summed gradient; `like` only lends its shape (no gradient).
TEST(ShapeGradients, BroadcastLike) {
  Tensor like = uniform({2, 3, 4}, 21);
  EXPECT_GRADIENTS([like](const std::vector<Tensor>& in) { return broadcast_like(in[0], like); },
                   {uniform({3, 1}, 22)});
  Tensor x = uniform({3, 1}, 23);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  tape.watch(like);
  Tensor y = sum(broadcast_like(x, like));
  EXPECT_FALSE(tape.gradient(y, like).defined());
  EXPECT_EQ(tape.gradient(y, x).to_vector<float>(), std::vector<float>({8, 8, 8}));
}

TEST(ShapeGradients, ConcatThreeInputs) {
  Tensor a = uniform({2, 1, 3}, 4), b = uniform({2, 3, 3}, 5), c = uniform({2, 2, 3}, 6);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return concat(in, 1); }, {a, b, c});
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return concat(in, -2); }, {a, b, c});
  Tensor d = uniform({1, 2}, 7), e = uniform({3, 2}, 8), f = uniform({2, 2}, 9);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return concat(in, 0); }, {d, e, f});
}

// Only some inputs watched: the others need no gradient.
TEST(ShapeGradients, ConcatWithConstantInput) {
  Tensor a = uniform({2, 2}, 10), b = uniform({2, 3}, 11), c = uniform({2, 1}, 12);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return concat(in, 1); }, {a, b, c},
                   Options::only({1}));
}

TEST(ShapeGradients, Stack) {
  Tensor a = uniform({2, 3}, 13), b = uniform({2, 3}, 14);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& in) { return stack(in, 1); }, {a, b});
}

TEST(ShapeGradients, SliceWithSteps) {
  Tensor x = uniform({7, 8}, 15);
  struct Case {
    Axes start, stop, step;
  };
  for (const Case& c :
       {Case{{1, 0}, {6, 8}, {2, 3}}, Case{{0, 2}, {7, 7}, {3, 1}}, Case{{2, 1}, {3, 8}, {1, 4}},
        Case{{0, 0}, {7, 8}, {1, 1}}, Case{{6, 7}, {7, 8}, {5, 5}}}) {
    SCOPED_TRACE(fmt::format("start [{}] stop [{}] step [{}]", fmt::join(c.start, ","),
                             fmt::join(c.stop, ","), fmt::join(c.step, ",")));
    EXPECT_GRADIENTS(
        [c](const std::vector<Tensor>& in) { return slice(in[0], c.start, c.stop, c.step); }, {x});
  }
}

TEST(ShapeGradients, SliceRank3) {
  Tensor x = uniform({3, 5, 4}, 16);
  EXPECT_GRADIENTS(
      [](const std::vector<Tensor>& in) {
        return slice(in[0], {1, 0, 1}, {3, 5, 4}, {1, 2, 2});
      },
      {x});
}

TEST(ShapeGradients, PadWithInterior) {
  Tensor x = uniform({3, 4}, 17);
  struct Case {
    Axes low, high, interior;
  };
  for (const Case& c : {Case{{1, 0}, {2, 1}, {1, 2}}, Case{{0, 0}, {0, 0}, {2, 0}},
                        Case{{2, 3}, {0, 1}, {0, 0}}, Case{{0, 1}, {3, 0}, {3, 1}}}) {
    SCOPED_TRACE(fmt::format("low [{}] high [{}] interior [{}]", fmt::join(c.low, ","),
                             fmt::join(c.high, ","), fmt::join(c.interior, ",")));
    EXPECT_GRADIENTS(
        [c](const std::vector<Tensor>& in) { return pad(in[0], c.low, c.high, c.interior); }, {x});
  }
}

// Repeated indices: the gradient accumulates (scatter_add) at the repeated rows.
TEST(ShapeGradients, GatherMultiDimIndicesWithRepeats) {
  Tensor params = uniform({5, 3}, 18);
  Tensor idx = tensor<int64_t>({0, 2, 2, 4, 0, 0}, {2, 3});
  EXPECT_GRADIENTS([idx](const std::vector<Tensor>& in) { return gather(in[0], idx, 0); },
                   {params});
  Tensor p3 = uniform({2, 4, 3}, 19);
  Tensor idx32 = tensor<int32_t>({3, 1, 1, 3}, {2, 2});
  for (int64_t axis : {1, -2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    EXPECT_GRADIENTS(
        [idx32, axis](const std::vector<Tensor>& in) { return gather(in[0], idx32, axis); }, {p3});
  }
  EXPECT_GRADIENTS(
      [](const std::vector<Tensor>& in) {
        return gather(in[0], tensor<int64_t>({2, 2, 0}), 2);
      },
      {p3});
}

TEST(ShapeGradients, GatherGradientCountsRepeats) {
  Tensor params = tensor<double>({10, 20, 30});
  GradientTape tape;
  tape.watch(params);
  Tensor y = gather(params, tensor<int64_t>({2, 0, 2, 2}));
  Tensor g = tape.gradient(sum(y), params);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 0, 3}));
}

TEST(ShapeGradients, ScatterAdd) {
  // updates (2, 3, 4) scattered by indices (3,) along axis 1 into (2, 5, 4), with a repeat.
  Tensor updates = uniform({2, 3, 4}, 20);
  Tensor idx = tensor<int64_t>({4, 1, 4});
  EXPECT_GRADIENTS([idx](const std::vector<Tensor>& in) { return scatter_add(in[0], idx, 1, 5); },
                   {updates});
  // Multi-dimensional indices (2, 2) along axis 0: updates (2, 2, 3) -> (4, 3).
  Tensor u2 = uniform({2, 2, 3}, 21);
  Tensor idx2 = tensor<int32_t>({0, 3, 3, 0}, {2, 2});
  EXPECT_GRADIENTS([idx2](const std::vector<Tensor>& in) { return scatter_add(in[0], idx2, 0, 4); },
                   {u2});
}

// Zero-size tensors: gradients have the source's (empty) shape and nothing fails.
TEST(ShapeGradients, ZeroSizeTensors) {
  Tensor e = zeros({0, 3}, DType::f64), a = uniform({2, 3}, 50), m = zeros({3, 0}, DType::f64);
  GradientTape tape(/*persistent=*/true);
  tape.watch({e, a, m});
  auto check = [&](const Tensor& target, const Tensor& source, const std::vector<double>& want,
                   const char* what) {
    SCOPED_TRACE(what);
    Tensor g = tape.gradient(target, source);
    ASSERT_TRUE(g.defined());
    EXPECT_EQ(g.type(), source.type());
    EXPECT_EQ(g.to_vector<double>(), want);
  };
  check(sum(e), e, {}, "sum");
  check(sum(exp(e) * 2.0), e, {}, "elementwise");
  check(mean(e, {0}), e, {}, "mean over an empty axis");
  check(sum(concat({e, a}, 0)), a, std::vector<double>(6, 1.0), "concat");
  check(sum(matmul(a, m)), m, {}, "matmul with n = 0");
  check(sum(matmul(a, m) + 1.0), a, std::vector<double>(6, 0.0), "matmul with n = 0 (lhs)");
  check(sum(matmul(m, e)), e, {}, "matmul with k = 0 (rhs)");
  check(sum(e * slice(a, {0, 0}, {1, 3})), e, {}, "broadcast");
  check(sum(slice(a, {1, 0}, {1, 3})), a, std::vector<double>(6, 0.0), "empty slice");
}

// ---- coverage: a new differentiable op without a rule or a check fails here ----

// Ops whose gradient rules are checked against finite differences in tests/autodiff.
// Add the op here when adding its gradient check.
const std::set<std::string>& checked_ops() {
  static const std::set<std::string> ops = {
      // op_gradients_elementwise_test.cc
      "add", "sub", "mul", "div", "pow", "maximum", "minimum", "neg", "abs", "sign", "square",
      "sqrt", "rsqrt", "exp", "log", "log1p", "tanh", "sigmoid", "relu", "leaky_relu", "gelu",
      "erf", "softplus", "cast", "select",
      // op_gradients_reduce_test.cc
      "sum", "mean", "max", "min", "prod", "logsumexp", "softmax", "log_softmax",
      // op_gradients_nn_test.cc
      "matmul", "conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "max_pool2d",
      "avg_pool2d", "avg_pool2d_grad", "attention", "attention_grad",
      // this file
      "reshape", "transpose", "broadcast_to", "broadcast_like", "copy", "concat", "slice", "pad",
      "gather", "scatter_add", "all_reduce"};
  return ops;
}

// Differentiable ops without a rule, on purpose (documented).
bool documented_without_rule(OpKind k) { return k == OpKind::MaxPool2DGrad; }

TEST(GradientCoverage, EveryDifferentiableOpHasAGradientRule) {
  for (const OpInfo& op : all_ops()) {
    if (op.has(kNoGradient) || documented_without_rule(op.kind)) continue;
    EXPECT_NE(detail::gradient_rule(op.kind), nullptr)
        << "op \"" << op.name << "\" is differentiable (no kNoGradient in ir/ops.def) but has "
        << "no gradient rule in frontend/grad_*.cc";
  }
}

TEST(GradientCoverage, NonDifferentiableOpsHaveNoRule) {
  for (const OpInfo& op : all_ops()) {
    if (!op.has(kNoGradient)) continue;
    EXPECT_EQ(detail::gradient_rule(op.kind), nullptr)
        << "op \"" << op.name << "\" is marked kNoGradient but has a gradient rule";
  }
}

TEST(GradientCoverage, EveryDifferentiableOpHasAGradientCheck) {
  for (const OpInfo& op : all_ops()) {
    if (op.has(kNoGradient) || documented_without_rule(op.kind)) continue;
    EXPECT_TRUE(checked_ops().count(op.name))
        << "op \"" << op.name << "\" has no finite-difference gradient check in tests/autodiff";
  }
  for (const std::string& name : checked_ops())
    EXPECT_TRUE(find_op(name).has_value()) << "no op named \"" << name << "\" in ir/ops.def";
}

}  // namespace
}  // namespace kiln
