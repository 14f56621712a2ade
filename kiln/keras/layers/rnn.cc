// layers.RNN and its cells (rnn.h): the cells own a recurrent layer of their kind and run its
// loop; the RNN runs its cell's loop with its own sequence options.
#include "kiln/keras/layers/rnn.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {
namespace {

Layer make_loop(const std::string& kind, int64_t units, RecurrentOptions o) {
  if (kind == "LSTM") return LSTM(units, std::move(o));
  if (kind == "GRU") return GRU(units, std::move(o));
  if (kind == "SimpleRNN") return SimpleRNN(units, std::move(o));
  throw Error(
      fmt::format("a recurrent cell of kind \"{}\": kiln has SimpleRNN, LSTM and GRU cells", kind));
}

}  // namespace

// ---------------------------------------------------------------- the cells

RecurrentCellImpl::RecurrentCellImpl(const std::string& kind, int64_t units,
                                     RecurrentOptions options)
    : LayerImpl(kind + "Cell", options.name) {
  if (options.return_sequences || options.return_state || options.go_backwards ||
      options.zero_output_for_mask)
    throw Error(fmt::format(
        "layer \"{}\": a {}Cell is one step; return_sequences, return_state, go_backwards and "
        "zero_output_for_mask are arguments of the RNN that runs it (layers.RNN)",
        name(), kind));
  use_dtype_option(options.dtype);
  options.dtype = dtype_policy();  // the step computes in the cell's policy
  options.name = name();
  options.unroll = false;
  loop_ = track(make_loop(kind, units, std::move(options)));
}

void RecurrentCellImpl::build_many(const std::vector<Shape>& shapes) {
  const Shape& x = shapes[0];
  if (x.rank() != 2)
    throw Error(
        fmt::format("layer \"{}\": {} takes one step's input [batch, features], got shape {}",
                    name(), class_name(), x.to_string()));
  loop_->maybe_build({Shape{x[0], 1, x[1]}});
}

std::vector<Tensor> RecurrentCellImpl::call_many(const std::vector<Tensor>& inputs, bool training) {
  const int n = num_states();
  if (inputs.size() != size_t(1 + n))
    throw Error(
        fmt::format("layer \"{}\": {} is called with the step's input and its {} state(s) "
                    "(cell(x, states)); got {} tensor(s)",
                    name(), class_name(), n, inputs.size()));
  if (inputs[0].rank() != 2)
    throw Error(
        fmt::format("layer \"{}\": {} takes one step's input [batch, features], got shape {}",
                    name(), class_name(), inputs[0].shape().to_string()));
  const RecurrentOptions& o = loop().options();
  if (training && (o.dropout > 0 || o.recurrent_dropout > 0))
    throw Error(fmt::format(
        "layer \"{}\": {} with dropout={} / recurrent_dropout={} called on its own in "
        "training: kiln draws a cell's dropout masks once per sequence, inside layers.RNN; run "
        "it there (or call it with training=False)",
        name(), class_name(), o.dropout, o.recurrent_dropout));
  std::vector<Tensor> loop_in{expand_dims(inputs[0], 1)};
  loop_in.insert(loop_in.end(), inputs.begin() + 1, inputs.end());
  // The last output of a one-step sequence is the step's output; the states follow.
  return loop().call_with({.return_state = true}, loop_in, {}, training);
}

std::vector<Shape> RecurrentCellImpl::compute_output_shape(const std::vector<Shape>& shapes) {
  const int64_t b = shapes.empty() ? kUnknownDim : shapes[0][0];
  return std::vector<Shape>(size_t(1 + num_states()), Shape{b, units()});
}

Json RecurrentCellImpl::get_config() const {
  Json c = loop().get_config();
  c["name"] = name();
  c["trainable"] = trainable();
  for (const char* k : {"return_sequences", "return_state", "go_backwards", "stateful", "unroll",
                        "zero_output_for_mask", "activity_regularizer"})
    c.erase(k);
  return c;
}

Layer recurrent_cell_from_config(const Json& config, const std::string& kind) {
  ConfigReader c(config, kind + "Cell");
  RecurrentOptions o;
  layer_config::recurrent_step_entries(c, o);
  const int64_t units = c.get<int64_t>("units");
  if (kind == "LSTM") return LSTMCell(units, o);
  if (kind == "GRU") return GRUCell(units, o);
  return SimpleRNNCell(units, o);
}

SimpleRNNCell::SimpleRNNCell(int64_t units, RecurrentOptions options)
    : RecurrentCell(std::make_shared<RecurrentCellImpl>("SimpleRNN", units, std::move(options))) {}
