// SimpleRNN, LSTM and GRU against naive loops (tests/layers/recurrent_reference.h), finite
// differences, and their traced forms (one while node, reference executor and compiled);
// masks; Keras' weight layouts and configs; bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
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

Layer make_layer(const std::string& kind, int64_t units, RecurrentOptions o) {
  if (kind == "LSTM") return LSTM(units, o);
  if (kind == "GRU") return GRU(units, o);
  return SimpleRNN(units, o);
}

// float64 layers: the comparisons below are then limited by summation order only.
RecurrentOptions f64(RecurrentOptions o = {}) {
  o.dtype = DType::f64;
  return o;
}

RnnReference recurrent_reference_of(const Layer& layer, const std::string& kind, const Tensor& x) {
  RnnReference r;
  r.kind = kind;
  r.batch = x.shape()[0];
  r.steps = x.shape()[1];
  r.features = x.shape()[2];
  auto& impl = static_cast<RecurrentImpl&>(layer.impl());
  r.units = impl.units();
  r.x = x.to_vector<double>();
  std::vector<Tensor> w = layer->get_weights();
  r.kernel = w[0].to_vector<double>();
  r.recurrent = w[1].to_vector<double>();
  if (w.size() > 2) r.bias = w[2].to_vector<double>();
  r.reset_after = impl.options().reset_after;
  r.go_backwards = impl.options().go_backwards;
  return r;
}

Tensor random_bias(const Layer& layer, uint64_t seed) {
  Tensor b = layer->get_weights().back();
  return gradcheck::uniform(b.shape(), seed, -0.5, 0.5);
}

// Builds the layer on x and gives it a random nonzero bias (zeros would hide bias bugs).
void build_recurrent_with_random_bias(const Layer& layer, const Tensor& x) {
  layer(x);
  std::vector<Tensor> w = layer->get_weights();
  w.back() = random_bias(layer, 77);
  layer->set_weights(w);
}

const char* kRecurrentLayerKinds[] = {"SimpleRNN", "LSTM", "GRU"};

// ---------------------------------------------------------------- against the naive loops

TEST(Recurrent, MatchesTheNaiveLoops) {
  const int64_t B = 3, T = 5, F = 4, U = 6;
  Tensor x = gradcheck::uniform({B, T, F}, 1);
  for (const char* kind : kRecurrentLayerKinds)
    for (bool backwards : {false, true})
      for (bool reset_after : {true, false}) {
        if (std::string(kind) != "GRU" && !reset_after) continue;
        SCOPED_TRACE(
            fmt::format("{} go_backwards={} reset_after={}", kind, backwards, reset_after));
        RecurrentOptions o = f64();
        o.return_sequences = true;
        o.go_backwards = backwards;
        o.reset_after = reset_after;
        Layer seq = make_layer(kind, U, o);
        build_recurrent_with_random_bias(seq, x);
        RnnReference ref = recurrent_reference_of(seq, kind, x);
        RnnReference::Result want = ref.run();
        expect_close(seq(x).to_vector<double>(), want.sequence, 8.0 * T * (F + U), "sequence");

        // return_state: the last output and the final states, same weights.
        o.return_sequences = false;
        o.return_state = true;
        Layer last = make_layer(kind, U, o);
        last(std::vector<Tensor>{x});
        last->set_weights(seq->get_weights());
        std::vector<Tensor> out = last(std::vector<Tensor>{x});
        ASSERT_EQ(out.size(), std::string(kind) == "LSTM" ? 3u : 2u);
        expect_close(out[0].to_vector<double>(), want.last, 8.0 * T * (F + U), "last output");
        for (size_t s = 1; s < out.size(); ++s)
          expect_close(out[s].to_vector<double>(), want.states[s - 1], 8.0 * T * (F + U), "state");
      }
}

