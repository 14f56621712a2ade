// Keras 3's layers.RNN and its built-in cells: SimpleRNNCell, LSTMCell and GRUCell.
//
// A cell is one step of a recurrence: cell({x, states...}) with x [batch, features] and each
// state [batch, units] (LSTMCell: h, c; the others: h) gives {output, new states...}. It owns a
// recurrent layer of its kind (SimpleRNN, LSTM or GRU with the cell's arguments, named as the
// cell) whose loop runs the step, so a cell computes exactly what the layer of its kind
// computes per step, and its weights are that layer's: kernel, recurrent_kernel, bias in
// Keras' layouts, named "<cell>/kernel", ... Its config is Keras' cell config (the layer's
// arguments without the sequence ones).
//
// RNN(cell, {return_sequences, return_state, go_backwards, zero_output_for_mask, unroll})
// runs `cell` over a sequence [batch, timesteps, features]: the cell's loop with the RNN's
// sequence options. RNN(LSTMCell(u, o)) equals LSTM(u, o) with the same options, masks and
// initial states included (layer({x, h0, c0})). The RNN tracks the cell it was given, so the
// cell's weights are the RNN's (Keras: rnn.cell is the cell). unroll is accepted either way (a
// Keras speed hint; the results are the same); stateful RNNs and cells other than these three
// (Python cells, lists of cells) are kiln::Errors naming the argument.
//
// Dropout: a cell called on its own in training with dropout or recurrent_dropout is a
// kiln::Error (Keras keeps such a cell's masks across calls until they are reset; kiln draws
// them once per RNN call): run the cell inside an RNN.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/keras/layers/layer.h"
#include "kiln/keras/layers/recurrent.h"

namespace kiln {

class RecurrentCellImpl : public LayerImpl {
 public:
  // `kind`: "SimpleRNN", "LSTM" or "GRU". The sequence options of `options` (return_sequences,
  // return_state, go_backwards, zero_output_for_mask) must be left at their defaults.
  RecurrentCellImpl(const std::string& kind, int64_t units, RecurrentOptions options = {});
  // input_shapes[0]: [batch, features] (the states' shapes follow when called with them).
  void build_many(const std::vector<Shape>& input_shapes) override;
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // Keras' cell config

  RecurrentImpl& loop() const { return static_cast<RecurrentImpl&>(loop_.impl()); }
  int64_t units() const { return loop().units(); }
  int num_states() const { return loop().num_states(); }

 private:
  Layer loop_;
};

// A handle to any of the three cells; SimpleRNNCell, LSTMCell and GRUCell make one.
class RecurrentCell : public Layer {
  KILN_LAYER_HANDLE(RecurrentCell)
};

class SimpleRNNCell : public RecurrentCell {
 public:
  SimpleRNNCell(int64_t units, RecurrentOptions options = {});
};

class LSTMCell : public RecurrentCell {
 public:
  LSTMCell(int64_t units, RecurrentOptions options = {});
};

class GRUCell : public RecurrentCell {
 public:
  GRUCell(int64_t units, RecurrentOptions options = {});
};

struct RNNOptions {
  bool return_sequences = false;
  bool return_state = false;
  bool go_backwards = false;
  bool zero_output_for_mask = false;
  bool unroll = false;  // accepted (same results)
  std::string name{};   // empty: "rnn", "rnn_1", ...
};

class RNNImpl : public LayerImpl {
 public:
  // `cell`: a SimpleRNNCell, LSTMCell or GRUCell (kiln::Error otherwise).
  RNNImpl(const Layer& cell, RNNOptions options = {});
  void build_many(const std::vector<Shape>& input_shapes) override;
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override;
  std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks, bool training) override;
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override;
  std::vector<Shape> compute_output_shape(const std::vector<Shape>& input_shapes) override;
  Json get_config() const override;  // + the sequence options and "cell": {"class_name", "config"}

  const Layer& cell() const { return cell_; }
  const RNNOptions& options() const { return options_; }

 private:
  RecurrentCellImpl& cell_impl() const { return static_cast<RecurrentCellImpl&>(cell_.impl()); }
  RecurrentImpl::SequenceFlags flags() const;
  Layer cell_;
  RNNOptions options_;
};

class RNN : public Layer {
  KILN_LAYER_HANDLE(RNN)
 public:
  explicit RNN(const Layer& cell, RNNOptions options = {});
};

// Keras' from_config of the cells: `kind` is "SimpleRNN", "LSTM" or "GRU" (the class name is
// kind + "Cell"). kiln::Error naming the layer and the entry for a bad config.
Layer recurrent_cell_from_config(const Json& config, const std::string& kind);
// Keras' RNN.from_config: the RNN get_config's config describes, its cell made from
// config["cell"] by `inner_from_config` (keras/saving/ passes layer_from_config). A list of
// cells (StackedRNNCells), stateful, and a dtype other than the cell's are kiln::Errors naming
// the entry.
Layer rnn_from_config(const Json& config,
                      const std::function<Layer(const Json& spec)>& inner_from_config);
// The same with `cell` as its cell, config["cell"] not read (Python's RNN(cell) keeps the cell
// object it is given).
Layer rnn_from_config(const Json& config, const Layer& cell);

}  // namespace kiln