LSTMCell::LSTMCell(int64_t units, RecurrentOptions options)
    : RecurrentCell(std::make_shared<RecurrentCellImpl>("LSTM", units, std::move(options))) {}
GRUCell::GRUCell(int64_t units, RecurrentOptions options)
    : RecurrentCell(std::make_shared<RecurrentCellImpl>("GRU", units, std::move(options))) {}

// ---------------------------------------------------------------- RNN

RNNImpl::RNNImpl(const Layer& cell, RNNOptions options)
    : LayerImpl("RNN", options.name), cell_(cell), options_(std::move(options)) {
  if (!cell_.defined() || dynamic_cast<RecurrentCellImpl*>(&cell_.impl()) == nullptr)
    throw Error(fmt::format(
        "layer \"{}\": argument `cell` must be a SimpleRNNCell, LSTMCell or GRUCell; got {}. "
        "kiln runs its built-in cells only (for a step of your own, write the loop with "
        "kiln::scan)",
        name(), cell_.defined() ? "a " + cell_->class_name() : std::string("an empty layer")));
  track_layer(cell_);
  set_dtype_policy(cell_->dtype_policy());  // the RNN computes in its cell's policy
  supports_masking = true;
  input_spec = {InputSpec{.ndim = 3}};
}

RecurrentImpl::SequenceFlags RNNImpl::flags() const {
  return {.return_sequences = options_.return_sequences,
          .return_state = options_.return_state,
          .go_backwards = options_.go_backwards,
          .zero_output_for_mask = options_.zero_output_for_mask};
}

void RNNImpl::build_many(const std::vector<Shape>& shapes) {
  const Shape& x = shapes[0];
  if (x.rank() != 3)
    throw Error(fmt::format(
        "layer \"{}\": RNN expects inputs of shape [batch, timesteps, features], got {}", name(),
        x.to_string()));
  cell_->maybe_build({Shape{x[0], x[2]}});
}

std::vector<Tensor> RNNImpl::call_many(const std::vector<Tensor>& inputs, bool training) {
  return call_masked(inputs, std::vector<Tensor>(inputs.size()), training);
}

std::vector<Tensor> RNNImpl::call_masked(const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& masks, bool training) {
  return cell_impl().loop().call_with(flags(), inputs, masks, training);
}

std::vector<Tensor> RNNImpl::compute_mask(const std::vector<Tensor>& inputs,
                                          const std::vector<Tensor>& masks) {
  return cell_impl().loop().compute_mask_with(flags(), inputs, masks);
}

std::vector<Shape> RNNImpl::compute_output_shape(const std::vector<Shape>& shapes) {
  return cell_impl().loop().compute_output_shape_with(flags(), shapes);
}

Json RNNImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["return_sequences"] = options_.return_sequences;
  c["return_state"] = options_.return_state;
  c["go_backwards"] = options_.go_backwards;
  c["stateful"] = false;
  c["unroll"] = options_.unroll;
  c["zero_output_for_mask"] = options_.zero_output_for_mask;
  c["cell"] = {{"class_name", cell_->class_name()}, {"config", cell_->get_config()}};
  return c;
}

namespace {

// RNN from its config, with `given_cell` when not null, else the cell config["cell"] describes.
Layer rnn_with_cell(const Json& config, const Layer* given_cell,
                    const LayerSpecReader& inner_from_config) {
  ConfigReader c(config, "RNN");
  RNNOptions o;
  o.name = c.name();
  layer_config::sequence_entries(c, o);
  if (given_cell == nullptr && c.at("cell").is_array())
    c.fail("cell",
           "is a list of cells (StackedRNNCells); kiln's RNN runs one cell: stack RNN "
           "layers with return_sequences=True instead");
  RNN rnn(
      given_cell != nullptr ? *given_cell : layer_config::inner_layer(c, "cell", inner_from_config),
      o);
  // The RNN computes in its cell's dtype.
  const DTypePolicy cell_policy = rnn->cell()->dtype_policy();
  const std::optional<DTypePolicy> given = layer_config::policy_entry(c);
  if (given && !(*given == cell_policy))
    c.fail("dtype", "differs from its cell's; give the dtype to the cell (LSTMCell(..., dtype=))");
  return rnn;
}

}  // namespace

Layer rnn_from_config(const Json& config, const LayerSpecReader& inner_from_config) {
  return rnn_with_cell(config, nullptr, inner_from_config);
}

Layer rnn_from_config(const Json& config, const Layer& cell) {
  return rnn_with_cell(config, &cell, nullptr);
}

RNN::RNN(const Layer& cell, RNNOptions options)
    : Layer(std::make_shared<RNNImpl>(cell, std::move(options))) {}

}  // namespace kiln
