// Internal to keras/saving/: where each variable of a kiln model lives in a Keras 3 weights
// file (model.weights.h5 inside a .keras file), and the order of Keras' optimizer variables.
//
// Keras 3 (saving_lib._save_state) stores a layer's own variables, trainable ones first, as
// "<path>/vars/0..n-1" and its sublayers under attribute names; a model's layers are listed
// under "layers/<snake_case class name>" with "_1", "_2", ... for repeated classes in
// model.layers order (never the layers' names, which the "vars" group keeps as its "name"
// attribute). kiln's layers keep their weights flat, so the Keras places are named per class:
//   Dense, Conv*, Embedding, normalizations, ...   <path>/vars/<i>
//   LSTM, GRU, SimpleRNN                           <path>/cell/vars/<i>
//   MultiHeadAttention                             <path>/{query,key,value,output}_dense/vars/<i>
//   Bidirectional                                  <path>/{forward,backward}_layer/...
//   TimeDistributed                                <path>/layer/...
//   Sequential, Functional (nested too)            <path>/vars/<i> (the model's own variables),
//                                                  <path>/layers/<snake_case class>[_<k>]/...
// Seed-generator states are not in Keras' weights files (Keras leaves them out): they are not in
// the layout, and keep their values on load.
//
// The optimizer's variables ("optimizer/vars/<i>"): iterations, the learning rate (absent with a
// schedule), then the slots of the trainable variables in the layout's order, in Keras' blocks:
// Adam/AdamW (momentum, velocity) per variable then velocity_hat per variable (amsgrad); SGD
// momentum (momentum != 0); RMSprop velocity, then momentum (momentum > 0), then
// average_gradient (centered).
#pragma once

#include <string>
#include <vector>

#include "kiln/keras/models/model.h"

namespace kiln::saving_detail {

// Keras' naming.to_snake_case: "MultiHeadAttention" -> "multi_head_attention", "Conv2D" ->
// "conv2d", "RMSprop" -> "rm_sprop".
std::string keras_snake_case(const std::string& class_name);

struct KerasWeightLayout {
  struct Entry {
    std::string path;  // "layers/dense/vars/0"
    Variable variable;
  };
  struct Group {
    std::string path;  // "layers/dense/vars"
    std::string name;  // the layer's name ("" where Keras has no layer of its own)
  };
  std::vector<Entry> variables;  // in Keras' variables order (the optimizer's order)
  std::vector<Group> groups;     // every "vars" group Keras writes, weightless layers' too
};

// kiln::Error for a layer whose sublayers kiln cannot place (a custom layer with sublayers).
KerasWeightLayout keras_weight_layout(const ModelImpl& model);

struct KerasOptimizerEntry {
  enum class Kind { iterations, learning_rate, slot } kind;
  Variable owner;    // the model's variable (slots)
  std::string slot;  // "momentum", "velocity", ...
  std::string describe() const;
};
// The optimizer variables of `optimizer` over the trainable variables `trainable` (in
// order). kiln::Error for an optimizer class Keras' layout is not known for.
std::vector<KerasOptimizerEntry> keras_optimizer_layout(const OptimizerImpl& optimizer,
                                                        const std::vector<Variable>& trainable);

}  // namespace kiln::saving_detail
