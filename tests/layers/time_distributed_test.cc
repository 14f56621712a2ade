// TimeDistributed: against naive loops and per-step calls of the inner layer (float64), finite
// differences, traced (reference executor and compiled, also with an unknown batch) against
// eager, masks (passed through; a [batch, timesteps, ...] mask reaches the inner layer folded),
// functional models, weights, config, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/layers/layer_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using test::expect_close;
using test::expect_traced_agrees;
using ::testing::HasSubstr;

constexpr int64_t kB = 2, kT = 5, kF = 3, kU = 4;

Dense f64_dense(const std::string& name = "") {
  return Dense(kU, {.bias_initializer = "random_normal", .dtype = DType::f64, .name = name});
}

// y[b, t, u] = bias[u] + sum over f of x[b, t, f] kernel[f, u].
std::vector<double> naive_dense_per_step(const Tensor& x, const Dense& dense) {
  std::vector<double> xv = x.to_vector<double>(), out;
  std::vector<double> k = dense->kernel.value().to_vector<double>();
  std::vector<double> bias = dense->bias.value().to_vector<double>();
  const int64_t rows = x.shape()[0] * x.shape()[1], F = x.shape()[2];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t u = 0; u < kU; ++u) {
      double acc = bias[size_t(u)];
      for (int64_t f = 0; f < F; ++f) acc += xv[size_t(r * F + f)] * k[size_t(f * kU + u)];
      out.push_back(acc);
    }
  return out;
}

TEST(TimeDistributed, DenseOnEveryStepMatchesTheNaiveLoop) {
  Dense dense = f64_dense("td_dense");
  TimeDistributed td(dense);
  Tensor x = gradcheck::uniform({kB, kT, kF}, 1);
  Tensor y = td(x);
  EXPECT_EQ(y.shape(), (Shape{kB, kT, kU}));
  // Each element: kF products and additions plus the bias, on each side.
  expect_close(y.to_vector<double>(), naive_dense_per_step(x, dense), 4.0 * (kF + 1), "dense");
  // The inner layer's weights are the wrapper's.
  std::vector<Variable> w = td->weights();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0], dense->kernel);
  EXPECT_EQ(w[1], dense->bias);
  EXPECT_EQ(w[0].name(), "td_dense/kernel");
  EXPECT_EQ(w[0].shape(), (Shape{kF, kU}));
  EXPECT_EQ(td->trainable_weights().size(), 2u);
  EXPECT_EQ(td->count_params(), kF * kU + kU);
  EXPECT_EQ(td->compute_output_shape({Shape{-1, 7, kF}})[0], (Shape{-1, 7, kU}));
}

TEST(TimeDistributed, BuildsTheInnerLayerWithoutTheTimeAxis) {
  Dense dense(kU);
  TimeDistributed td(dense);
  td->maybe_build({Shape{kB, kT, kF}});
  EXPECT_TRUE(dense->built());
  EXPECT_EQ(dense->kernel.shape(), (Shape{kF, kU}));
}

TEST(TimeDistributed, Conv1DOnEveryStepEqualsPerStepCalls) {
  // [batch, timesteps, steps, channels]: a Conv1D over the inner steps of each time step.
  Conv1D conv(2, 3, {.padding = "same", .bias_initializer = "random_normal", .dtype = DType::f64});
  TimeDistributed td(conv);
  Tensor x = gradcheck::uniform({2, 3, 6, 2}, 2);
  Tensor y = td(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 6, 2}));
  std::vector<double> all = y.to_vector<double>();
  for (int64_t t = 0; t < 3; ++t) {
    Tensor step = squeeze(slice(x, {0, t, 0, 0}, {2, t + 1, 6, 2}), {1});
    std::vector<double> want = conv(step).to_vector<double>(), got;
    for (int64_t b = 0; b < 2; ++b)
      got.insert(got.end(), all.begin() + (b * 3 + t) * 12, all.begin() + (b * 3 + t + 1) * 12);
    // Sums of kernel * channels + 1 terms, possibly in another order.
    expect_close(got, want, 4.0 * (3 * 2 + 1), fmt::format("time step {}", t));
  }
  EXPECT_TRUE(test::check_layer_gradients(td, x));
}

