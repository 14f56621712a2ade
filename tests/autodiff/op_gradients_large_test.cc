// Gradient checks on inputs large enough to reach the kernels' vectorised and multi-threaded
// paths (checked along random directions), and float32 gradients against float64 ones.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::away_from_zero;
using gradcheck::distinct;
using gradcheck::Fn;
using gradcheck::on_grid;
using gradcheck::uniform;

// Both results flattened and joined: one output for functions of two differently shaped parts.
Tensor flat_concat(const Tensor& a, const Tensor& b) {
  return concat({reshape(a, {-1}), reshape(b, {-1})}, 0);
}

struct LargeCase {
  std::string name;
  Fn f;
  std::vector<Tensor> inputs;
};

std::vector<LargeCase> large_cases() {
  std::vector<LargeCase> c;
  // ---- elementwise with broadcasting ----
  c.push_back({"mul broadcast",
               [](const std::vector<Tensor>& x) { return x[0] * x[1]; },
               {uniform({128, 1}, 1), uniform({1, 257}, 2)}});
  c.push_back({"div broadcast",
               [](const std::vector<Tensor>& x) { return x[0] / x[1]; },
               {uniform({3, 64, 65}, 3), away_from_zero({65}, 4, 0.5, 2)}});
  c.push_back({"pow",
               [](const std::vector<Tensor>& x) { return pow(x[0], x[1]); },
               {uniform({200, 101}, 5, 0.5, 2), uniform({101}, 6, -1, 2)}});
  c.push_back(
      {"maximum minimum",
       [](const std::vector<Tensor>& x) { return maximum(x[0], x[1]) - minimum(x[1], x[0] - 0.4); },
       {on_grid({150, 130}, 7, 0.0), on_grid({130}, 8, 0.1)}});
  c.push_back({"unary chain",
               [](const std::vector<Tensor>& x) {
                 Tensor t = x[0];
                 return tanh(gelu(t)) * sigmoid(t) + softplus(t) * erf(t) + exp(t * 0.5) +
                        gelu(t, true) + leaky_relu(t, 0.1) * relu(t) + abs(t) * square(t) +
                        sqrt(abs(t) + 0.5) + rsqrt(square(t) + 1.0) + log1p(abs(t)) +
                        log(square(t) + 2.0);
               },
               {away_from_zero({97, 103}, 9, 0.05, 3)}});
  c.push_back({"select",
               [](const std::vector<Tensor>& x) {
                 return where(greater(x[0], scalar(0, x[0].dtype())), x[0] * x[1], x[1]);
               },
               {away_from_zero({120, 90}, 10), uniform({90}, 11)}});
  // ---- reductions and softmax ----
  c.push_back({"sum mean",
               [](const std::vector<Tensor>& x) {
                 return sum(x[0], {0, 2}, true) * mean(x[0], {0, 2}, true) + mean(x[0], {1}, true);
               },
               {uniform({17, 33, 65}, 12)}});
  c.push_back({"max min",
               [](const std::vector<Tensor>& x) {
                 return max(x[0], {1}, true) - min(x[0], {0, 2}, true) + max(x[0]);
               },
               {distinct({17, 33, 65}, 13, -500, 0.03)}});
  c.push_back(
      {"prod",
       [](const std::vector<Tensor>& x) { return flat_concat(prod(x[0], {0}), prod(x[0], {-1})); },
       {uniform({17, 200}, 14, 0.9, 1.1)}});
  c.push_back({"logsumexp",
               [](const std::vector<Tensor>& x) {
                 return flat_concat(logsumexp(x[0], {-1}), logsumexp(x[0], {0}, true));
               },
               {uniform({64, 300}, 15, -3, 3)}});
  c.push_back({"softmax",
               [](const std::vector<Tensor>& x) { return softmax(x[0], 0) + softmax(x[0], -1); },
               {uniform({64, 300}, 16, -3, 3)}});
  c.push_back(
      {"log_softmax",
       [](const std::vector<Tensor>& x) { return log_softmax(x[0], 1) + log_softmax(x[0], -1); },
       {uniform({8, 129, 33}, 17, -3, 3)}});
  // ---- contractions and pooling ----
  c.push_back({"matmul",
               [](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); },
               {uniform({65, 130}, 18), uniform({130, 70}, 19)}});
  c.push_back({"matmul transposed",
               [](const std::vector<Tensor>& x) { return matmul(x[0], x[1], true, true); },
               {uniform({130, 65}, 20), uniform({70, 130}, 21)}});
  c.push_back({"matmul batched broadcast",
               [](const std::vector<Tensor>& x) { return matmul(x[0], x[1], false, true); },
               {uniform({3, 1, 33, 40}, 22), uniform({5, 17, 40}, 23)}});
  c.push_back({"conv2d same stride 2",
               [](const std::vector<Tensor>& x) {
                 return conv2d(x[0], x[1], {2, 2}, "same");
               },
               {uniform({2, 17, 17, 8}, 24), uniform({3, 3, 8, 16}, 25)}});
  c.push_back({"conv2d valid dilation 2",
               [](const std::vector<Tensor>& x) {
                 return conv2d(x[0], x[1], {1, 1}, "valid", {2, 2});
               },
               {uniform({2, 16, 15, 6}, 26), uniform({3, 3, 6, 10}, 27)}});
  c.push_back({"conv2d_backprop_input",
               [](const std::vector<Tensor>& x) {
                 return conv2d_backprop_input({2, 17, 17, 8}, x[0], x[1], {2, 2}, "same", {1, 1});
               },
               {uniform({3, 3, 8, 16}, 28), uniform({2, 9, 9, 16}, 29)}});
  c.push_back({"conv2d_backprop_filter",
               [](const std::vector<Tensor>& x) {
                 return conv2d_backprop_filter(x[0], {3, 3, 8, 16}, x[1], {2, 2}, "same", {1, 1});
               },
               {uniform({2, 17, 17, 8}, 30), uniform({2, 9, 9, 16}, 31)}});
  c.push_back({"max_pool2d",
               [](const std::vector<Tensor>& x) {
                 return max_pool2d(x[0], {3, 3}, {2, 2}, "same");
               },
               {distinct({2, 31, 32, 8}, 32, -300, 0.03)}});
  c.push_back(
      {"avg_pool2d",
       [](const std::vector<Tensor>& x) {
         return flat_concat(avg_pool2d(x[0], {3, 3}, {2, 2}, "same"), avg_pool2d(x[0], {2, 2}));
       },
       {uniform({2, 32, 31, 8}, 33)}});
  // ---- layout ----
  c.push_back({"transpose reshape",
               [](const std::vector<Tensor>& x) {
                 return reshape(transpose(x[0], {2, 0, 1}), {-1, 32}) * 2.0;
               },
               {uniform({16, 32, 24}, 34)}});
  c.push_back({"slice pad",
               [](const std::vector<Tensor>& x) {
                 return pad(slice(x[0], {1, 3}, {120, 200}, {3, 2}), {2, 1}, {0, 3}, {1, 2});
               },
               {uniform({128, 200}, 35)}});
  c.push_back({"concat broadcast_to",
               [](const std::vector<Tensor>& x) {
                 return concat({x[0], broadcast_to(x[1], {50, 70}), x[0] * x[0]}, 1);
               },
               {uniform({50, 33}, 36), uniform({50, 1}, 37)}});
  c.push_back({"gather scatter_add",
               [](const std::vector<Tensor>& x) {
                 Tensor idx = random_integers({40, 25}, 38, 0, 1000);
                 return flat_concat(gather(x[0], idx, 0), scatter_add(x[1], idx, 1, 1000));
               },
               {uniform({1000, 16}, 39), uniform({16, 40, 25}, 40)}});
  return c;
}

TEST(LargeGradients, DirectionalFiniteDifferences) {
  for (const LargeCase& c : large_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_DIRECTIONAL_GRADIENTS(c.f, c.inputs, 3);
  }
}

TEST(LargeGradients, Float32MatchesFloat64) {
  for (const LargeCase& c : large_cases()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(gradcheck::check_float32_matches_float64(c.f, c.inputs));
  }
}

}  // namespace
}  // namespace kiln
