// Layer wrappers for sequences (Keras 3's TimeDistributed and Bidirectional).
//
// TimeDistributed(layer): applies `layer` to every time step of an input
// [batch, timesteps, ...] by folding time into the batch ([batch * timesteps, ...] -> layer ->
// [batch, timesteps, ...]), one call of the inner layer for all steps. The inner layer is
// tracked: its weights are the wrapper's. The input mask passes through unchanged (Keras 3);
// a mask with more axes than [batch, timesteps] (e.g. [batch, timesteps, words] from a
// TimeDistributed Embedding(mask_zero)) is folded the same way and handed to the inner layer.
//
// Bidirectional(layer): runs a recurrent layer (SimpleRNN, LSTM or GRU) over the sequence in
// both directions and merges the two outputs. As Keras, the forward layer is a new layer built
// from `layer`'s arguments (named "forward_<name>"; `layer` itself is not called and its
// weights are not used), and the backward layer is, unless given, another copy with
// go_backwards flipped named "backward_<name>". Both get zero_output_for_mask =
// return_sequences. With return_sequences the backward output is reversed along time, so step
// t of both halves describes input step t. Masks go to both layers. Initial states:
// layer({x, forward states..., backward states...}); with return_state the outputs are
// {merged, forward states..., backward states...}. Weights: the forward layer's, then the
// backward layer's.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"

namespace kiln {

struct TimeDistributedOptions {
  std::string name{};  // empty: "time_distributed", "time_distributed_1", ...
};

class TimeDistributedImpl : public LayerImpl {
 public:
  explicit TimeDistributedImpl(Layer layer, TimeDistributedOptions options = {});
  // Builds the inner layer on [batch, ...] (the input shape without the time axis).
  void build(const Shape& input_shape) override;
  Tensor call(const Tensor& x, bool training) override;
  std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks, bool training) override;
  Json get_config() const override;  // + "layer": {"class_name", "config"}

  const Layer& layer() const { return layer_; }

 private:
  Tensor run(const Tensor& x, const Tensor& mask, bool training);
  Layer layer_;
};

class TimeDistributed : public Layer {
  KILN_LAYER_HANDLE(TimeDistributed)
 public:
  explicit TimeDistributed(Layer layer, TimeDistributedOptions options = {});
};

struct BidirectionalOptions {
  std::string merge_mode = "concat";  // "concat" (last axis), "sum", "mul" or "ave"
  Layer backward_layer{};             // empty: a copy of the layer with go_backwards flipped
  std::string name{};                 // empty: "bidirectional", "bidirectional_1", ...
};

class BidirectionalImpl : public LayerImpl {
 public:
  explicit BidirectionalImpl(const Layer& layer, BidirectionalOptions options = {});
  void build_many(const std::vector<Shape>& input_shapes) override;
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks, bool training) override;
  // The input mask on the output with return_sequences; states have none.
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  // + "merge_mode", "layer" and "backward_layer" ({"class_name", "config"})
  Json get_config() const override;

  const Layer& forward_layer() const { return forward_; }
  const Layer& backward_layer() const { return backward_; }
  const std::string& merge_mode() const { return merge_mode_; }

 private:
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const Tensor& mask, bool training);
  Layer forward_, backward_;
  std::string merge_mode_;
  bool return_sequences_, return_state_;
};

class Bidirectional : public Layer {
  KILN_LAYER_HANDLE(Bidirectional)
 public:
  explicit Bidirectional(const Layer& layer, BidirectionalOptions options = {});
};

// Keras' TimeDistributed.from_config and Bidirectional.from_config: the wrapper get_config's
// config describes; `inner_from_config` makes the layers it holds from their specs
// {"class_name", "config"} (keras/saving/ passes layer_from_config). kiln::Error naming the
// layer and the entry for a bad config, or for an inner layer `inner_from_config` refuses.
Layer time_distributed_from_config(const Json& config,
                                   const std::function<Layer(const Json& spec)>& inner_from_config);
Layer bidirectional_from_config(const Json& config,
                                const std::function<Layer(const Json& spec)>& inner_from_config);

}  // namespace kiln