TEST(Recurrent, InitialStates) {
  const int64_t B = 2, T = 4, F = 3, U = 5;
  Tensor x = gradcheck::uniform({B, T, F}, 2);
  for (const char* kind : kRecurrentLayerKinds) {
    SCOPED_TRACE(kind);
    Layer layer = make_layer(kind, U, f64());
    build_recurrent_with_random_bias(layer, x);
    std::vector<Tensor> inputs{x};
    std::vector<std::vector<double>> init;
    for (int s = 0; s < (std::string(kind) == "LSTM" ? 2 : 1); ++s) {
      inputs.push_back(gradcheck::uniform({B, U}, 10 + s));
      init.push_back(inputs.back().to_vector<double>());
    }
    RnnReference::Result want = recurrent_reference_of(layer, kind, x).run(init);
    expect_close(layer(inputs)[0].to_vector<double>(), want.last, 8.0 * T * (F + U), kind);
  }
}

TEST(Recurrent, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, T = 3, F = 2, U = 3;
  Tensor x = gradcheck::uniform({B, T, F}, 3);
  for (const char* kind : kRecurrentLayerKinds) {
    SCOPED_TRACE(kind);
    RecurrentOptions o = f64();
    o.return_sequences = true;
    Layer layer = make_layer(kind, U, o);
    build_recurrent_with_random_bias(layer, x);
    EXPECT_TRUE(test::check_layer_gradients(layer, x));
  }
}

// ---------------------------------------------------------------- traced: one while node

int count_while_nodes(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) {
    if (node->kind() == ir::NodeKind::kWhile) ++n;
  }
  return n;
}

TEST(Recurrent, TracedIsOneWhileNodeAndAgreesWithEager) {
  const int64_t B = 2, F = 3, U = 4;
  for (const char* kind : kRecurrentLayerKinds) {
    SCOPED_TRACE(kind);
    RecurrentOptions o = f64();
    o.return_sequences = true;
    Layer layer = make_layer(kind, U, o);
    Tensor x8 = gradcheck::uniform({B, 8, F}, 4), x40 = gradcheck::uniform({B, 40, F}, 5);
    build_recurrent_with_random_bias(layer, x8);
    // The loss and its gradients with respect to the input and every weight.
    Tensor weights40 = gradcheck::uniform({B, 40, U}, 6);
    auto grads = [&](const Tensor& x, const Tensor& w) {
      GradientTape tape(/*persistent=*/true);
      tape.watch(x);
      Tensor loss = sum(layer(x) * w);
      std::vector<Tensor> out{loss, tape.gradient(loss, x)};
      for (const Tensor& g : tape.gradient(loss, layer->trainable_weights())) out.push_back(g);
      return out;
    };
    auto f =
        function([&](const Tensor& x, const Tensor& w) { return grads(x, w); }, {.name = "rnn"});
    Tensor w8 = gradcheck::uniform({B, 8, U}, 7);
    size_t nodes8 = f.concrete(x8, w8).graph().total_node_count();
    size_t nodes40 = f.concrete(x40, weights40).graph().total_node_count();
    EXPECT_EQ(nodes8, nodes40);
    EXPECT_GE(count_while_nodes(f.concrete(x40, weights40).graph()), 1);

    std::vector<Tensor> eager = grads(x40, weights40);
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
      std::vector<Tensor> traced = f.concrete(x40, weights40).run({x40, weights40}, mode);
      ASSERT_EQ(traced.size(), eager.size());
      for (size_t i = 0; i < traced.size(); ++i)
        expect_close(traced[i].to_vector<double>(), eager[i].to_vector<double>(),
                     16.0 * 40 * (F + U + 8),
                     fmt::format("{} output {}", execution_mode_name(mode), i));
    }
  }
}

