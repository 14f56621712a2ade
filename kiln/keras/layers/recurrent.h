// Recurrent layers with Keras 3's names, arguments, defaults and weight layouts: SimpleRNN,
// LSTM and GRU.
//
// Input [batch, timesteps, features]; optionally initial states as further inputs
// (layer({x, h0}) for SimpleRNN/GRU, layer({x, h0, c0}) for LSTM). Output: the last output
// [batch, units], or every step's output [batch, timesteps, units] with return_sequences; with
// return_state the final states follow ({output, h} or {output, h, c}).
//
// Weights (Keras' layouts, so they interchange with Keras and map plainly to PyTorch):
//   kernel [features, G*units], recurrent_kernel [units, G*units] with G gates side by side
//   (LSTM: i, f, c, o; GRU: z, r, h; SimpleRNN: one), bias [G*units] ([2, 3*units] for GRU with
//   reset_after: input bias, then recurrent bias). Names "<layer>/kernel", ... (Keras 3 keeps
//   them under "<layer>/<layer>_cell/"; the order kernel, recurrent_kernel, bias is the same).
//
// Masks (Keras): the input's keras_mask() [batch, timesteps] (from Embedding(mask_zero) or
// Masking) makes masked steps carry every state through unchanged; their output repeats the
// previous one (zeros with zero_output_for_mask). With return_sequences the output keeps the
// mask. go_backwards reads the steps (and the mask) from the last to the first and returns the
// outputs in that order.
//
// Execution: eagerly a C++ loop over the steps; inside kiln::function one `while` node per
// layer whatever the length (kiln::scan: the loop's stacks hold every step's states, so time and
// memory are linear in the steps; gradients through the stacked while loop). A step is two
// GEMMs (x_t @ kernel, h @ recurrent_kernel) plus the gate arithmetic. Traced, the input
// projection of every step is one GEMM before the loop (a kiln::scan over its rows, whose
// gradients come back as one stack: the kernel's and the input's gradients are one GEMM each
// after the loop), each iteration also computes the next step's GEMM terms and carries them as
// state, so the gradient loop, which re-runs the step to differentiate it, finds them in the
// stacks and runs no forward GEMM (one extra product per call: the last iteration's, unused),
// and the recurrent kernel's gradient is one GEMM after the loop too (the loop multiplies by
// it with the gradient stopped; the products' gradients come back as a stack).
// dropout / recurrent_dropout draw one mask per call (the same for every step, as Keras)
// outside the loop, each from the next seed of the layer's SeedGenerator
// ("<name>/seed_generator_state"), so eager and traced calls from the same state draw the same
// masks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/keras/layers/layer.h"

namespace kiln {

// Arguments of SimpleRNN, LSTM and GRU (Keras 3 defaults). Fields one layer does not have are
// ignored by it and left out of its config.
struct RecurrentOptions {
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";  // LSTM, GRU
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer recurrent_initializer = "orthogonal";
  Initializer bias_initializer = "zeros";
  bool unit_forget_bias = true;  // LSTM: the forget gate's bias starts at 1
  bool reset_after = true;       // GRU: the reset gate applies after the recurrent GEMM
  Regularizer kernel_regularizer{};
  Regularizer recurrent_regularizer{};
  Regularizer bias_regularizer{};
  Regularizer activity_regularizer{};
  Constraint kernel_constraint{};  // applied after each optimizer update
  Constraint recurrent_constraint{};
  Constraint bias_constraint{};
  double dropout = 0;            // of the inputs, in [0, 1)
  double recurrent_dropout = 0;  // of the recurrent state, in [0, 1)
  std::optional<int64_t> seed{};
  bool return_sequences = false;
  bool return_state = false;
  bool go_backwards = false;
  bool zero_output_for_mask = false;
  bool unroll = false;  // Keras' speed hint: accepted either way, the results are the same
  // The DTypePolicy (a name such as "mixed_bfloat16", or a DType); unset: the global one.
  std::optional<DTypePolicy> dtype{};
  std::string name{};  // empty: "lstm", "lstm_1", ...
};

// The shared loop; SimpleRNNImpl, LSTMImpl and GRUImpl supply the step.
class RecurrentImpl : public LayerImpl {
 public:
  void build_many(const std::vector<Shape>& input_shapes) override;
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks, bool training) override;
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;

  int64_t units() const { return units_; }
  const RecurrentOptions& options() const { return options_; }
  // Number of state tensors (LSTM: h and c), each [batch, units].
  int num_states() const { return num_states_; }
  // Bidirectional sets it to return_sequences on both its layers (Keras).
  void set_zero_output_for_mask(bool zero) { options_.zero_output_for_mask = zero; }

  // The options that shape a call's outputs. layers.RNN (rnn.h) runs its cell's loop with its
  // own: call_masked, compute_mask and compute_output_shape as if the layer had `flags`.
  struct SequenceFlags {
    bool return_sequences = false, return_state = false, go_backwards = false,
         zero_output_for_mask = false;
  };
  std::vector<Tensor> call_with(const SequenceFlags& flags, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& masks, bool training);
  std::vector<Tensor> compute_mask_with(const SequenceFlags& flags,
                                        const std::vector<Tensor>& inputs,
                                        const std::vector<Tensor>& masks);
  std::vector<Shape> compute_output_shape_with(const SequenceFlags& flags,
                                               const std::vector<Shape>& input_shapes);
  Variable kernel, recurrent_kernel, bias;  // undefined until built (bias: without use_bias)

