// Test-only layers for the model tests, so graph mechanics are checked without depending on
// the built-in layers: ScaleBias (y = x * scale + bias per feature, constant initial
// weights), Split (two outputs: x and -x), TrainingProbe (x * 2 in training, x otherwise).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer.h"
#include "tests/frontend/op_test_util.h"

namespace kiln::test {

class ScaleBiasImpl : public LayerImpl {
 public:
  explicit ScaleBiasImpl(double scale, std::string name)
      : LayerImpl("ScaleBias", std::move(name)), scale_init_(scale) {}
  void build(const Shape& s) override {
    scale = add_weight("scale", {s.dim(-1)}, initializers::constant(scale_init_));
    bias = add_weight("bias", {s.dim(-1)}, initializers::constant(0.5));
  }
  Tensor call(const Tensor& x, bool) override { return x * scale.read() + bias.read(); }
  Variable scale, bias;

 private:
  double scale_init_;
};

class ScaleBias : public Layer {
  KILN_LAYER_HANDLE(ScaleBias)
 public:
  explicit ScaleBias(double scale = 2.0, std::string name = "")
      : Layer(std::make_shared<ScaleBiasImpl>(scale, std::move(name))) {}
};

class SplitImpl : public LayerImpl {
 public:
  SplitImpl() : LayerImpl("Split") {}
  std::vector<Tensor> call_many(const std::vector<Tensor>& xs, bool) override {
    return {xs.at(0), -xs.at(0)};
  }
};
inline Layer Split() { return Layer(std::make_shared<SplitImpl>()); }

class TrainingProbeImpl : public LayerImpl {
 public:
  TrainingProbeImpl() : LayerImpl("TrainingProbe") {}
  Tensor call(const Tensor& x, bool training) override { return training ? x * 2.0 : x; }
};
inline Layer TrainingProbe() { return Layer(std::make_shared<TrainingProbeImpl>()); }

// Exact equality of two concrete float tensors (same ops in the same order).
inline void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape().to_string(), b.shape().to_string());
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
}

}  // namespace kiln::test
