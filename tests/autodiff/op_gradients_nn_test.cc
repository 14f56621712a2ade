// Finite-difference checks of the gradient rules of matmul, the convolutions (including the
// two backprop ops, which are differentiable too), pooling and attention (frontend/grad_nn.cc).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kiln/frontend/dispatch.h"
#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::distinct;
using gradcheck::uniform;

// ---- matmul ----

// The shape stored for an operand whose last two axes are (rows, cols) as multiplied: swapped
// when its transpose flag is set.
Shape stored_shape(Shape s, bool transposed) {
  if (transposed) std::swap(s[s.rank() - 2], s[s.rank() - 1]);
  return s;
}

// Finite-difference checks of matmul(a, b) for every combination of transpose flags, a and b of
// shapes `a_shape` and `b_shape` as multiplied (stored transposed when their flag is set).
void expect_matmul_gradients(const Shape& a_shape, const Shape& b_shape, uint64_t seed) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(fmt::format("transpose_a {} transpose_b {}", ta, tb));
      Tensor a = uniform(stored_shape(a_shape, ta), seed++);
      Tensor b = uniform(stored_shape(b_shape, tb), seed++);
      EXPECT_GRADIENTS(
          [ta, tb](const std::vector<Tensor>& x) { return matmul(x[0], x[1], ta, tb); }, {a, b});
    }
  }
}

TEST(NnGradients, MatMulAllTransposeCombinations) { expect_matmul_gradients({3, 4}, {4, 2}, 1); }

// Batch dimensions broadcast: a (2, 1, 3, 4) with b (3, 4, 5) -> (2, 3, 3, 5); the gradients
// sum over the stretched batch axes.
TEST(NnGradients, MatMulBatchedWithBroadcastBatchDims) {
  expect_matmul_gradients({2, 1, 3, 4}, {3, 4, 5}, 10);
}

// A matrix shared by every batch entry (a Dense kernel applied to sequences): its gradient is
// one product over the entries' stacked rows (frontend/grad_nn.cc), for b stored as it is or
// transposed and for several batch axes; a transposed a keeps the batched product and its sum.
TEST(NnGradients, MatMulSharedMatrixOverBatchAxes) {
  expect_matmul_gradients({2, 3, 2, 4}, {4, 5}, 30);
}

// Traced, that gradient is one product of the stacked rows ([12, 4] and [12, 5] views): no
// [2, 3, 4, 5] batch of products summed afterwards.
TEST(NnGradients, MatMulSharedMatrixGradientIsOneProductOfStackedRows) {
  auto grad = [](const Tensor& a, const Tensor& b) {
    GradientTape tape;
    tape.watch(b);
    return tape.gradient(sum(matmul(a, b)), b);
  };
  auto f = function(grad, {.name = "shared_matrix_grad"});
  const Tensor a = uniform({2, 3, 2, 4}, 40), b = uniform({4, 5}, 41);
  const std::string ir = f.concrete(a, b).ir_text();
  EXPECT_NE(ir.find("[12,4]"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("[2,3,4,5]"), std::string::npos) << ir;
}

TEST(NnGradients, MatMulBatchedMatrixTimesBatch) {
  Tensor a = uniform({3, 4}, 20), b = uniform({2, 4, 2}, 21);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {a, b});
  Tensor c = uniform({2, 3, 4}, 22), d = uniform({4, 2}, 23);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {c, d});
}

TEST(NnGradients, MatMulSameOperandTwice) {
  Tensor a = uniform({3, 3}, 24);
  EXPECT_GRADIENTS([](const std::vector<Tensor>& x) { return matmul(x[0], x[0], false, true); },
                   {a});
}

// ---- convolutions ----

struct ConvCase {
  Shape input, filter;
  Axes strides, dilations;
  std::string padding;
};

std::string conv_name(const ConvCase& c) {
  return fmt::format("input {} filter {} strides [{}] dilations [{}] padding {}",
                     c.input.to_string(), c.filter.to_string(), fmt::join(c.strides, ","),
                     fmt::join(c.dilations, ","), c.padding);
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{2, 5, 5, 2}, {3, 3, 2, 3}, {1, 1}, {1, 1}, "valid"},
      {{2, 5, 5, 2}, {3, 3, 2, 3}, {1, 1}, {1, 1}, "same"},
      {{1, 6, 7, 2}, {3, 3, 2, 2}, {2, 2}, {1, 1}, "valid"},
      {{1, 6, 7, 2}, {3, 3, 2, 2}, {2, 2}, {1, 1}, "same"},
      {{1, 6, 6, 2}, {3, 2, 2, 2}, {1, 1}, {2, 2}, "valid"},
      {{1, 6, 6, 2}, {3, 2, 2, 2}, {1, 1}, {2, 2}, "same"},
      {{1, 5, 6, 1}, {2, 2, 1, 2}, {1, 2}, {1, 1}, "same"},  // even filter: asymmetric padding
      {{1, 7, 7, 2}, {3, 3, 2, 1}, {2, 1}, {1, 2}, "same"},
  };
  return cases;
}

