// Masking (Keras' Masking layer): marks the time steps whose features all equal `mask_value`
// as padding. Input [batch, timesteps, features]; the output is the input with masked steps
// zeroed, carrying the mask any(x != mask_value, axis=-1) ([batch, timesteps]) for the layers
// after it (recurrent layers, attention, pooling, losses and metrics).
#pragma once

#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"

namespace kiln {

struct MaskingOptions {
  double mask_value = 0.0;
  std::string name{};  // empty: "masking", "masking_1", ...
};

class MaskingImpl : public LayerImpl {
 public:
  explicit MaskingImpl(MaskingOptions options = {});
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;
  double mask_value() const { return options_.mask_value; }

 private:
  Tensor keep(const Tensor& x) const;  // [batch, timesteps] bool
  MaskingOptions options_;
};

class Masking : public Layer {
  KILN_LAYER_HANDLE(Masking)
 public:
  explicit Masking(MaskingOptions options = {});
};

// Keras' Masking.from_config: the layer get_config's config describes (kiln::Error naming the
// layer and the entry for a bad config).
Layer masking_from_config(const Json& config);

}  // namespace kiln
