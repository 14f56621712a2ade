// Bidirectional (wrappers.h): a forward and a backward recurrent layer over one sequence.
#include <fmt/format.h>

#include <cstddef>
#include <nlohmann/json.hpp>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"
#include "kiln/keras/layers/recurrent.h"
#include "kiln/keras/layers/wrappers.h"

namespace kiln {
namespace {

std::string remove_prefix(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

RecurrentImpl& recurrent(const std::string& wrapper, const Layer& layer, const char* role) {
  auto* r = layer.defined() ? dynamic_cast<RecurrentImpl*>(layer.ptr().get()) : nullptr;
  if (r == nullptr)
    throw Error(fmt::format(
        "layer \"{}\": Bidirectional wraps a recurrent layer (SimpleRNN, LSTM or GRU); the {} "
        "given is {}",
        wrapper, role,
        layer.defined() ? fmt::format("\"{}\" ({})", layer->name(), layer->class_name())
                        : std::string("an empty layer handle")));
  return *r;
}

// A new layer of r's class with r's arguments, another name and go_backwards.
Layer copy_of(const RecurrentImpl& r, std::string name, bool go_backwards) {
  RecurrentOptions o = r.options();
  o.name = std::move(name);
  o.go_backwards = go_backwards;
  o.activity_regularizer = r.activity_regularizer;
  if (r.class_name() == "LSTM") return LSTM(r.units(), o);
  if (r.class_name() == "GRU") return GRU(r.units(), o);
  return SimpleRNN(r.units(), o);
}

// x[:, ::-1] for x [batch, timesteps, ...] (types only for a placeholder of unknown length).
Tensor reverse_time(const Tensor& x) {
  const int64_t steps = x.shape()[1];
  if (steps == kUnknownDim && x.is_placeholder()) return x;
  std::vector<int64_t> order;
  for (int64_t t = steps - 1; t >= 0; --t) order.push_back(t);
  return gather(x, tensor<int64_t>(order, {steps}), 1);
}

}  // namespace

BidirectionalImpl::BidirectionalImpl(const Layer& layer, BidirectionalOptions options)
    : LayerImpl("Bidirectional", std::move(options.name)),
      merge_mode_(std::move(options.merge_mode)) {
  if (merge_mode_ != "concat" && merge_mode_ != "sum" && merge_mode_ != "mul" &&
      merge_mode_ != "ave")
    throw Error(fmt::format(
        "layer \"{}\": Invalid merge mode. Received: \"{}\". Merge mode should be one of "
        "\"sum\", \"mul\", \"ave\", \"concat\"",
        name(), merge_mode_));
  RecurrentImpl& given = recurrent(name(), layer, "layer");
  forward_ = copy_of(given, "forward_" + remove_prefix(given.name(), "backward_"),
                     given.options().go_backwards);
  backward_ = options.backward_layer.defined()
                  ? options.backward_layer
                  : copy_of(given, "backward_" + remove_prefix(given.name(), "forward_"),
                            !given.options().go_backwards);
  RecurrentImpl& f = recurrent(name(), forward_, "layer");
  RecurrentImpl& b = recurrent(name(), backward_, "backward_layer");
  if (f.options().go_backwards == b.options().go_backwards)
    throw Error(fmt::format(
        "layer \"{}\": Forward layer and backward layer should have different `go_backwards` "
        "value. Received: forward_layer.go_backwards={}, backward_layer.go_backwards={}",
        name(), f.options().go_backwards, b.options().go_backwards));
  auto same = [&](const char* attr, bool fv, bool bv) {
    if (fv != bv)
      throw Error(fmt::format(
          "layer \"{}\": Forward layer and backward layer are expected to have the same value "
          "for attribute \"{}\", got \"{}\" for forward layer and \"{}\" for backward layer",
          name(), attr, fv, bv));
  };
  same("return_sequences", f.options().return_sequences, b.options().return_sequences);
  same("return_state", f.options().return_state, b.options().return_state);
  return_sequences_ = f.options().return_sequences;
  return_state_ = f.options().return_state;
  f.set_zero_output_for_mask(return_sequences_);
  b.set_zero_output_for_mask(return_sequences_);
  track_layer(forward_);
  track_layer(backward_);
  supports_masking = true;
  input_spec = {InputSpec{.ndim = 3}};
}

void BidirectionalImpl::build_many(const std::vector<Shape>& input_shapes) {
  forward_->maybe_build({input_shapes[0]});
  backward_->maybe_build({input_shapes[0]});
}

std::vector<Tensor> BidirectionalImpl::call_many(const std::vector<Tensor>& inputs, bool training) {
  return run(inputs, Tensor(), training);
}

std::vector<Tensor> BidirectionalImpl::call_masked(const std::vector<Tensor>& inputs,
                                                   const std::vector<Tensor>& masks,
                                                   bool training) {
  Tensor mask = masks.empty() ? Tensor() : masks[0];
  if (mask.defined()) mask = layer_util::sequence_mask(name(), inputs[0], mask);
  return run(inputs, mask, training);
}

std::vector<Tensor> BidirectionalImpl::run(const std::vector<Tensor>& inputs, const Tensor& mask,
                                           bool training) {
  const size_t nf = size_t(static_cast<RecurrentImpl&>(forward_.impl()).num_states());
  const size_t nb = size_t(static_cast<RecurrentImpl&>(backward_.impl()).num_states());
  if (inputs.size() != 1 && inputs.size() != 1 + nf + nb)
    throw Error(fmt::format(
        "layer \"{}\": Bidirectional takes the sequence, optionally followed by the initial "
        "states of the forward layer ({}) and then of the backward layer ({}); got {} inputs",
        name(), nf, nb, inputs.size()));
  Tensor x = mask.defined() ? inputs[0].with_keras_mask(mask) : inputs[0];
  std::vector<Tensor> forward_in{x}, backward_in{x};
  if (inputs.size() > 1) {
    forward_in.insert(forward_in.end(), inputs.begin() + 1,
                      inputs.begin() + 1 + std::ptrdiff_t(nf));
    backward_in.insert(backward_in.end(), inputs.begin() + 1 + std::ptrdiff_t(nf), inputs.end());
  }
  std::vector<Tensor> y = forward_(forward_in, training);
  std::vector<Tensor> y_rev = backward_(backward_in, training);
  Tensor a = y[0], b = return_sequences_ ? reverse_time(y_rev[0]) : y_rev[0];
  Tensor merged;
  if (merge_mode_ == "concat")
    merged = concat({a, b}, -1);
  else if (merge_mode_ == "sum")
    merged = a + b;
  else if (merge_mode_ == "mul")
    merged = a * b;
  else
    merged = (a + b) / 2.0;
  std::vector<Tensor> out{merged};
  if (return_state_) {
    out.insert(out.end(), y.begin() + 1, y.end());
    out.insert(out.end(), y_rev.begin() + 1, y_rev.end());
  }
  return out;
}

std::vector<Tensor> BidirectionalImpl::compute_mask(const std::vector<Tensor>&,
                                                    const std::vector<Tensor>& masks) {
  std::vector<Tensor> out{return_sequences_ && !masks.empty() ? masks[0] : Tensor()};
  if (return_state_) {
    const int n = static_cast<RecurrentImpl&>(forward_.impl()).num_states() +
                  static_cast<RecurrentImpl&>(backward_.impl()).num_states();
    out.resize(size_t(1 + n));
  }
  return out;
}

Json BidirectionalImpl::get_config() const {
  Json c = LayerImpl::get_config();
  c["merge_mode"] = merge_mode_;
  c["layer"] = {{"class_name", forward_->class_name()}, {"config", forward_->get_config()}};
  c["backward_layer"] = {{"class_name", backward_->class_name()},
                         {"config", backward_->get_config()}};
  return c;
}

Layer bidirectional_from_config(const Json& config, const LayerSpecReader& inner_from_config) {
  using layer_config::inner_layer;
  ConfigReader c(config, "Bidirectional");
  BidirectionalOptions o;
  o.name = c.name();
  o.merge_mode = c.get<std::string>("merge_mode", o.merge_mode);
  if (c.has("backward_layer"))
    o.backward_layer = inner_layer(c, "backward_layer", inner_from_config);
  // The constructor names its copy of the layer "forward_<name>": give it back the name the
  // layer had before, so the rebuilt forward layer has the saved name.
  Json forward = c.at("layer");
  if (forward.is_object() && forward.contains("config") && forward["config"].is_object()) {
    std::string name = forward["config"].value("name", "");
    if (name.rfind("forward_", 0) == 0) forward["config"]["name"] = name.substr(8);
  }
  ConfigReader f(Json{{"name", c.name()}, {"layer", forward}}, "Bidirectional");
  return Bidirectional(inner_layer(f, "layer", inner_from_config), o);
}

Bidirectional::Bidirectional(const Layer& layer, BidirectionalOptions options)
    : Layer(std::make_shared<BidirectionalImpl>(layer, std::move(options))) {}

}  // namespace kiln