Shape conv_output_shape(const ConvCase& c) {
  Tensor probe = conv2d(zeros(c.input, DType::f64), zeros(c.filter, DType::f64), c.strides,
                        c.padding, c.dilations);
  return probe.shape();
}

TEST(NnGradients, Conv2D) {
  uint64_t seed = 30;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(conv_name(c));
    Tensor x = uniform(c.input, seed++), w = uniform(c.filter, seed++);
    EXPECT_GRADIENTS(
        [&c](const std::vector<Tensor>& in) {
          return conv2d(in[0], in[1], c.strides, c.padding, c.dilations);
        },
        {x, w});
  }
}

TEST(NnGradients, Conv2DBackpropInput) {
  uint64_t seed = 50;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(conv_name(c));
    Tensor w = uniform(c.filter, seed++), g = uniform(conv_output_shape(c), seed++);
    EXPECT_GRADIENTS(
        [&c](const std::vector<Tensor>& in) {
          return conv2d_backprop_input(c.input, in[0], in[1], c.strides, c.padding, c.dilations);
        },
        {w, g});
  }
}

TEST(NnGradients, Conv2DBackpropFilter) {
  uint64_t seed = 70;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(conv_name(c));
    Tensor x = uniform(c.input, seed++), g = uniform(conv_output_shape(c), seed++);
    EXPECT_GRADIENTS(
        [&c](const std::vector<Tensor>& in) {
          return conv2d_backprop_filter(in[0], c.filter, in[1], c.strides, c.padding, c.dilations);
        },
        {x, g});
  }
}

// The backprop ops are the adjoints of conv2d: <conv2d(x, w), g> equals
// <x, backprop_input(w, g)> and <w, backprop_filter(x, g)>.
TEST(NnGradients, ConvBackpropOpsAreAdjoints) {
  uint64_t seed = 90;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(conv_name(c));
    Tensor x = uniform(c.input, seed++), w = uniform(c.filter, seed++);
    Tensor g = uniform(conv_output_shape(c), seed++);
    double lhs = sum(conv2d(x, w, c.strides, c.padding, c.dilations) * g).item<double>();
    double via_input =
        sum(x * conv2d_backprop_input(c.input, w, g, c.strides, c.padding, c.dilations))
            .item<double>();
    double via_filter =
        sum(w * conv2d_backprop_filter(x, c.filter, g, c.strides, c.padding, c.dilations))
            .item<double>();
    EXPECT_NEAR(via_input, lhs, 1e-10 * (1 + std::abs(lhs)));
    EXPECT_NEAR(via_filter, lhs, 1e-10 * (1 + std::abs(lhs)));
  }
}

// ---- pooling ----

struct PoolCase {
  Shape input;
  Axes pool, strides;
  std::string padding;
};

std::string pool_name(const PoolCase& c) {
  return fmt::format("input {} pool [{}] strides [{}] padding {}", c.input.to_string(),
                     fmt::join(c.pool, ","), fmt::join(c.strides, ","), c.padding);
}

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {{2, 4, 4, 2}, {2, 2}, {2, 2}, "valid"},
      {{1, 5, 5, 2}, {2, 2}, {2, 2}, "valid"},  // last row/column dropped
      {{1, 5, 5, 2}, {2, 2}, {2, 2}, "same"},   // partial windows at the edge
      {{1, 5, 6, 1}, {3, 3}, {1, 1}, "same"},   // overlapping windows
      {{1, 6, 5, 2}, {3, 2}, {2, 1}, "valid"},
      {{1, 7, 7, 1}, {3, 3}, {2, 2}, "same"},
  };
  return cases;
}

TEST(NnGradients, MaxPool2D) {
  uint64_t seed = 110;
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(pool_name(c));
    Tensor x = distinct(c.input, seed++, -2, 0.03);  // no ties inside a window
    EXPECT_GRADIENTS(
        [&c](const std::vector<Tensor>& in) {
          return max_pool2d(in[0], c.pool, c.strides, c.padding);
        },
        {x});
  }
}

