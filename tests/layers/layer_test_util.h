// Helpers shared by the layer tests: symbolic inputs, gradient checks of a layer with respect
// to its input and weights, and naive references (plain loops over std::vector data).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"
#include "tests/frontend/op_test_util.h"

namespace kiln::test {

// A symbolic tensor (no data), e.g. shape {-1, 5} for a functional input with unknown batch.
inline Tensor symbolic_input(const Shape& shape, DType dtype = DType::f32) {
  return Tensor::symbolic({dtype, shape}, nullptr);
}

// Checks the gradients of sum(w * layer(x)) with respect to x (when `wrt_input`) and every
// weight of the (already built) layer, against central finite differences in float64.
inline ::testing::AssertionResult check_layer_gradients(const Layer& layer, const Tensor& x,
                                                        bool training = false,
                                                        bool wrt_input = true) {
  std::vector<Tensor> inputs = {x};
  for (const Tensor& w : layer->get_weights()) inputs.push_back(w);
  std::vector<Tensor> original = layer->get_weights();
  gradcheck::Options opts;
  if (!wrt_input)
    for (size_t i = 1; i < inputs.size(); ++i) opts.wrt.push_back(i);
  auto f = [&](const std::vector<Tensor>& xs) {
    layer->set_weights(std::vector<Tensor>(xs.begin() + 1, xs.end()));
    return layer(xs[0], training);
  };
  ::testing::AssertionResult r = gradcheck::check_gradients(f, inputs, opts);
  layer->set_weights(original);
  return r;
}

// |a - b| <= terms * u * scale element by element, u = 2^-52, scale the largest magnitude of
// a and b: the two differ only in the order of at most `terms` rounded operations per element.
inline void expect_close(const std::vector<double>& a, const std::vector<double>& b, double terms,
                         const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 1e-300;
  for (size_t j = 0; j < a.size(); ++j) scale = std::max({scale, std::abs(a[j]), std::abs(b[j])});
  for (size_t j = 0; j < a.size(); ++j)
    ASSERT_LE(std::abs(a[j] - b[j]), terms * 0x1p-52 * scale)
        << what << " element " << j << ": " << a[j] << " vs " << b[j];
}

// The loss sum(layer(x) * w) and its gradients with respect to x and the trainable weights,
// eagerly and as a kiln::function on the reference executor and compiled; each traced output
// within expect_close(terms) of the eager one.
inline void expect_traced_agrees(const Layer& layer, const Tensor& x, double terms) {
  Tensor w = gradcheck::uniform(layer(x).shape(), 5);
  auto grads = [layer](const Tensor& xx, const Tensor& ww) {
    GradientTape tape(/*persistent=*/true);
    tape.watch(xx);
    Tensor loss = sum(layer(xx) * ww);
    std::vector<Tensor> out{loss, tape.gradient(loss, xx, UnconnectedGradients::kZero)};
    for (const Tensor& g : tape.gradient(loss, layer->trainable_weights())) out.push_back(g);
    return out;
  };
  auto f = function(grads, {.name = layer->name()});
  std::vector<Tensor> eager = grads(x, w);
  for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
    std::vector<Tensor> traced = f.concrete(x, w).run({x, w}, mode);
    ASSERT_EQ(traced.size(), eager.size());
    for (size_t i = 0; i < traced.size(); ++i)
      expect_close(traced[i].to_vector<double>(), eager[i].to_vector<double>(), terms,
                   fmt::format("{} {} output {}", layer->name(), execution_mode_name(mode), i));
  }
}

// Element of a row-major NHWC array.
inline double at4(const std::vector<double>& v, const Shape& s, int64_t n, int64_t h, int64_t w,
                  int64_t c) {
  return v[size_t(((n * s[1] + h) * s[2] + w) * s[3] + c)];
}

// TensorFlow's padding before the data for one spatial dimension ("same": half of the total,
// rounded down; "valid": 0) and the output length.
inline std::pair<int64_t, int64_t> ref_window(int64_t in, int64_t k, int64_t stride,
                                              int64_t dilation, const std::string& padding) {
  int64_t eff = (k - 1) * dilation + 1;
  if (padding == "valid") return {0, in < eff ? 0 : (in - eff) / stride + 1};
  int64_t out = (in + stride - 1) / stride;
  int64_t total = std::max<int64_t>(0, (out - 1) * stride + eff - in);
  return {total / 2, out};
}

// Naive NHWC x HWIO convolution.
inline std::vector<double> ref_conv2d(const std::vector<double>& x, const Shape& xs,
                                      const std::vector<double>& k, const Shape& ks,
                                      const Axes& strides, const std::string& padding,
                                      const Axes& dil, Shape* out_shape) {
  auto [ph, oh] = ref_window(xs[1], ks[0], strides[0], dil[0], padding);
  auto [pw, ow] = ref_window(xs[2], ks[1], strides[1], dil[1], padding);
  *out_shape = Shape{xs[0], oh, ow, ks[3]};
  std::vector<double> out;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t o = 0; o < ks[3]; ++o) {
          double acc = 0;
          for (int64_t a = 0; a < ks[0]; ++a)
            for (int64_t b = 0; b < ks[1]; ++b) {
              int64_t h = i * strides[0] + a * dil[0] - ph, w = j * strides[1] + b * dil[1] - pw;
              if (h < 0 || h >= xs[1] || w < 0 || w >= xs[2]) continue;
              for (int64_t c = 0; c < xs[3]; ++c)
                acc +=
                    at4(x, xs, n, h, w, c) * k[size_t(((a * ks[1] + b) * ks[2] + c) * ks[3] + o)];
            }
          out.push_back(acc);
        }
  return out;
}

// Naive max / average pooling (average over in-bounds elements only).
inline std::vector<double> ref_pool2d(const std::vector<double>& x, const Shape& xs,
                                      const Axes& pool, const Axes& strides,
                                      const std::string& padding, bool is_max, Shape* out_shape) {
  auto [ph, oh] = ref_window(xs[1], pool[0], strides[0], 1, padding);
  auto [pw, ow] = ref_window(xs[2], pool[1], strides[1], 1, padding);
  *out_shape = Shape{xs[0], oh, ow, xs[3]};
  std::vector<double> out;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t c = 0; c < xs[3]; ++c) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0;
          int count = 0;
          for (int64_t a = 0; a < pool[0]; ++a)
            for (int64_t b = 0; b < pool[1]; ++b) {
              int64_t h = i * strides[0] + a - ph, w = j * strides[1] + b - pw;
              if (h < 0 || h >= xs[1] || w < 0 || w >= xs[2]) continue;
              double v = at4(x, xs, n, h, w, c);
              acc = is_max ? std::max(acc, v) : acc + v;
              ++count;
            }
          out.push_back(is_max ? acc : acc / count);
        }
  return out;
}

}  // namespace kiln::test