TEST(TimeDistributed, GradientsMatchFiniteDifferencesAndTracedAgrees) {
  Dense dense = f64_dense();
  TimeDistributed td(dense);
  Tensor x = gradcheck::uniform({kB, kT, kF}, 3);
  td(x);
  EXPECT_TRUE(test::check_layer_gradients(td, x));
  // Sums: kF (output), kU (input gradient), kB * kT (weight gradients), kB * kT * kU (loss).
  expect_traced_agrees(td, x, 8.0 * (kF + kU + kB * kT * (kU + 1) + 2));
}

TEST(TimeDistributed, TracedWithAnUnknownBatch) {
  Dense dense = f64_dense();
  TimeDistributed td(dense);
  for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
    SCOPED_TRACE(execution_mode_name(mode));
    auto f = function([&](const Tensor& x) { return td(x); },
                      {.input_signature = std::vector<TensorSpec>{{Shape{-1, kT, kF}, DType::f64}},
                       .mode = mode});
    for (int64_t batch : {3, 1}) {
      Tensor x = gradcheck::uniform({batch, kT, kF}, uint64_t(10 + batch));
      Tensor y = f(x);
      EXPECT_EQ(y.shape(), (Shape{batch, kT, kU}));
      expect_close(y.to_vector<double>(), td(x).to_vector<double>(), 4.0 * (kF + 1), "traced");
    }
    EXPECT_EQ(f.tracing_count(), 1);
  }
  // A functional model with an unknown batch.
  Tensor in = Input({kT, kF}, DType::f64);
  Tensor out = td(in);
  EXPECT_EQ(out.shape(), (Shape{-1, kT, kU}));
  Model model(in, out);
  Tensor x = gradcheck::uniform({2, kT, kF}, 4);
  EXPECT_EQ(model(x).to_vector<double>(), td(x).to_vector<double>());
}

TEST(TimeDistributed, PassesTheMaskOn) {
  Tensor x = gradcheck::uniform({kB, kT, kF}, 5);
  Tensor mask = cast(tensor<float>({1, 1, 1, 0, 0, 1, 1, 1, 1, 0}, {kB, kT}), DType::b8);
  TimeDistributed td(f64_dense());
  Tensor y = td(x.with_keras_mask(mask));
  ASSERT_TRUE(y.keras_mask().defined());
  EXPECT_EQ(y.keras_mask().to_vector<int>(), (std::vector<int>{1, 1, 1, 0, 0, 1, 1, 1, 1, 0}));
  // The values do not depend on the mask (Dense ignores it).
  EXPECT_EQ(y.to_vector<double>(), td(x).to_vector<double>());
  // Embedding(mask_zero) -> TimeDistributed(Dense) -> LSTM: the padding is skipped.
  Embedding emb(10, 3, {.mask_zero = true, .dtype = DType::f64});
  Sequential model({emb, TimeDistributed(f64_dense()), LSTM(5, {.dtype = DType::f64})});
  Tensor padded = model(tensor<int64_t>({3, 1, 4, 0, 0}, {1, 5}));
  Tensor plain = model(tensor<int64_t>({3, 1, 4}, {1, 3}));
  expect_close(padded.to_vector<double>(), plain.to_vector<double>(), 8.0 * 5 * (kU + 5),
               "sequential");
  // A functional model keeps the mask on the wrapper's output.
  Tensor in = Input({kT}, DType::i64);
  Tensor h = TimeDistributed(f64_dense())(emb(in));
  EXPECT_TRUE(h.keras_mask().defined());
}

