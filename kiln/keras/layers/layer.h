// Layer: Keras' layer life cycle in C++.
//
// A layer is used through a handle with reference semantics (copying a Layer shares the
// layer, like libtorch modules). Calling it (operator()) checks `input_spec`, builds the layer
// once on the first call from the input shapes (`build`, the `built` flag), then runs `call`.
// `add_weight` creates variables named "<layer>/<weight>" and tracks them as trainable or not.
// `add_seed_generator` creates a SeedGenerator ("<layer>/seed_generator_state") for the layer's
// random draws: its state is in variables() (all state, Keras 3), not in the weights.
// Called on symbolic tensors (from kiln::Input) a layer records a node for functional models.
//
// To write a layer, derive from LayerImpl and override build/call (single input) or
// build_many/call_many (several inputs); wrap it with KILN_LAYER_HANDLE for a handle type.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "kiln/frontend/seed_generator.h"
#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"
#include "kiln/ir/source_location.h"
#include "kiln/keras/layers/constraints.h"
#include "kiln/keras/layers/dtype_policy.h"
#include "kiln/keras/layers/initializers.h"
#include "kiln/keras/layers/input_spec.h"

namespace kiln {

using Json = nlohmann::json;
class Layer;
struct Node;

// Weight regularization added to the training loss: l1 * sum|w| + l2 * sum(w^2).
struct Regularizer {
  double l1 = 0, l2 = 0;
  bool active() const { return l1 != 0 || l2 != 0; }
  Tensor operator()(const Tensor& w) const;
};
namespace regularizers {
inline Regularizer l1(double v) { return {v, 0}; }
inline Regularizer l2(double v) { return {0, v}; }
inline Regularizer l1_l2(double a, double b) { return {a, b}; }
}  // namespace regularizers

// Forgets the names handed out so far ("dense", "dense_1", ...), like Keras' clear_session.
void clear_session();
// A unique name from a base: "dense", then "dense_1", "dense_2", ...
std::string unique_layer_name(const std::string& base);

class LayerImpl : public std::enable_shared_from_this<LayerImpl> {
 public:
  // `class_name` is the Keras class ("Dense"); an empty `name` gets a unique default from it
  // in snake case ("dense", "dense_1", ...).
  LayerImpl(std::string class_name, std::string name = "");
  virtual ~LayerImpl();
  LayerImpl(const LayerImpl&) = delete;
  LayerImpl& operator=(const LayerImpl&) = delete;

