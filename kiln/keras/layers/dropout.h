// Dropout: during training, zeroes each input element with probability `rate` and scales the
// others by 1 / (1 - rate) (Keras' Dropout). At inference it returns its input unchanged.
//
// Each training call draws its mask with the seed of the layer's SeedGenerator (state variable
// "<name>/seed_generator_state", created when rate > 0 from options.seed or the global seed
// sequence, kiln::set_random_seed), which advances it: successive calls use different masks, a
// program re-run with the same seeds gets the same masks, and a call traced inside a
// kiln::function (fit's compiled step included) draws the same mask as the eager call from the
// same state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/keras/layers/layer.h"

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
  SeedGenerator seed_generator_;  // empty when rate == 0
};

class Dropout : public Layer {
  KILN_LAYER_HANDLE(Dropout)
 public:
  explicit Dropout(double rate, DropoutOptions options = {});
};

// Keras' Dropout.from_config: the layer get_config's config describes (kiln::Error naming the
// layer and the entry for a bad config; noise_shape is refused).
Layer dropout_from_config(const Json& config);

}  // namespace kiln
