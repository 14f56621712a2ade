// Dropout: during training, zeroes each input element with probability `rate` and scales the
// others by 1 / (1 - rate) (Keras' Dropout). At inference it returns its input unchanged.
//
// Each training call draws a fresh seed from the layer's own generator, itself seeded from
// the global seed sequence (kiln::set_random_seed) or from options.seed: successive calls use
// different masks, and a program re-run with the same seeds gets the same masks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "frontend/creation.h"
#include "frontend/layers/layer.h"

namespace kiln {

struct DropoutOptions {
  std::optional<int64_t> seed{};  // default: from the global seed generator
  std::string name{};             // empty: "dropout", "dropout_1", ...
};

// rate in [0, 1). No weights; the output has the input's dtype and shape.
class DropoutImpl : public LayerImpl {
 public:
  explicit DropoutImpl(double rate, DropoutOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + "rate", "seed", "noise_shape" (always null)
  double rate() const { return rate_; }

 private:
  double rate_;
  std::optional<int64_t> seed_;
  Generator generator_;
};

class Dropout : public Layer {
  KILN_LAYER_HANDLE(Dropout)
 public:
  explicit Dropout(double rate, DropoutOptions options = {});
};

}  // namespace kiln