// Traced, the loop carries the next step's GEMM terms (recurrent.h): the gradients through it
// equal the eager tape's for every form of the step (GRU with and without reset_after),
// backwards, with a mask, with initial states, and with one step.
TEST(Recurrent, TracedGradientsAgreeWithEagerForEveryStepForm) {
  const int64_t B = 3, F = 2, U = 3;
  struct Case {
    const char* kind;
    bool reset_after, backwards, masked, initial;
    int64_t steps;
  };
  const Case cases[] = {
      {"LSTM", true, false, false, false, 5},     {"LSTM", true, true, true, true, 5},
      {"GRU", true, true, true, false, 5},        {"GRU", false, false, false, true, 5},
      {"GRU", false, true, true, false, 4},       {"SimpleRNN", true, false, true, true, 4},
      {"SimpleRNN", true, true, false, false, 1}, {"LSTM", true, false, true, false, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} reset_after={} backwards={} masked={} initial={} steps={}", c.kind,
                             c.reset_after, c.backwards, c.masked, c.initial, c.steps));
    RecurrentOptions o = f64();
    o.return_sequences = true;
    o.reset_after = c.reset_after;
    o.go_backwards = c.backwards;
    Layer layer = make_layer(c.kind, U, o);
    Tensor x = gradcheck::uniform({B, c.steps, F}, 21);
    build_recurrent_with_random_bias(layer, x);
    std::vector<bool> m;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < c.steps; ++t) m.push_back(!c.masked || t < c.steps - b);
    Tensor mask =
        cast(tensor(std::vector<double>(m.begin(), m.end()), {B, c.steps}, DType::f64), DType::b8);
    Tensor h0 = gradcheck::uniform({B, U}, 22), c0 = gradcheck::uniform({B, U}, 23);
    Tensor w = gradcheck::uniform({B, c.steps, U}, 24);
    auto grads = [&](const Tensor& xs, const Tensor& ws) {
      GradientTape tape(/*persistent=*/true);
      tape.watch(xs);
      std::vector<Tensor> in{c.masked ? xs.with_keras_mask(mask) : xs};
      if (c.initial) {
        in.push_back(h0);
        if (std::string(c.kind) == "LSTM") in.push_back(c0);
      }
      Tensor loss = sum(layer(in)[0] * ws);
      std::vector<Tensor> out{loss, tape.gradient(loss, xs)};
      for (const Tensor& g : tape.gradient(loss, layer->trainable_weights())) out.push_back(g);
      return out;
    };
    auto f = function([&](const Tensor& xs, const Tensor& ws) { return grads(xs, ws); },
                      {.name = "rnn_grads"});
    std::vector<Tensor> eager = grads(x, w);
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
      std::vector<Tensor> traced = f.concrete(x, w).run({x, w}, mode);
      ASSERT_EQ(traced.size(), eager.size());
      for (size_t i = 0; i < traced.size(); ++i)
        expect_close(traced[i].to_vector<double>(), eager[i].to_vector<double>(),
                     16.0 * double(c.steps) * (F + U + 8),
                     fmt::format("{} output {}", execution_mode_name(mode), i));
    }
  }
}

// ---------------------------------------------------------------- masks

// A padded batch gives each sequence the outputs it has alone, eagerly and traced.
TEST(Recurrent, PaddedBatchEqualsEachSequenceAlone) {
  const int64_t F = 3, U = 4, T = 6;
  const std::vector<int64_t> lengths{6, 2, 4};
  const int64_t B = int64_t(lengths.size());
  Tensor x = gradcheck::uniform({B, T, F}, 8);
  std::vector<double> xv = x.to_vector<double>();
  std::vector<bool> m(size_t(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) m[size_t(b * T + t)] = t < lengths[size_t(b)];
  Tensor mask =
      cast(tensor(std::vector<double>(m.begin(), m.end()), {B, T}, DType::f64), DType::b8);
  for (const char* kind : kRecurrentLayerKinds)
    for (bool sequences : {true, false}) {
      SCOPED_TRACE(fmt::format("{} return_sequences={}", kind, sequences));
      RecurrentOptions o = f64();
      o.return_sequences = sequences;
      Layer layer = make_layer(kind, U, o);
      build_recurrent_with_random_bias(layer, x);
      Tensor masked = layer(x.with_keras_mask(mask));
      auto traced_fn = function(
          [&](const Tensor& xx, const Tensor& mm) { return layer(xx.with_keras_mask(mm)); });
      Tensor traced = traced_fn(x, mask);
      // The output mask: the input's with return_sequences, none otherwise.
      EXPECT_EQ(masked.keras_mask().defined(), sequences);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t L = lengths[size_t(b)];
        std::vector<double> xs(xv.begin() + b * T * F, xv.begin() + (b * T + L) * F);
        Tensor alone = layer(tensor(xs, {1, L, F}, DType::f64));
        std::vector<double> want = alone.to_vector<double>();
        for (const Tensor* got : {&masked, &traced}) {
          std::vector<double> all = got->to_vector<double>(), row;
          if (sequences) {
            row.assign(all.begin() + b * T * U, all.begin() + (b * T + L) * U);
            // After the sequence ends the output repeats its last value.
            for (int64_t t = L; t < T; ++t)
              for (int64_t u = 0; u < U; ++u)
                EXPECT_EQ(all[size_t((b * T + t) * U + u)], all[size_t((b * T + L - 1) * U + u)]);
          } else {
            row.assign(all.begin() + b * U, all.begin() + (b + 1) * U);
          }
          expect_close(row, want, 8.0 * T * (F + U), fmt::format("sequence {}", b));
        }
      }
    }
}

