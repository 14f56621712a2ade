// Bidirectional: against naive loops (tests/layers/recurrent_reference.h) for every recurrent
// layer and merge mode, masks (a padded batch gives each sequence its outputs alone, eagerly and
// traced), initial states and return_state, finite differences, traced against eager, weights
// and config, bad arguments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
using test::expect_traced_agrees;
using test::RnnReference;
using ::testing::HasSubstr;

const char* kKinds[] = {"SimpleRNN", "LSTM", "GRU"};

Layer make_rnn(const std::string& kind, int64_t units, RecurrentOptions o) {
  o.dtype = DType::f64;
  if (kind == "LSTM") return LSTM(units, o);
  if (kind == "GRU") return GRU(units, o);
  return SimpleRNN(units, o);
}

// Builds the wrapper on x and gives both layers random nonzero biases.
void build_with_random_bias(const Layer& layer, const Tensor& x) {
  layer(std::vector<Tensor>{x});
  std::vector<Tensor> w = layer->get_weights();
  for (size_t i = 2; i < w.size(); i += 3) w[i] = gradcheck::uniform(w[i].shape(), 70 + i, -.5, .5);
  layer->set_weights(w);
}

RnnReference reference_of(const Layer& rnn, const Tensor& x, const std::vector<int>& mask) {
  auto& impl = static_cast<RecurrentImpl&>(rnn.impl());
  RnnReference r;
  r.kind = impl.class_name();
  r.batch = x.shape()[0];
  r.steps = x.shape()[1];
  r.features = x.shape()[2];
  r.units = impl.units();
  r.x = x.to_vector<double>();
  std::vector<Tensor> w = rnn->get_weights();
  r.kernel = w[0].to_vector<double>();
  r.recurrent = w[1].to_vector<double>();
  r.bias = w[2].to_vector<double>();
  r.reset_after = impl.options().reset_after;
  r.go_backwards = impl.options().go_backwards;
  r.mask = mask;
  return r;
}

// The wrapper's outputs from the two naive loops: with return_sequences the backward sequence
// reversed along time and masked steps zero (zero_output_for_mask); then merged.
std::vector<std::vector<double>> naive_bidirectional(const Bidirectional& bi, const Tensor& x,
                                                     const std::vector<int>& mask = {},
                                                     const std::vector<Tensor>& initial = {}) {
  auto& fwd = static_cast<RecurrentImpl&>(bi->forward_layer().impl());
  const bool sequences = fwd.options().return_sequences;
  const int64_t B = x.shape()[0], T = x.shape()[1], U = fwd.units();
  const size_t n = initial.size() / 2;
  std::vector<std::vector<double>> init_f, init_b;
  for (size_t i = 0; i < initial.size(); ++i)
    (i < n ? init_f : init_b).push_back(initial[i].to_vector<double>());
  RnnReference::Result f = reference_of(bi->forward_layer(), x, mask).run(init_f);
  RnnReference::Result b = reference_of(bi->backward_layer(), x, mask).run(init_b);
  std::vector<double> a = f.last, r = b.last;
  if (sequences) {
    a = f.sequence;
    r.assign(a.size(), 0);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t u = 0; u < U; ++u) {
          const bool keep = mask.empty() || mask[size_t(i * T + t)] != 0;
          const size_t at = size_t((i * T + t) * U + u);
          r[at] = keep ? b.sequence[size_t((i * T + T - 1 - t) * U + u)] : 0;
          if (!keep) a[at] = 0;
        }
  }
  std::vector<double> merged;
  const std::string& mode = bi->merge_mode();
  for (size_t row = 0; row < a.size() / size_t(U); ++row)
    for (int64_t half = 0; half < (mode == "concat" ? 2 : 1); ++half)
      for (int64_t u = 0; u < U; ++u) {
        double p = a[row * size_t(U) + size_t(u)], q = r[row * size_t(U) + size_t(u)];
        merged.push_back(mode == "concat" ? (half == 0 ? p : q)
                         : mode == "sum"  ? p + q
                         : mode == "mul"  ? p * q
                                          : (p + q) / 2);
      }
  std::vector<std::vector<double>> out{merged};
  out.insert(out.end(), f.states.begin(), f.states.end());
  out.insert(out.end(), b.states.begin(), b.states.end());
  return out;
}