  // ---- what subclasses override ----
  virtual void build(const Shape& input_shape);
  virtual void build_many(const std::vector<Shape>& input_shapes);
  virtual Tensor call(const Tensor& inputs, bool training);
  virtual std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training);
  // Default: runs call on symbolic inputs of these shapes (batch dimension may be -1).
  virtual std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes);
  // {"name", "trainable", ...}; subclasses add their arguments. Weighted layers write their
  // "dtype" policy always (layer_util::base_config), as Keras; other layers write it when it is
  // not "float32" (Keras writes it always; both forms read back the same).
  virtual Json get_config() const;

  // ---- masks (Keras' supports_masking, compute_mask and the `mask` call argument) ----
  // The call given the masks of the inputs (undefined where an input has none). Layers that
  // consume masks (recurrent layers, attention, pooling) override this; the default ignores
  // them and runs call_many.
  virtual std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                          const std::vector<Tensor>& masks, bool training);
  // The masks of the outputs (undefined: none), one per output or empty for none at all.
  // Default (Keras 3): the input mask when supports_masking, else no mask.
  virtual std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& masks);
  // True for layers that pass the input mask on unchanged (Dense, Dropout, activations ...).
  bool supports_masking = false;

  // ---- the life cycle ----
  // Keras' __call__: spec check, lazy build, call_masked with the inputs' keras_mask() (or
  // node recording on symbolic inputs); the outputs carry compute_mask's masks.
  std::vector<Tensor> invoke(const std::vector<Tensor>& inputs, bool training);
  // Builds once, from the input shapes.
  void maybe_build(const std::vector<Shape>& input_shapes);
  bool built() const { return built_; }
  // The input shapes the layer was built from (Keras' _build_shapes_dict); empty before.
  const std::vector<Shape>& build_input_shapes() const { return build_input_shapes_; }
  // Where the user's code put this layer into a model: its first call on symbolic tensors (a
  // functional model), Sequential's constructor or add(), or a Python frame. A traced call
  // names its nodes' source location after it where the call itself gives none (a model's
  // step calls its layers from kiln's code). The first user location noted stays.
  void note_origin(const ir::SourceLocation& location);
  const ir::SourceLocation& origin() const { return origin_; }

  // ---- dtype policy (kiln/keras/layers/dtype_policy.h) ----
  // The layer's policy: its `dtype` argument, else the global policy when it was constructed.
  const DTypePolicy& dtype_policy() const { return dtype_policy_; }
  // Sets the policy; kiln::Error once the layer is built with weights of its own.
  void set_dtype_policy(const DTypePolicy& policy);
  DType compute_dtype() const { return dtype_policy_.compute_dtype(); }
  DType variable_dtype() const { return dtype_policy_.variable_dtype(); }
  // Keras' Layer.dtype: the variable dtype.
  DType dtype() const { return variable_dtype(); }
  // Keras' autocast: floating inputs are cast to the compute dtype before call, and
  // read_weight casts floating variables to it. Normalization layers turn it off (they
  // compute in float32 themselves). One difference from Keras: a layer whose policy is the
  // implicit default (no dtype given, the global policy float32) does not cast its inputs in
  // invoke, so a layer without weights computes in its input's dtype (float64 stays float64);
  // layers with weights cast to their weights' dtype in call either way.
  bool autocast = true;
  // The policy was given (dtype option, set_dtype_policy, a config) or the global policy was
  // not float32 when the layer was made.
  bool dtype_policy_explicit() const { return policy_explicit_; }
  // `v` read for the computation: cast to the compute dtype when autocast is on, v is floating
  // and of another dtype (Keras' AutocastScope); the cast is an op, so the gradient reaches v
  // in v's dtype.
  Tensor read_weight(const Variable& v) const;

  // ---- weights ----
  // A defined `constraint` is set on the variable (Variable::set_constraint): the optimizer
  // projects the variable with it after each update. No dtype: the variable dtype.
  Variable add_weight(const std::string& name, const Shape& shape,
                      const Initializer& initializer = initializers::glorot_uniform(),
                      bool trainable = true, std::optional<DType> dtype = std::nullopt,
                      const Regularizer& regularizer = {}, const Constraint& constraint = {});
  // This layer's and its sublayers' variables, in creation order, without duplicates.
  // A non-trainable layer reports all its weights as non-trainable (Keras).
  std::vector<Variable> weights() const;
  std::vector<Variable> trainable_weights() const;
  std::vector<Variable> non_trainable_weights() const;
  std::vector<Tensor> get_weights() const;
  // Values in the order of weights(); count, shapes and dtypes must match.
  void set_weights(const std::vector<Tensor>& values);
  int64_t count_params() const;
  // All the layer's state (Keras 3's Layer.variables): per layer its weights, then its seed
  // generators' states, then its sublayers' variables; without duplicates. The weights
  // functions above (and get/set_weights, count_params, summaries, save/load_weights) leave
  // the seed generators' states out, as Keras does.
  std::vector<Variable> variables() const;
  // A SeedGenerator whose state variable is "<layer>/seed_generator_state", tracked by this
  // layer (seed: explicit, or from the global seed sequence when unset).
  SeedGenerator add_seed_generator(std::optional<int64_t> seed);
  const std::vector<SeedGenerator>& seed_generators() const { return seed_generators_; }
  bool trainable() const { return trainable_; }
  // Sets the flag on this layer and every sublayer.
  void set_trainable(bool trainable);

  // ---- losses ----
  // During call: a loss to add to the training loss (e.g. an activity regularizer).
  void add_loss(const Tensor& loss);
  // Losses of the last call plus weight regularization, of this layer and its sublayers.
  std::vector<Tensor> losses() const;
  // Activity regularization of this layer's output, applied after each call.
  Regularizer activity_regularizer;

  // ---- sublayers ----
  // Tracks `layer` as a sublayer (its weights become this layer's) and returns it.
  template <typename L>
  L track(L layer) {
    track_layer(layer);
    return layer;
  }
  void track_layer(const Layer& layer);
  const std::vector<Layer>& sublayers() const { return sublayers_; }

  const std::string& name() const { return name_; }
  const std::string& class_name() const { return class_name_; }
  std::vector<InputSpec> input_spec;

  // Functional-model nodes where this layer was called on symbolic tensors.
  std::vector<std::weak_ptr<Node>> inbound_nodes;

 protected:
  // A layer's `dtype` option: the policy when given (the global one is already set).
  void use_dtype_option(const std::optional<DTypePolicy>& policy) {
    if (policy) set_dtype_policy(*policy);
  }
  bool built_ = false;
  // Models: the outputs keep the masks their inner layers attached (compute_mask is not used).
  bool outputs_keep_masks_ = false;

 private:
  void collect_weights(std::vector<Variable>& out, bool parent_trainable, int which) const;
  void collect_variables(std::vector<Variable>& out) const;
  std::vector<Tensor> call_symbolic(const std::vector<Tensor>& inputs, bool training);
  void attach_output_masks(const std::vector<Tensor>& inputs, const std::vector<Tensor>& masks,
                           std::vector<Tensor>& outputs);

  std::vector<Tensor> autocast_inputs(const std::vector<Tensor>& inputs) const;

  std::string class_name_, name_;
  DTypePolicy dtype_policy_;
  bool policy_explicit_ = false;
  bool trainable_ = true;
  std::vector<Variable> own_weights_;
  std::vector<Regularizer> weight_regularizers_;  // parallel to own_weights_
  std::vector<SeedGenerator> seed_generators_;
  std::vector<Layer> sublayers_;
  std::vector<Tensor> call_losses_;
  std::vector<Shape> build_input_shapes_;
  ir::SourceLocation origin_;
};

