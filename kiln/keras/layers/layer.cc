#include "kiln/keras/layers/layer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/node.h"

namespace kiln {
namespace {

struct NameRegistry {
  std::mutex mutex;
  std::map<std::string, int> counts;
};
NameRegistry& names() {
  static NameRegistry r;
  return r;
}

// Keras' to_snake_case: "BatchNormalization" -> "batch_normalization", "Conv2D" -> "conv2d".
std::string snake_case(const std::string& s) {
  std::string r = std::regex_replace(s, std::regex("(.)([A-Z][a-z]+)"), "$1_$2");
  r = std::regex_replace(r, std::regex("([a-z])([A-Z])"), "$1_$2");
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

}  // namespace

Tensor Regularizer::operator()(const Tensor& w) const {
  Tensor loss = scalar(0, w.dtype());
  if (l1 != 0) loss = loss + sum(abs(w)) * l1;
  if (l2 != 0) loss = loss + sum(square(w)) * l2;
  return loss;
}

void clear_session() {
  std::lock_guard<std::mutex> lock(names().mutex);
  names().counts.clear();
}

std::string unique_layer_name(const std::string& base) {
  std::lock_guard<std::mutex> lock(names().mutex);
  int n = names().counts[base]++;
  return n == 0 ? base : fmt::format("{}_{}", base, n);
}

LayerImpl::LayerImpl(std::string class_name, std::string name)
    : class_name_(std::move(class_name)),
      name_(name.empty() ? unique_layer_name(snake_case(class_name_)) : std::move(name)),
      dtype_policy_(mixed_precision::global_policy()),
      policy_explicit_(!(dtype_policy_ == DTypePolicy())) {}

void LayerImpl::set_dtype_policy(const DTypePolicy& policy) {
  // Weights exist in the old variable dtype once built; a layer without weights of its own
  // (a model rebuilt from its config, an activation) may still change.
  if (built_ && !own_weights_.empty() && !(policy == dtype_policy_))
    throw Error(fmt::format(
        "layer \"{}\": its dtype policy cannot change to {} after it was built (its weights are "
        "{}); set the policy before the first call",
        name_, policy.repr(), dtype_name(variable_dtype())));
  dtype_policy_ = policy;
  policy_explicit_ = true;
}

Tensor LayerImpl::read_weight(const Variable& v) const {
  Tensor value = v.read();
  const DType t = compute_dtype();
  if (autocast && is_floating(t) && is_floating(value.dtype()) && value.dtype() != t)
    return cast(value, t);
  return value;
}

std::vector<Tensor> LayerImpl::autocast_inputs(const std::vector<Tensor>& inputs) const {
  const DType t = compute_dtype();
  if (!autocast || !policy_explicit_ || !is_floating(t)) return inputs;
  std::vector<Tensor> out = inputs;
  for (Tensor& x : out)
    if (x.defined() && is_floating(x.dtype()) && x.dtype() != t)
      x = cast(x, t).with_keras_mask(x.keras_mask());
  return out;
}

LayerImpl::~LayerImpl() = default;

void LayerImpl::build(const Shape&) {}

void LayerImpl::build_many(const std::vector<Shape>& shapes) {
  if (shapes.size() == 1) build(shapes[0]);
}

Tensor LayerImpl::call(const Tensor&, bool) {
  throw Error(
      fmt::format("layer \"{}\" ({}) does not take a single input; call it with a list "
                  "of tensors",
                  name_, class_name_));
}

std::vector<Tensor> LayerImpl::call_many(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.size() != 1)
    throw Error(fmt::format("layer \"{}\" ({}) takes one input, but it was called with {}", name_,
                            class_name_, inputs.size()));
  return {call(inputs[0], training)};
}

std::vector<Shape> LayerImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  std::vector<Tensor> inputs;
  for (const Shape& s : input_shapes) inputs.push_back(Tensor::symbolic({DType::f32, s}, nullptr));
  maybe_build(input_shapes);
  std::vector<Shape> out;
  for (const Tensor& t : call_many(inputs, false)) out.push_back(t.shape());
  return out;
}

std::vector<Tensor> LayerImpl::call_masked(const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>&, bool training) {
  return call_many(inputs, training);
}

std::vector<Tensor> LayerImpl::compute_mask(const std::vector<Tensor>&,
                                            const std::vector<Tensor>& masks) {
  if (!supports_masking) return {};
  return masks;
}

namespace {

std::vector<Tensor> masks_of(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> masks;
  for (const Tensor& t : inputs) masks.push_back(t.keras_mask());
  return masks;
}

bool any_defined(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (t.defined()) return true;
  return false;
}

}  // namespace

// Attaches compute_mask's masks to the outputs (replacing any the call left on them, e.g. a
// layer returning its input), unless this is a model whose outputs keep their inner masks.
void LayerImpl::attach_output_masks(const std::vector<Tensor>& inputs,
                                    const std::vector<Tensor>& masks,
                                    std::vector<Tensor>& outputs) {
  if (outputs_keep_masks_) return;
  std::vector<Tensor> out_masks = compute_mask(inputs, masks);
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor m = i < out_masks.size() ? out_masks[i] : Tensor();
    if (m.defined() || outputs[i].keras_mask().defined())
      outputs[i] = outputs[i].with_keras_mask(m);
  }
}