TEST(Bidirectional, MatchesTheNaiveLoops) {
  const int64_t B = 3, T = 5, F = 4, U = 3;
  Tensor x = gradcheck::uniform({B, T, F}, 1);
  for (const char* kind : kKinds)
    for (const char* merge : {"concat", "sum", "mul", "ave"})
      for (bool sequences : {true, false}) {
        SCOPED_TRACE(fmt::format("{} {} return_sequences={}", kind, merge, sequences));
        Bidirectional bi(make_rnn(kind, U, {.return_sequences = sequences}), {.merge_mode = merge});
        build_with_random_bias(bi, x);
        Tensor y = bi(x);
        const int64_t width = std::string(merge) == "concat" ? 2 * U : U;
        EXPECT_EQ(y.shape(), sequences ? (Shape{B, T, width}) : (Shape{B, width}));
        EXPECT_FALSE(y.keras_mask().defined());
        expect_close(y.to_vector<double>(), naive_bidirectional(bi, x)[0], 8.0 * T * (F + U),
                     "output");
      }
}

TEST(Bidirectional, InitialStatesAndReturnState) {
  const int64_t B = 2, T = 4, F = 3, U = 5;
  Tensor x = gradcheck::uniform({B, T, F}, 2);
  for (const char* kind : kKinds) {
    SCOPED_TRACE(kind);
    Bidirectional bi(make_rnn(kind, U, {.return_sequences = true, .return_state = true}));
    build_with_random_bias(bi, x);
    const size_t n = std::string(kind) == "LSTM" ? 2 : 1;
    std::vector<Tensor> inputs{x}, initial;
    for (size_t s = 0; s < 2 * n; ++s) initial.push_back(gradcheck::uniform({B, U}, 10 + s));
    inputs.insert(inputs.end(), initial.begin(), initial.end());
    for (bool with_initial : {false, true}) {
      std::vector<Tensor> out = with_initial ? bi(inputs) : bi(std::vector<Tensor>{x});
      std::vector<std::vector<double>> want =
          naive_bidirectional(bi, x, {}, with_initial ? initial : std::vector<Tensor>{});
      ASSERT_EQ(out.size(), 1 + 2 * n);  // output, forward states, backward states
      for (size_t i = 0; i < out.size(); ++i)
        expect_close(out[i].to_vector<double>(), want[i], 8.0 * T * (F + U),
                     fmt::format("initial={} output {}", with_initial, i));
    }
  }
}

TEST(Bidirectional, PaddedBatchEqualsEachSequenceAlone) {
  const int64_t F = 3, U = 4, T = 6;
  const std::vector<int64_t> lengths{6, 2, 4};
  const int64_t B = int64_t(lengths.size());
  Tensor x = gradcheck::uniform({B, T, F}, 3);
  std::vector<double> xv = x.to_vector<double>(), m;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) m.push_back(t < lengths[size_t(b)] ? 1 : 0);
  Tensor mask = cast(tensor(m, {B, T}, DType::f64), DType::b8);
  for (const char* kind : {"LSTM", "GRU"})
    for (bool sequences : {true, false}) {
      SCOPED_TRACE(fmt::format("{} return_sequences={}", kind, sequences));
      Bidirectional bi(make_rnn(kind, U, {.return_sequences = sequences}));
      build_with_random_bias(bi, x);
      Tensor masked = bi(x.with_keras_mask(mask));
      EXPECT_EQ(masked.keras_mask().defined(), sequences);
      auto f =
          function([&](const Tensor& xx, const Tensor& mm) { return bi(xx.with_keras_mask(mm)); });
      std::vector<Tensor> results{masked};
      for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled})
        results.push_back(f.concrete(x, mask).run({x, mask}, mode)[0]);
      const int64_t W = 2 * U;  // concat
      for (int64_t b = 0; b < B; ++b) {
        const int64_t L = lengths[size_t(b)];
        std::vector<double> seq(xv.begin() + b * T * F, xv.begin() + (b * T + L) * F);
        std::vector<double> want = bi(tensor(seq, {1, L, F}, DType::f64)).to_vector<double>();
        for (const Tensor& got : results) {
          std::vector<double> all = got.to_vector<double>(), row;
          if (sequences) {
            row.assign(all.begin() + b * T * W, all.begin() + (b * T + L) * W);
            for (int64_t j = (b * T + L) * W; j < (b + 1) * T * W; ++j)
              EXPECT_EQ(all[size_t(j)], 0) << "padding step output";
          } else {
            row.assign(all.begin() + b * W, all.begin() + (b + 1) * W);
          }
          expect_close(row, want, 8.0 * T * (F + U), fmt::format("sequence {}", b));
        }
      }
      // Against the naive loops with the mask.
      std::vector<int> mi(m.begin(), m.end());
      expect_close(masked.to_vector<double>(), naive_bidirectional(bi, x, mi)[0], 8.0 * T * (F + U),
                   "naive masked");
    }
}

