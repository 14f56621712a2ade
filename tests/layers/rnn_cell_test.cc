// layers.RNN and its cells (keras/layers/rnn.h): a cell stepped by hand over a sequence
// against the naive loop (tests/layers/recurrent_reference.h), RNN(cell) against the layer of
// its kind with the same weights (bitwise: the same loop runs), shared weights, configs and
// their round trip, and bad use.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/layers/layer_test_util.h"
#include "tests/layers/recurrent_reference.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::expect_close;
using test::RnnReference;
using ::testing::HasSubstr;

const char* const kCellKinds[] = {"SimpleRNN", "LSTM", "GRU"};

RecurrentOptions f64_cell_options() {
  RecurrentOptions o;
  o.dtype = DType::f64;
  return o;
}

RecurrentCell make_cell(const std::string& kind, int64_t units, RecurrentOptions o) {
  if (kind == "LSTM") return LSTMCell(units, o);
  if (kind == "GRU") return GRUCell(units, o);
  return SimpleRNNCell(units, o);
}

Layer make_recurrent_layer(const std::string& kind, int64_t units, RecurrentOptions o) {
  if (kind == "LSTM") return LSTM(units, o);
  if (kind == "GRU") return GRU(units, o);
  return SimpleRNN(units, o);
}

Tensor step_input(const Tensor& x, int64_t t) {
  return squeeze(
      slice(x, {0, t, 0},
            {std::numeric_limits<int64_t>::max(), t + 1, std::numeric_limits<int64_t>::max()}),
      {1});
}

TEST(RecurrentCell, SteppedByHandMatchesTheNaiveLoop) {
  const int64_t B = 2, T = 5, F = 3, U = 4;
  for (const char* kind : kCellKinds) {
    SCOPED_TRACE(kind);
    clear_session();
    RecurrentCell cell = make_cell(kind, U, f64_cell_options());
    Tensor x = cast(random_uniform({B, T, F}, 11, -1, 1), DType::f64);
    const int n = std::string(kind) == "LSTM" ? 2 : 1;
    std::vector<Tensor> states(size_t(n), zeros({B, U}, DType::f64));
    std::vector<Tensor> outputs;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<Tensor> in{step_input(x, t)};
      in.insert(in.end(), states.begin(), states.end());
      std::vector<Tensor> out = cell(in);
      ASSERT_EQ(out.size(), size_t(1 + n));
      outputs.push_back(expand_dims(out[0], 1));
      states.assign(out.begin() + 1, out.end());
    }
    RnnReference r;
    r.kind = kind;
    r.batch = B, r.steps = T, r.features = F, r.units = U;
    r.x = x.to_vector<double>();
    std::vector<Tensor> w = cell->get_weights();
    ASSERT_EQ(w.size(), 3u);
    EXPECT_EQ(w[0].shape(), (Shape{F, r.gates() * U}));
    r.kernel = w[0].to_vector<double>();
    r.recurrent = w[1].to_vector<double>();
    r.bias = w[2].to_vector<double>();
    RnnReference::Result want = r.run();
    // Each step sums F + U products in float64; errors add over the steps.
    expect_close(concat(outputs, 1).to_vector<double>(), want.sequence, 8.0 * T * (F + U),
                 "outputs");
    for (int s = 0; s < n; ++s)
      expect_close(states[size_t(s)].to_vector<double>(), want.states[size_t(s)], 8.0 * T * (F + U),
                   "state");
  }
}

TEST(RNN, OfACellIsTheLayerOfItsKind) {
  const int64_t B = 3, T = 6, F = 2, U = 3;
  Tensor x = random_uniform({B, T, F}, 4, -1, 1);
  // Sequence 1 is masked after step 3, sequence 2 after step 1.
  Tensor mask = tensor<bool>({1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0}, {B, T});
  for (const char* kind : kCellKinds) {
    for (bool backwards : {false, true}) {
      SCOPED_TRACE(fmt::format("{} go_backwards={}", kind, backwards));
      clear_session();
      RecurrentOptions layer_options;
      layer_options.return_sequences = true;
      layer_options.return_state = true;
      layer_options.go_backwards = backwards;
      Layer layer = make_recurrent_layer(kind, U, layer_options);
      RNN rnn(make_cell(kind, U, {}),
              {.return_sequences = true, .return_state = true, .go_backwards = backwards});
      std::vector<Tensor> a = layer(std::vector<Tensor>{x.with_keras_mask(mask)});
      rnn->maybe_build({x.shape()});
      rnn->set_weights(layer->get_weights());
      std::vector<Tensor> b = rnn(std::vector<Tensor>{x.with_keras_mask(mask)});
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(a[i].to_vector<float>(), b[i].to_vector<float>()) << "output " << i;
      ASSERT_TRUE(b[0].keras_mask().defined());
      EXPECT_EQ(b[0].keras_mask().to_vector<bool>(), mask.to_vector<bool>());
      // Initial states, and the traced call.
      std::vector<Tensor> with_states{x};
      for (size_t s = 1; s < a.size(); ++s) with_states.push_back(a[s]);
      std::vector<Tensor> a2 = layer(with_states), b2 = rnn(with_states);
      for (size_t i = 0; i < a2.size(); ++i)
        EXPECT_EQ(a2[i].to_vector<float>(), b2[i].to_vector<float>()) << "stated output " << i;
    }
  }
}