TEST(Recurrent, EmbeddingMaskZeroThroughASequentialModel) {
  // Token 0 is padding: the model's output for a padded row equals the unpadded row's.
  Embedding emb(10, 4, {.mask_zero = true, .dtype = DType::f64});
  LSTM lstm(5, f64());
  Sequential model({emb, lstm});
  Tensor padded = tensor<int64_t>({3, 1, 4, 0, 0}, {1, 5});
  Tensor plain = tensor<int64_t>({3, 1, 4}, {1, 3});
  Tensor a = model(padded), b = model(plain);
  expect_close(a.to_vector<double>(), b.to_vector<double>(), 8.0 * 5 * 9, "last output");
  EXPECT_TRUE(emb(padded).keras_mask().defined());
  EXPECT_EQ(emb(padded).keras_mask().to_vector<int>(), (std::vector<int>{1, 1, 1, 0, 0}));
  // No mask without mask_zero.
  Embedding no_mask(10, 4);
  EXPECT_FALSE(no_mask(padded).keras_mask().defined());
}

TEST(Recurrent, MaskingLayer) {
  Masking masking;
  Tensor x = tensor<float>({1, 2, 0, 0, 3, 0, 0, 0}, {1, 4, 2});
  Tensor y = masking(x);
  EXPECT_EQ(y.keras_mask().to_vector<int>(), (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 0, 0, 3, 0, 0, 0}));
  Masking minus_one({.mask_value = -1});
  Tensor z = tensor<float>({-1, -1, 5, -1}, {1, 2, 2});
  EXPECT_EQ(minus_one(z).keras_mask().to_vector<int>(), (std::vector<int>{0, 1}));
  EXPECT_EQ(minus_one(z).to_vector<float>(), (std::vector<float>{0, 0, 5, -1}));
  EXPECT_EQ(masking->get_config()["mask_value"], 0.0);
}

// ---------------------------------------------------------------- layouts and configs

TEST(Recurrent, KerasWeightShapesNamesAndConfig) {
  Tensor x = gradcheck::uniform({2, 3, 7}, 9);
  LSTM lstm(5, {.name = "enc"});
  lstm(x);
  std::vector<Variable> w = lstm->weights();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].name(), "enc/kernel");
  EXPECT_EQ(w[0].shape(), (Shape{7, 20}));
  EXPECT_EQ(w[1].name(), "enc/recurrent_kernel");
  EXPECT_EQ(w[1].shape(), (Shape{5, 20}));
  EXPECT_EQ(w[2].shape(), (Shape{20}));
  // unit_forget_bias: the f gate's bias is 1, the others 0.
  std::vector<float> bias = w[2].read().to_vector<float>();
  for (int j = 0; j < 20; ++j) EXPECT_EQ(bias[size_t(j)], j >= 5 && j < 10 ? 1.0f : 0.0f) << j;
  // The recurrent kernel is orthogonal: U^T U = I for each gate block's columns together.
  Tensor u = w[1].read();
  Tensor gram = matmul(u, u, false, true);  // [5, 5]: rows orthonormal
  std::vector<float> gv = gram.to_vector<float>();
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_NEAR(gv[size_t(i * 5 + j)], i == j ? 1 : 0, 1e-5);

  Json c = lstm->get_config();
  EXPECT_EQ(c["units"], 5);
  EXPECT_EQ(c["activation"], "tanh");
  EXPECT_EQ(c["recurrent_activation"], "sigmoid");
  EXPECT_EQ(c["recurrent_initializer"], "orthogonal");
  EXPECT_EQ(c["unit_forget_bias"], true);
  EXPECT_EQ(c["return_sequences"], false);

  GRU gru(4);
  gru(x);
  EXPECT_EQ(gru->weights()[2].shape(), (Shape{2, 12}));
  EXPECT_EQ(gru->get_config()["reset_after"], true);
  GRU gru_before(4, {.reset_after = false});
  gru_before(x);
  EXPECT_EQ(gru_before->weights()[2].shape(), (Shape{12}));
  SimpleRNN rnn(3);
  rnn(x);
  EXPECT_EQ(rnn->weights()[1].shape(), (Shape{3, 3}));
  EXPECT_FALSE(rnn->get_config().contains("recurrent_activation"));
}