TEST(Bidirectional, EmbeddingMaskZeroThroughAFunctionalModel) {
  Tensor in = Input({-1}, DType::i64);
  Embedding emb(10, 3, {.mask_zero = true, .dtype = DType::f64});
  Tensor h = Bidirectional(make_rnn("GRU", 4, {.return_sequences = true}))(emb(in));
  EXPECT_EQ(h.shape(), (Shape{-1, -1, 8}));
  EXPECT_TRUE(h.keras_mask().defined());
  Tensor y = Bidirectional(make_rnn("LSTM", 2, {}), {.merge_mode = "sum"})(h);
  EXPECT_EQ(y.shape(), (Shape{-1, 2}));
  Model model(in, y);
  Tensor padded = model(tensor<int64_t>({3, 1, 4, 0, 0}, {1, 5}));
  Tensor plain = model(tensor<int64_t>({3, 1, 4}, {1, 3}));
  expect_close(padded.to_vector<double>(), plain.to_vector<double>(), 16.0 * 5 * (3 + 8 + 4),
               "model");
}

TEST(Bidirectional, GradientsMatchFiniteDifferencesAndTracedAgrees) {
  const int64_t B = 2, T = 3, F = 2, U = 3;
  Tensor x = gradcheck::uniform({B, T, F}, 4);
  Tensor mask = cast(tensor<float>({1, 1, 1, 1, 1, 0}, {B, T}), DType::b8);
  for (const char* kind : kKinds) {
    SCOPED_TRACE(kind);
    Bidirectional bi(make_rnn(kind, U, {.return_sequences = true}), {.merge_mode = "mul"});
    build_with_random_bias(bi, x);
    EXPECT_TRUE(test::check_layer_gradients(bi, x));
    // With a mask, with respect to the input and every weight.
    std::vector<Tensor> args{x};
    for (const Tensor& w : bi->get_weights()) args.push_back(w);
    std::vector<Tensor> original = bi->get_weights();
    auto f = [&](const std::vector<Tensor>& xs) {
      bi->set_weights(std::vector<Tensor>(xs.begin() + 1, xs.end()));
      return bi(xs[0].with_keras_mask(mask));
    };
    EXPECT_TRUE(gradcheck::check_gradients(f, args));
    bi->set_weights(original);
    Tensor x20 = gradcheck::uniform({B, 20, F}, 5);
    expect_traced_agrees(bi, x20, 16.0 * 20 * (F + 2 * U + 8));
  }
}