Json LayerImpl::get_config() const {
  Json c{{"name", name_}, {"trainable", trainable_}};
  if (!(dtype_policy_ == DTypePolicy())) c["dtype"] = dtype_policy_.serialize();
  return c;
}

void LayerImpl::maybe_build(const std::vector<Shape>& shapes) {
  if (built_) return;
  build_many(shapes);
  built_ = true;
  build_input_shapes_ = shapes;
}

std::vector<Tensor> LayerImpl::invoke(const std::vector<Tensor>& inputs, bool training) {
  if (inputs.empty()) throw Error(fmt::format("layer \"{}\" was called with no inputs", name_));
  bool any_symbolic = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      throw Error(fmt::format("layer \"{}\": input {} is an undefined tensor", name_, i));
    any_symbolic = any_symbolic || inputs[i].is_placeholder();
  }
  check_input_spec(name_, input_spec, inputs);
  if (any_symbolic) return call_symbolic(inputs, training);
  // Traced nodes are named "<layer>/<op>"; their location is the caller's, else the origin's.
  detail::NameScope scope(name_, origin_, detail::LocationRule::kIfUnknown);

  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  maybe_build(shapes);
  call_losses_.clear();
  std::vector<Tensor> masks = masks_of(inputs);
  const std::vector<Tensor> args = autocast_inputs(inputs);
  std::vector<Tensor> outputs =
      any_defined(masks) ? call_masked(args, masks, training) : call_many(args, training);
  if (activity_regularizer.active())
    for (const Tensor& y : outputs)
      add_loss(activity_regularizer(y));  // Keras 3: no batch division
  attach_output_masks(inputs, masks, outputs);
  return outputs;
}

std::vector<Tensor> LayerImpl::call_symbolic(const std::vector<Tensor>& inputs, bool training) {
  std::vector<Shape> shapes;
  bool all_history = true;
  for (const Tensor& t : inputs) {
    shapes.push_back(t.shape());
    all_history = all_history && keras_history(t) != nullptr;
  }
  maybe_build(shapes);
  std::vector<Tensor> masks = masks_of(inputs);
  auto run = [&](const std::vector<Tensor>& given) {
    const std::vector<Tensor> args = autocast_inputs(given);
    std::vector<Tensor> outputs =
        any_defined(masks) ? call_masked(args, masks, training) : call_many(args, training);
    attach_output_masks(args, masks, outputs);
    return outputs;
  };
  // Inside another layer's symbolic call (no history): just propagate types and masks.
  if (!all_history) return run(inputs);
  // `call` sees the inputs without their history, so sublayers it calls (a nested model's
  // layers, a subclassed model's tracked layers) record no nodes of their own.
  std::vector<Tensor> plain;
  for (const Tensor& t : inputs)
    plain.push_back(Tensor::symbolic(t.type(), nullptr).with_keras_mask(t.keras_mask()));
  std::vector<Tensor> outputs = run(plain);
  auto node = std::make_shared<Node>();
  node->layer = shared_from_this();
  node->inputs = inputs;
  node->training = training;
  for (const Tensor& t : outputs) {
    node->output_types.push_back(t.type());
    node->output_masks.push_back(t.keras_mask());
  }
  inbound_nodes.push_back(node);
  std::vector<Tensor> tracked;
  for (size_t i = 0; i < outputs.size(); ++i)
    tracked.push_back(Tensor::symbolic(outputs[i].type(), std::make_shared<KerasHistory>(node, i))
                          .with_keras_mask(outputs[i].keras_mask()));
  return tracked;
}

Variable LayerImpl::add_weight(const std::string& name, const Shape& shape,
                               const Initializer& initializer, bool trainable,
                               std::optional<DType> dtype_arg, const Regularizer& regularizer,
                               const Constraint& constraint) {
  const DType dtype = dtype_arg.value_or(variable_dtype());
  if (!shape.is_fully_known())
    throw Error(fmt::format("layer \"{}\": weight \"{}\" needs a fully known shape, got {}", name_,
                            name, shape.to_string()));
  Tensor initial_value;
  {
    detail::InitScope eager;  // initial values are computed eagerly, outside any trace
    // bfloat16 weights: drawn in float32 and rounded once (the initializers draw in float32).
    initial_value = dtype == DType::bf16 ? cast(initializer(shape, DType::f32), DType::bf16)
                                         : initializer(shape, dtype);
  }
  Variable v(name_ + "/" + name, initial_value, trainable);
  if (constraint.defined())
    v.set_constraint([constraint](const Tensor& w) { return constraint(w); });
  own_weights_.push_back(v);
  weight_regularizers_.push_back(regularizer);
  return v;
}