TEST(Recurrent, DropoutMasksAreFixedAcrossStepsAndOnlyInTraining) {
  Tensor x = gradcheck::uniform({4, 5, 3}, 11);
  LSTM lstm(6, {.dropout = 0.5, .recurrent_dropout = 0.3, .seed = 3});
  Tensor inference = lstm(x, false);
  LSTM plain(6);
  plain(x);
  plain->set_weights(lstm->get_weights());
  EXPECT_EQ(inference.to_vector<float>(), plain(x, false).to_vector<float>());
  Tensor a = lstm(x, true), b = lstm(x, true);
  EXPECT_NE(a.to_vector<float>(), inference.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), b.to_vector<float>());  // a new mask per call
}

TEST(Recurrent, BadInput) {
  LSTM lstm(4, {.name = "lstm_bad"});
  EXPECT_THAT(error_of([&] { lstm(gradcheck::uniform({2, 3}, 1)); }), HasSubstr("lstm_bad"));
  LSTM lstm2(4);
  Tensor x = gradcheck::uniform({2, 3, 5}, 1);
  lstm2(x);
  Tensor wrong_mask = cast(ones({2, 4}, DType::f32), DType::b8);
  EXPECT_THAT(error_of([&] { lstm2(x.with_keras_mask(wrong_mask)); }),
              HasSubstr("mask must have shape [batch, timesteps]"));
  EXPECT_THAT(error_of([&] {
                lstm2(std::vector<Tensor>{x, zeros({2, 3})});
              }),
              HasSubstr("optionally followed by 2 initial state(s)"));
  EXPECT_THAT(error_of([&] {
                lstm2(std::vector<Tensor>{x, zeros({2, 3}), zeros({2, 4})});
              }),
              HasSubstr("initial state 0 must have shape [batch, units] = [2, 4]"));
  EXPECT_THAT(error_of([] { LSTM(0); }), HasSubstr("units"));
  EXPECT_THAT(error_of([] { GRU(3, {.dropout = 1.5}); }), HasSubstr("dropout"));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Weights saved from a model with recurrent layers load into a freshly built one (new
// initial values) and give bitwise the same outputs.
TEST(Recurrent, SavedWeightsLoadBackAndGiveTheSameOutputs) {
  auto build = [] {
    Tensor x = Input(Shape{kUnknownDim, 3});
    Tensor h = LSTM(5, {.return_sequences = true})(x);
    h = GRU(4, {.reset_after = false, .return_sequences = true})(h);
    return Model(x, SimpleRNN(3)(h));
  };
  clear_session();
  set_random_seed(1);
  Model a = build();
  Tensor x = gradcheck::uniform({2, 6, 3}, 12, -1, 1);
  x = cast(x, DType::f32);
  Tensor ya = a(x);
  char dir_template[] = "/tmp/kiln_recurrent_test_XXXXXX";
  std::string path = std::string(mkdtemp(dir_template)) + "/rnn.safetensors";
  a->save_weights(path);
  clear_session();
  set_random_seed(2);  // other initial weights
  Model b = build();
  EXPECT_NE(b(x).to_vector<float>(), ya.to_vector<float>());
  b->load_weights(path);
  EXPECT_EQ(b(x).to_vector<float>(), ya.to_vector<float>());
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace
}  // namespace kiln