TEST(Bidirectional, WeightsNamesAndConfig) {
  LSTM lstm(5, {.name = "enc"});
  Bidirectional bi(lstm);
  EXPECT_TRUE(bi->name().starts_with("bidirectional"));
  Tensor y = bi(gradcheck::uniform({2, 3, 7}, 6, -1, 1, DType::f32));
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  EXPECT_FALSE(lstm->built());  // the wrapper runs copies of it (Keras)
  std::vector<Variable> w = bi->weights();
  ASSERT_EQ(w.size(), 6u);
  const char* names[] = {
      "forward_enc/kernel",  "forward_enc/recurrent_kernel",  "forward_enc/bias",
      "backward_enc/kernel", "backward_enc/recurrent_kernel", "backward_enc/bias"};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(w[i].name(), names[i]);
  EXPECT_EQ(w[0].shape(), (Shape{7, 20}));
  EXPECT_EQ(w[4].shape(), (Shape{5, 20}));
  EXPECT_EQ(bi->trainable_weights().size(), 6u);
  Json c = bi->get_config();
  EXPECT_EQ(c["merge_mode"], "concat");
  EXPECT_EQ(c["layer"]["class_name"], "LSTM");
  EXPECT_EQ(c["layer"]["config"]["name"], "forward_enc");
  EXPECT_EQ(c["layer"]["config"]["go_backwards"], false);
  EXPECT_EQ(c["layer"]["config"]["units"], 5);
  EXPECT_EQ(c["backward_layer"]["class_name"], "LSTM");
  EXPECT_EQ(c["backward_layer"]["config"]["name"], "backward_enc");
  EXPECT_EQ(c["backward_layer"]["config"]["go_backwards"], true);
  EXPECT_EQ(c["backward_layer"]["config"]["zero_output_for_mask"], false);
  Bidirectional seq(GRU(2, {.return_sequences = true, .name = "g"}));
  EXPECT_EQ(seq->get_config()["layer"]["config"]["zero_output_for_mask"], true);
  EXPECT_EQ(seq->compute_output_shape({Shape{-1, 4, 3}})[0], (Shape{-1, 4, 4}));
  // A backward layer of another class, given.
  Bidirectional mixed(
      SimpleRNN(3, {.return_sequences = true, .name = "s"}),
      {.merge_mode = "ave",
       .backward_layer = GRU(3, {.return_sequences = true, .go_backwards = true, .name = "back"})});
  EXPECT_EQ(mixed(ones({1, 4, 2})).shape(), (Shape{1, 4, 3}));
  EXPECT_EQ(mixed->weights()[3].name(), "back/kernel");
  EXPECT_EQ(mixed->get_config()["backward_layer"]["class_name"], "GRU");
  EXPECT_EQ(mixed->get_config()["backward_layer"]["config"]["zero_output_for_mask"], true);
}

TEST(Bidirectional, BadArgumentsAndInput) {
  EXPECT_EQ(error_of([] { Bidirectional(LSTM(2), {.merge_mode = "max", .name = "b1"}); }),
            "layer \"b1\": Invalid merge mode. Received: \"max\". Merge mode should be one of "
            "\"sum\", \"mul\", \"ave\", \"concat\"");
  EXPECT_EQ(error_of([] { Bidirectional(Dense(2, {.name = "d"}), {.name = "b2"}); }),
            "layer \"b2\": Bidirectional wraps a recurrent layer (SimpleRNN, LSTM or GRU); the "
            "layer given is \"d\" (Dense)");
  EXPECT_THAT(error_of([] { Bidirectional(LSTM(2), {.backward_layer = LSTM(2)}); }),
              HasSubstr("Forward layer and backward layer should have different `go_backwards` "
                        "value. Received: forward_layer.go_backwards=false, "
                        "backward_layer.go_backwards=false"));
  EXPECT_THAT(error_of([] {
                Bidirectional(LSTM(2), {.backward_layer = LSTM(
                                            2, {.return_sequences = true, .go_backwards = true})});
              }),
              HasSubstr("expected to have the same value for attribute \"return_sequences\", got "
                        "\"false\" for forward layer and \"true\" for backward layer"));
  Bidirectional bi(LSTM(3), {.name = "b3"});
  Tensor x = ones({2, 4, 5});
  EXPECT_EQ(error_of([&] {
              bi(x.with_keras_mask(cast(ones({2, 5}), DType::b8)));
            }),
            "layer \"b3\": the mask must have shape [batch, timesteps] matching the input's "
            "first two axes; got a mask of shape (2, 5) for an input of shape (2, 4, 5)");
  EXPECT_THAT(error_of([&] {
                bi(std::vector<Tensor>{x, zeros({2, 3})});
              }),
              HasSubstr("layer \"b3\": Bidirectional takes the sequence, optionally followed by "
                        "the initial states of the forward layer (2) and then of the backward "
                        "layer (2); got 2 inputs"));
  EXPECT_THAT(error_of([&] {
                bi(ones({2, 4}));
              }),
              HasSubstr("Input 0 of layer \"b3\" is incompatible with the layer: expected ndim=3"));
}

}  // namespace
}  // namespace kiln