TEST(RNN, SharesTheWeightsOfTheCellItRuns) {
  clear_session();
  LSTMCell cell(5);
  RNN rnn(cell);
  rnn->maybe_build({Shape{2, 4, 3}});
  ASSERT_TRUE(cell->built());
  std::vector<Variable> a = rnn->weights(), b = cell->weights();
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]);
  EXPECT_EQ(a[0].name(), cell->name() + "/kernel");
  EXPECT_EQ(rnn->name(), "rnn");
  EXPECT_EQ(cell->name(), "lstm_cell");
}

TEST(RNN, ConfigsAreKerasAndRoundTrip) {
  clear_session();
  RecurrentOptions o;
  o.dropout = 0.25;
  o.unit_forget_bias = false;
  RNN rnn(LSTMCell(7, o), {.return_sequences = true, .unroll = true});
  Json c = rnn->get_config();
  EXPECT_EQ(c["return_sequences"], true);
  EXPECT_EQ(c["unroll"], true);
  EXPECT_EQ(c["cell"]["class_name"], "LSTMCell");
  const Json& cell = c["cell"]["config"];
  EXPECT_EQ(cell["units"], 7);
  EXPECT_EQ(cell["dropout"], 0.25);
  EXPECT_EQ(cell["unit_forget_bias"], false);
  for (const char* layer_only : {"return_sequences", "go_backwards", "stateful"})
    EXPECT_FALSE(cell.contains(layer_only)) << layer_only;
  Layer again = layer_from_config(serialize_layer(rnn));
  EXPECT_EQ(again->get_config(), c);
  Layer gru = layer_from_config(
      Json{{"class_name", "GRUCell"}, {"config", {{"units", 3}, {"reset_after", false}}}});
  EXPECT_EQ(gru->get_config()["reset_after"], false);
}

TEST(RNN, BadUseIsAClearError) {
  clear_session();
  EXPECT_THAT(error_of([] { RNN(Dense(3)); }),
              HasSubstr("argument `cell` must be a SimpleRNNCell, LSTMCell or GRUCell; got a "
                        "Dense"));
  Json stateful = serialize_layer(RNN(GRUCell(2)));
  stateful["config"]["stateful"] = true;
  EXPECT_THAT(error_of([&] { layer_from_config(stateful); }), HasSubstr("stateful"));
  Json stacked = serialize_layer(RNN(GRUCell(2)));
  stacked["config"]["cell"] = Json::array({stacked["config"]["cell"], stacked["config"]["cell"]});
  EXPECT_THAT(error_of([&] { layer_from_config(stacked); }), HasSubstr("StackedRNNCells"));
  LSTMCell cell(2);
  Tensor x = random_uniform({2, 3}, 1, -1, 1);
  EXPECT_THAT(error_of([&] {
                cell({x, zeros({2, 2})});
              }),
              HasSubstr("its 2 state(s) (cell(x, states)); got 2 tensor(s)"));
  RecurrentOptions dropout;
  dropout.recurrent_dropout = 0.5;
  SimpleRNNCell dropping(2, dropout);
  EXPECT_THAT(error_of([&] {
                dropping({x, zeros({2, 2})}, /*training=*/true);
              }),
              HasSubstr("inside layers.RNN"));
  EXPECT_NO_THROW(dropping({x, zeros({2, 2})}, /*training=*/false));
  RecurrentOptions sequence_flag;
  sequence_flag.return_sequences = true;
  EXPECT_THAT(error_of([&] { GRUCell(2, sequence_flag); }), HasSubstr("arguments of the RNN"));
}

}  // namespace
}  // namespace kiln
