// Keras masks in training: losses and metrics average over the unmasked positions only, and a
// padded batch trains exactly like its sequences without padding (loss and weight gradients),
// eagerly, on the reference executor and compiled; masks travel through Sequential and
// functional models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using ::testing::HasSubstr;

Tensor bool_mask(const std::vector<int>& v, const Shape& s) {
  std::vector<double> d(v.begin(), v.end());
  return cast(tensor(d, s, DType::f64), DType::b8);
}

TEST(MaskedLoss, MeanOverUnmaskedPositions) {
  // logits [1, 3, 2] in float64, labels [1, 3]; the last position is masked.
  Tensor logits = tensor<double>({1, 2, 0, 3, 5, -1}, {1, 3, 2});
  Tensor labels = tensor<int64_t>({1, 0, 0}, {1, 3});
  auto xent = [](double a, double b, int label) {
    double lse = std::log(std::exp(a) + std::exp(b));
    return lse - (label == 0 ? a : b);
  };
  const double want = (xent(1, 2, 1) + xent(0, 3, 0)) / 2;
  Loss loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true);
  Tensor masked = logits.with_keras_mask(bool_mask({1, 1, 0}, {1, 3}));
  EXPECT_NEAR(loss(labels, masked).item<double>(), want, 1e-15 * 8);
  // Every position masked: 0, as Keras' divide_no_nan.
  EXPECT_EQ(loss(labels, logits.with_keras_mask(bool_mask({0, 0, 0}, {1, 3}))).item<double>(), 0);
  // MSE: per-position means of the last axis, masked the same way.
  Tensor target = zeros({1, 3, 2}, DType::f64);
  double mse = ((1 + 4) / 2.0 + (0 + 9) / 2.0) / 2;
  EXPECT_NEAR(losses::mean_squared_error()(target, masked).item<double>(), mse, 1e-15 * 8);
  // A mask that does not cover the per-position losses.
  EXPECT_THAT(error_of([&] {
                loss(labels, logits.with_keras_mask(bool_mask({1, 1}, {1, 2})));
              }),
              HasSubstr("mask of shape (1, 2)"));
}

TEST(MaskedMetrics, AccuracyCountsUnmaskedPositionsOverBatches) {
  Metric acc = metrics::sparse_categorical_accuracy();
  // Batch 1: predictions argmax = {1, 0, 1}, labels {1, 1, 1}, mask {1, 1, 0}: 1 of 2.
  Tensor p1 = tensor<float>({0, 1, 1, 0, 0, 1}, {1, 3, 2});
  acc->update_state(tensor<int64_t>({1, 1, 1}, {1, 3}),
                    p1.with_keras_mask(bool_mask({1, 1, 0}, {1, 3})));
  // Batch 2: the mask is lost by the multiplication.
  acc->update_state(tensor<int64_t>({1, 0, 1}, {1, 3}),
                    p1.with_keras_mask(bool_mask({1, 1, 0}, {1, 3})) * 1.0f);
  // (an op result carries no mask: all 3 positions of the second batch count, all right)
  EXPECT_DOUBLE_EQ(acc->result(), (1.0 + 3.0) / (2.0 + 3.0));
}

// ---------------------------------------------------------------- padded = alone

// Embedding(mask_zero) -> RNN(return_sequences) -> Dense, float64, per-position labels.
Model sequence_model(const std::string& kind) {
  clear_session();
  set_random_seed(7);
  Tensor ids = Input(Shape{kUnknownDim}, DType::i64);
  Tensor h = Embedding(12, 5, {.mask_zero = true, .dtype = DType::f64})(ids);
  RecurrentOptions o{.return_sequences = true, .dtype = DType::f64};
  if (kind == "lstm") h = LSTM(6, o)(h);
  if (kind == "gru") h = GRU(6, o)(h);
  if (kind == "rnn") h = SimpleRNN(6, o)(h);
  Tensor logits = Dense(4, {.dtype = DType::f64})(h);
  return Model(ids, logits);
}

// Loss and gradients of every trainable weight for one batch.
std::vector<Tensor> loss_and_grads(Model& model, const Tensor& x, const Tensor& y) {
  GradientTape tape;
  Tensor pred = model(x, true);
  Tensor loss = losses::sparse_categorical_crossentropy(true)(y, pred);
  std::vector<Tensor> out{loss};
  for (const Tensor& g : tape.gradient(loss, model->trainable_weights())) out.push_back(g);
  return out;
}