TEST(TimeDistributed, AFinerMaskReachesTheInnerLayerFolded) {
  // Sentences of words: [batch, sentences, words, features] with a [batch, sentences, words]
  // mask; TimeDistributed(GlobalAveragePooling1D) averages the unmasked words of each sentence.
  const int64_t B = 2, S = 3, W = 4;
  Tensor x = gradcheck::uniform({B, S, W, kF}, 6);
  std::vector<double> m = gradcheck::uniform_values(B * S * W, 7, 0, 1);
  for (size_t j = 0; j < m.size(); ++j) m[j] = (j % W == 0 || m[j] < 0.6) ? 1 : 0;
  Tensor mask = cast(tensor(m, {B, S, W}, DType::f64), DType::b8);
  TimeDistributed td(GlobalAveragePooling1D{});
  Tensor y = td(x.with_keras_mask(mask));
  ASSERT_EQ(y.shape(), (Shape{B, S, kF}));
  EXPECT_EQ(y.keras_mask().shape(), (Shape{B, S, W}));  // passed on unchanged (Keras 3)
  std::vector<double> xv = x.to_vector<double>(), want;
  for (int64_t r = 0; r < B * S; ++r)
    for (int64_t f = 0; f < kF; ++f) {
      double acc = 0, n = 0;
      for (int64_t w = 0; w < W; ++w)
        if (m[size_t(r * W + w)] != 0) {
          acc += xv[size_t((r * W + w) * kF + f)];
          n += 1;
        }
      want.push_back(acc / n);
    }
  expect_close(y.to_vector<double>(), want, 2.0 * (W + 1), "masked average per sentence");
}

TEST(TimeDistributed, ConfigAndErrors) {
  TimeDistributed td(Dense(3, {.name = "inner"}), {.name = "td"});
  Json c = td->get_config();
  EXPECT_EQ(c["name"], "td");
  EXPECT_EQ(c["layer"]["class_name"], "Dense");
  EXPECT_EQ(c["layer"]["config"]["name"], "inner");
  EXPECT_EQ(c["layer"]["config"]["units"], 3);
  EXPECT_TRUE(TimeDistributed(Dense(2))->name().starts_with("time_distributed"));
  EXPECT_EQ(error_of([&] {
              td(ones({2, 3}));
            }),
            "layer \"td\": `TimeDistributed` Layer should be passed an input of shape [batch, "
            "timesteps, ...] (at least 3 dimensions); received an input of shape (2, 3)");
  Tensor x = ones({2, 3, 4});
  EXPECT_EQ(error_of([&] {
              td(x.with_keras_mask(cast(ones({3, 2}), DType::b8)));
            }),
            "layer \"td\": `TimeDistributed` Layer should be passed a mask of shape [batch, "
            "timesteps, ...] matching the input's first two axes; got a mask of shape (3, 2) for "
            "an input of shape (2, 3, 4)");
  td(x);
  EXPECT_THAT(error_of([&] {
                td(ones({2, 3, 5}));
              }),
              HasSubstr("Input 0 of layer \"inner\" is incompatible with the layer"));
  EXPECT_THAT(error_of([] { TimeDistributed{Layer()}; }),
              HasSubstr("Please initialize `TimeDistributed` layer with a layer instance"));
  // An inner layer with several outputs.
  TimeDistributed lstm_td(LSTM(2, {.return_state = true}), {.name = "td2"});
  EXPECT_THAT(error_of([&] {
                lstm_td(ones({2, 3, 4, 5}));
              }),
              HasSubstr("layer \"td2\": TimeDistributed needs an inner layer with one output"));
  // Unknown batch and timesteps in a trace.
  TimeDistributed td3(Dense(2), {.name = "td3"});
  auto f = function([&](const Tensor& t) { return td3(t); });
  EXPECT_THAT(error_of([&] {
                f.get_concrete_function(TensorSpec{{-1, -1, 4}});
              }),
              HasSubstr("layer \"td3\": TimeDistributed cannot fold time into the batch"));
}

}  // namespace
}  // namespace kiln