// The handle users hold.
class Layer {
 public:
  Layer() = default;
  explicit Layer(std::shared_ptr<LayerImpl> impl) : impl_(std::move(impl)) {}

  // `loc` (the caller's position) is recorded on the nodes a trace makes inside this call.
  Tensor operator()(const Tensor& inputs, bool training = false,
                    std::source_location loc = std::source_location::current()) const;
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, bool training = false,
                                 std::source_location loc = std::source_location::current()) const;

  bool defined() const { return impl_ != nullptr; }
  LayerImpl* operator->() const { return &impl(); }
  LayerImpl& impl() const;
  const std::shared_ptr<LayerImpl>& ptr() const { return impl_; }
  friend bool operator==(const Layer& a, const Layer& b) { return a.impl_ == b.impl_; }

 private:
  std::shared_ptr<LayerImpl> impl_;
};

// Inside `class Name : public Layer { ... }`: the handle's constructor from an implementation
// and `->` / get() reaching NameImpl. Write the user-facing constructors next to it.
#define KILN_LAYER_HANDLE(Name)                                                       \
 public:                                                                              \
  using Impl = Name##Impl;                                                            \
  explicit Name(std::shared_ptr<Name##Impl> impl) : ::kiln::Layer(std::move(impl)) {} \
  Name##Impl* operator->() const { return static_cast<Name##Impl*>(&impl()); }        \
  Name##Impl& get() const { return static_cast<Name##Impl&>(impl()); }

}  // namespace kiln