void expect_same_values(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<double> u = a[i].to_vector<double>(), v = b[i].to_vector<double>();
    ASSERT_EQ(u.size(), v.size());
    double scale = 1e-300;
    for (size_t j = 0; j < u.size(); ++j) scale = std::max({scale, std::abs(u[j]), std::abs(v[j])});
    // The same sums over the same real positions, in the same order up to the masked terms
    // (exact zeros): a few rounding errors per step over 6 steps of 5 + 6 terms.
    for (size_t j = 0; j < u.size(); ++j)
      ASSERT_LE(std::abs(u[j] - v[j]), 64 * 6 * 11 * 0x1p-52 * scale)
          << what << ": output " << i << " element " << j;
  }
}

TEST(MaskedTraining, PaddedSequenceGivesTheLossAndGradientsOfTheSequenceAlone) {
  Tensor alone_x = tensor<int64_t>({3, 1, 4, 1}, {1, 4});
  Tensor alone_y = tensor<int64_t>({1, 2, 3, 0}, {1, 4});
  Tensor padded_x = tensor<int64_t>({3, 1, 4, 1, 0, 0}, {1, 6});
  Tensor padded_y = tensor<int64_t>({1, 2, 3, 0, 2, 2}, {1, 6});  // labels at padding ignored
  for (const char* kind : {"lstm", "gru", "rnn"}) {
    SCOPED_TRACE(kind);
    Model model = sequence_model(kind);
    std::vector<Tensor> alone = loss_and_grads(model, alone_x, alone_y);
    expect_same_values(loss_and_grads(model, padded_x, padded_y), alone, "eager");
    auto traced =
        function([&](const Tensor& x, const Tensor& y) { return loss_and_grads(model, x, y); });
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
      std::vector<Tensor> t = traced.concrete(padded_x, padded_y).run({padded_x, padded_y}, mode);
      // Compiled: the JIT's vector exp/tanh/sigmoid add a few ulps per step (8 rather than 1).
      expect_same_values(t, alone, execution_mode_name(mode));
    }
  }
}

TEST(MaskedTraining, FitAndEvaluateUseTheMaskEagerAndCompiled) {
  // Two sequences of lengths 4 and 2 padded to 4: evaluate's loss is the mean over the 6 real
  // positions, and accuracy counts those 6 only.
  Tensor x = tensor<int64_t>({3, 1, 4, 1, 5, 9, 0, 0}, {2, 4});
  Tensor y = tensor<int64_t>({1, 2, 3, 0, 2, 1, 3, 3}, {2, 4});
  std::vector<double> results;
  for (bool eager : {true, false}) {
    Model model = sequence_model("lstm");
    model->compile({.optimizer = SGD({.learning_rate = 0.1}),
                    .loss = losses::sparse_categorical_crossentropy(true),
                    .metrics = {"accuracy"},
                    .run_eagerly = eager});
    Logs logs = model->evaluate(x, y, {.verbose = 0});
    // By hand: per-position losses of the model's logits, masked mean.
    Tensor logits = model(x);
    ASSERT_TRUE(logits.keras_mask().defined());
    std::vector<double> l = logits.to_vector<double>();
    std::vector<int64_t> labels = y.to_vector<int64_t>();
    double total = 0, right = 0;
    for (int64_t p = 0; p < 8; ++p) {
      if (p == 6 || p == 7) continue;
      const double* row = &l[size_t(p * 4)];
      double top = *std::max_element(row, row + 4), s = 0;
      for (int c = 0; c < 4; ++c) s += std::exp(row[c] - top);
      total += top + std::log(s) - row[labels[size_t(p)]];
      right += double(std::max_element(row, row + 4) - row == labels[size_t(p)]);
    }
    EXPECT_NEAR(logs["loss"], total / 6, 1e-12) << (eager ? "eager" : "compiled");
    EXPECT_DOUBLE_EQ(logs["accuracy"], right / 6) << (eager ? "eager" : "compiled");
    model->fit(x, y, {.batch_size = 2, .epochs = 3, .verbose = 0, .shuffle = false});
    results.push_back(model->evaluate(x, y, {.verbose = 0})["loss"]);
  }
  // Eager and compiled training end with the same loss up to rounding (float64).
  EXPECT_NEAR(results[0], results[1], 1e-9 * std::abs(results[0]));
}

TEST(MaskedTraining, FunctionalNodesKeepTheirOutputMasks) {
  Model model = sequence_model("gru");
  // The Embedding's node has an output mask; the Dense node passes it on (supports_masking).
  const auto& layers = model->layers();
  bool embedding_masked = false;
  for (const Layer& l : layers)
    for (const auto& weak : l->inbound_nodes)
      if (auto node = weak.lock(); node && l->class_name() == "Embedding")
        embedding_masked = !node->output_masks.empty() && node->output_masks[0].defined();
  EXPECT_TRUE(embedding_masked);
  Tensor out = model(tensor<int64_t>({2, 0}, {1, 2}));
  EXPECT_EQ(out.keras_mask().to_vector<int>(), (std::vector<int>{1, 0}));
}

}  // namespace
}  // namespace kiln