TEST(NnGradients, AvgPool2D) {
  uint64_t seed = 130;
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(pool_name(c));
    Tensor x = uniform(c.input, seed++);
    EXPECT_GRADIENTS(
        [&c](const std::vector<Tensor>& in) {
          return avg_pool2d(in[0], c.pool, c.strides, c.padding);
        },
        {x});
  }
}

Tensor avg_pool2d_grad(const Tensor& g, const PoolCase& c) {
  return detail::apply(OpKind::AvgPool2DGrad, {g},
                       Attrs{{"input_shape", c.input.to_vector()},
                             {"pool_size", c.pool},
                             {"strides", c.strides},
                             {"padding", c.padding}});
}

TEST(NnGradients, AvgPool2DGrad) {
  uint64_t seed = 150;
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(pool_name(c));
    Shape out = avg_pool2d(zeros(c.input, DType::f64), c.pool, c.strides, c.padding).shape();
    Tensor g = uniform(out, seed++);
    EXPECT_GRADIENTS([&c](const std::vector<Tensor>& in) { return avg_pool2d_grad(in[0], c); },
                     {g});
  }
}

// Second-order gradients through max pooling need a rule for max_pool2d_grad, which kiln
// documents as unsupported: the tape must say so with a kiln::Error, not crash.
TEST(NnGradients, SecondOrderThroughMaxPoolIsAnError) {
  Tensor x = distinct({1, 4, 4, 1}, 170);
  GradientTape outer;
  outer.watch(x);
  Tensor first;
  {
    GradientTape inner;
    inner.watch(x);
    first = inner.gradient(sum(square(max_pool2d(x, {2, 2}))), x);
  }
  try {
    outer.gradient(sum(first), x);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_pool2d_grad"), std::string::npos) << e.what();
  }
}

// ---- attention

// The fused op's gradient (attention_grad, cut apart by slices) with and without masks and
// causality, Tq != Tv (tests/frontend/attention_op_test.cc has the larger cases).
TEST(NnGradients, Attention) {
  struct G {
    Shape q, k, v, mask;
    bool causal;
  };
  const G gs[] = {
      {{2, 3, 2}, {2, 4, 2}, {2, 4, 3}, {}, false},
      {{2, 3, 2}, {2, 4, 2}, {2, 4, 3}, {2, 1, 4}, false},
      {{5, 3}, {4, 3}, {4, 2}, {}, true},
      {{1, 4, 3}, {1, 4, 3}, {1, 4, 3}, {4, 4}, true},
  };
  uint64_t seed = 50;
  for (const G& g : gs) {
    SCOPED_TRACE(
        fmt::format("q {} mask {} causal {}", g.q.to_string(), g.mask.to_string(), g.causal));
    Tensor q = gradcheck::uniform(g.q, seed++), k = gradcheck::uniform(g.k, seed++),
           v = gradcheck::uniform(g.v, seed++);
    Tensor mask;
    if (g.mask.rank() > 0) {
      std::vector<bool> m(size_t(g.mask.num_elements()));
      for (size_t i = 0; i < m.size(); ++i) m[i] = i % 4 != 1;
      mask = tensor(m, g.mask);
    }
    EXPECT_GRADIENTS(
        [&](const std::vector<Tensor>& x) {
          return attention(x[0], x[1], x[2], mask, 0.7, g.causal);
        },
        {q, k, v});
  }
}

// attention_grad's own gradient (second order; frontend/grad_attention.cc), with respect to
// q, k, v and the output gradient.
TEST(NnGradients, AttentionGrad) {
  Tensor q = uniform({2, 3, 2}, 70), k = uniform({2, 4, 2}, 71), v = uniform({2, 4, 3}, 72),
         dout = uniform({2, 3, 3}, 73);
  Tensor mask = tensor(std::vector<bool>{true, false, true, true}, Shape{1, 4});
  for (bool causal : {false, true})
    for (bool masked : {false, true}) {
      SCOPED_TRACE(fmt::format("causal {} mask {}", causal, masked));
      EXPECT_GRADIENTS(
          [&](const std::vector<Tensor>& x) {
            std::vector<Tensor> in = x;
            if (masked) in.push_back(mask);
            return detail::apply(OpKind::AttentionGrad, in,
                                 Attrs{{"scale", 0.6}, {"causal", causal}});
          },
          {q, k, v, dout});
    }
}

}  // namespace
}  // namespace kiln