void LayerImpl::collect_weights(std::vector<Variable>& out, bool parent_trainable,
                                int which) const {
  bool layer_trainable = parent_trainable && trainable_;
  auto add = [&](const Variable& v) {
    bool t = layer_trainable && v.trainable();
    if (which == 1 && !t) return;
    if (which == 2 && t) return;
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (const Variable& v : own_weights_) add(v);
  for (const Layer& l : sublayers_) l.impl().collect_weights(out, layer_trainable, which);
}

std::vector<Variable> LayerImpl::weights() const {
  std::vector<Variable> out;
  collect_weights(out, true, 0);
  return out;
}
std::vector<Variable> LayerImpl::trainable_weights() const {
  std::vector<Variable> out;
  collect_weights(out, true, 1);
  return out;
}
std::vector<Variable> LayerImpl::non_trainable_weights() const {
  std::vector<Variable> out;
  collect_weights(out, true, 2);
  return out;
}

void LayerImpl::collect_variables(std::vector<Variable>& out) const {
  auto add = [&](const Variable& v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (const Variable& v : own_weights_) add(v);
  for (const SeedGenerator& g : seed_generators_) add(g.state());
  for (const Layer& l : sublayers_) l.impl().collect_variables(out);
}

std::vector<Variable> LayerImpl::variables() const {
  std::vector<Variable> out;
  collect_variables(out);
  return out;
}

SeedGenerator LayerImpl::add_seed_generator(std::optional<int64_t> seed) {
  SeedGenerator g(seed, name_);
  seed_generators_.push_back(g);
  return g;
}

std::vector<Tensor> LayerImpl::get_weights() const {
  std::vector<Tensor> out;
  for (const Variable& v : weights()) out.push_back(v.value());
  return out;
}

void LayerImpl::set_weights(const std::vector<Tensor>& values) {
  std::vector<Variable> ws = weights();
  if (values.size() != ws.size())
    throw Error(fmt::format("set_weights: layer \"{}\" has {} weights, but {} values were given",
                            name_, ws.size(), values.size()));
  for (size_t i = 0; i < ws.size(); ++i) {
    if (!(values[i].type() == ws[i].value().type()))
      throw Error(fmt::format("set_weights: weight {} ({}) is {}, the value given is {}", i,
                              ws[i].name(), ws[i].value().type().to_string(),
                              values[i].type().to_string()));
  }
  for (size_t i = 0; i < ws.size(); ++i) ws[i].assign(values[i]);
}

int64_t LayerImpl::count_params() const {
  int64_t n = 0;
  for (const Variable& v : weights()) n += v.shape().num_elements();
  return n;
}

void LayerImpl::set_trainable(bool trainable) {
  trainable_ = trainable;
  for (const Layer& l : sublayers_) l->set_trainable(trainable);
}

void LayerImpl::add_loss(const Tensor& loss) {
  if (loss.rank() != 0)
    throw Error(
        fmt::format("add_loss: layer \"{}\" added a loss of shape {}; losses must be "
                    "scalars (reduce it with kiln::sum or kiln::mean)",
                    name_, loss.shape().to_string()));
  call_losses_.push_back(loss);
}

std::vector<Tensor> LayerImpl::losses() const {
  std::vector<Tensor> out = call_losses_;
  for (size_t i = 0; i < own_weights_.size(); ++i)
    if (weight_regularizers_[i].active())
      out.push_back(weight_regularizers_[i](own_weights_[i].read()));
  for (const Layer& l : sublayers_) {
    std::vector<Tensor> sub = l->losses();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

void LayerImpl::track_layer(const Layer& layer) {
  if (!layer.defined())
    throw Error(fmt::format("layer \"{}\": cannot track an empty layer", name_));
  if (layer.ptr().get() == this)
    throw Error(fmt::format("layer \"{}\" cannot track itself", name_));
  if (std::find(sublayers_.begin(), sublayers_.end(), layer) == sublayers_.end())
    sublayers_.push_back(layer);
}

LayerImpl& Layer::impl() const {
  if (!impl_) throw Error("Layer: the handle is empty (default-constructed)");
  return *impl_;
}

void LayerImpl::note_origin(const ir::SourceLocation& location) {
  if (!origin_.known()) origin_ = location;
}

namespace {
// A call on symbolic tensors in the user's code is where the layer joined a functional model.
void note_symbolic_call(LayerImpl& layer, const std::vector<Tensor>& inputs,
                        const std::source_location& loc) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.is_placeholder()) {
      layer.note_origin(detail::user_location(loc));
      return;
    }
}
}  // namespace

Tensor Layer::operator()(const Tensor& inputs, bool training, std::source_location loc) const {
  note_symbolic_call(impl(), {inputs}, loc);
  detail::NameScope at(/*name=*/"", &loc);
  std::vector<Tensor> out = impl().invoke({inputs}, training);
  if (out.size() != 1)
    throw Error(fmt::format("layer \"{}\" returned {} outputs; use the list form of the call",
                            impl().name(), out.size()));
  return out[0];
}

std::vector<Tensor> Layer::operator()(const std::vector<Tensor>& inputs, bool training,
                                      std::source_location loc) const {
  note_symbolic_call(impl(), inputs, loc);
  detail::NameScope at(/*name=*/"", &loc);
  return impl().invoke(inputs, training);
}

}  // namespace kiln