 protected:
  RecurrentImpl(std::string class_name, int64_t units, int gates, int num_states,
                RecurrentOptions options);
  // One step in two parts. `project`: the step's GEMM terms from its projected input xw
  // (x_t @ kernel + input bias, [batch, G*units]) and the recurrent product hu = h @
  // recurrent_weights[0] (h the previous output, already multiplied by the recurrent dropout
  // mask, as Keras does; undefined when recurrent_product() is false). `gate_step`: the new
  // states from those terms and the previous states (states[0] masked the same way); the first
  // is the step's output. Traced, the loop carries the next step's terms as state: the forward
  // loop computes each product once and the gradient loop reads it from the loop's stacks
  // instead of re-running it.
  virtual std::vector<Tensor> project(const Tensor& xw, const Tensor& hu,
                                      const std::vector<Tensor>& recurrent_weights) = 0;
  // Whether project uses hu (GRU without reset_after multiplies inside gate_step instead), and
  // whether it adds hu to xw (then d hu = d xw: the traced loop's weight gradient of the
  // product reuses xw's row gradients instead of a sequence of its own).
  virtual bool recurrent_product() const { return true; }
  virtual bool product_adds_to_input() const { return true; }
  virtual std::vector<Tensor> gate_step(const std::vector<Tensor>& terms,
                                        const std::vector<Tensor>& states,
                                        const std::vector<Tensor>& recurrent_weights) = 0;
  // Read once per call and handed to every step: the recurrent weights in the form step uses.
  virtual std::vector<Tensor> recurrent_weights();
  // The bias added to the input projection (undefined for none) and the bias weight's
  // shape and initializer.
  virtual Tensor input_bias();
  virtual Shape bias_shape() const;
  virtual Initializer bias_initializer() const;
  // Config entries only some layers have.
  virtual void add_config(Json& config) const = 0;

  int64_t units_;
  int gates_, num_states_;
  RecurrentOptions options_;

 private:
  std::vector<Tensor> run(const Tensor& x, const Tensor& mask, std::vector<Tensor> states,
                          bool training);
  // Sets `flags` in options_ until destroyed (the *_with functions).
  class FlagsScope;
  SeedGenerator seed_generator_;  // the dropout masks' (Keras' cell seed_generator)
};

class SimpleRNNImpl : public RecurrentImpl {
 public:
  SimpleRNNImpl(int64_t units, RecurrentOptions options = {});

 protected:
  std::vector<Tensor> project(const Tensor& xw, const Tensor& hu,
                              const std::vector<Tensor>& recurrent_weights) override;
  std::vector<Tensor> gate_step(const std::vector<Tensor>& terms, const std::vector<Tensor>& states,
                                const std::vector<Tensor>& recurrent_weights) override;
  void add_config(Json& config) const override;
};

class LSTMImpl : public RecurrentImpl {
 public:
  LSTMImpl(int64_t units, RecurrentOptions options = {});

 protected:
  std::vector<Tensor> project(const Tensor& xw, const Tensor& hu,
                              const std::vector<Tensor>& recurrent_weights) override;
  std::vector<Tensor> gate_step(const std::vector<Tensor>& terms, const std::vector<Tensor>& states,
                                const std::vector<Tensor>& recurrent_weights) override;
  Initializer bias_initializer() const override;
  void add_config(Json& config) const override;
};

class GRUImpl : public RecurrentImpl {
 public:
  GRUImpl(int64_t units, RecurrentOptions options = {});

 protected:
  std::vector<Tensor> project(const Tensor& xw, const Tensor& hu,
                              const std::vector<Tensor>& recurrent_weights) override;
  std::vector<Tensor> gate_step(const std::vector<Tensor>& terms, const std::vector<Tensor>& states,
                                const std::vector<Tensor>& recurrent_weights) override;
  std::vector<Tensor> recurrent_weights() override;
  bool recurrent_product() const override;
  bool product_adds_to_input() const override;
  Tensor input_bias() override;
  Shape bias_shape() const override;
  void add_config(Json& config) const override;
};

class SimpleRNN : public Layer {
  KILN_LAYER_HANDLE(SimpleRNN)
 public:
  SimpleRNN(int64_t units, RecurrentOptions options = {});
};

class LSTM : public Layer {
  KILN_LAYER_HANDLE(LSTM)
 public:
  LSTM(int64_t units, RecurrentOptions options = {});
};

class GRU : public Layer {
  KILN_LAYER_HANDLE(GRU)
 public:
  GRU(int64_t units, RecurrentOptions options = {});
};

// Keras' from_config of `class_name` ("SimpleRNN", "LSTM" or "GRU"): the layer get_config's
// config describes (kiln::Error naming the layer and the entry for a bad config; stateful is
// refused).
Layer recurrent_from_config(const Json& config, const std::string& class_name);

}  // namespace kiln
