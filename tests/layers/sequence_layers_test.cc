// Conv1D, MaxPooling1D, AveragePooling1D and PositionEmbedding: against naive loops (float64),
// finite differences, traced (reference executor and compiled) against eager, Keras' weight
// layouts and configs, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// A naive result: the values and, per element, the sum of the magnitudes of the terms that
// make it up (a bound on what summing them in another order can change, up to the number of
// terms times the unit roundoff).
struct Naive {
  Shape shape;
  std::vector<double> value, magnitude;
};

// |got - want| <= terms * 2^-52 * magnitude, element by element (terms: the rounded operations
// of both sides).
void expect_within(const Tensor& got, const Naive& want, double terms, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape) << what;
  std::vector<double> g = got.to_vector<double>();
  for (size_t j = 0; j < g.size(); ++j)
    ASSERT_LE(std::abs(g[j] - want.value[j]), terms * 0x1p-52 * want.magnitude[j])
        << what << " element " << j << ": " << g[j] << " vs " << want.value[j];
}

// ---------------------------------------------------------------- Conv1D

struct Conv1DCase {
  int64_t kernel, stride, dilation;
  std::string padding;
  Shape input;  // [batch, steps, channels]
};

const std::vector<Conv1DCase>& conv1d_cases() {
  static const std::vector<Conv1DCase> c = {
      {3, 1, 1, "valid", {2, 7, 3}},  {3, 2, 1, "same", {2, 8, 2}},   {4, 1, 2, "same", {1, 9, 2}},
      {3, 1, 2, "causal", {2, 6, 3}}, {2, 3, 1, "causal", {1, 7, 2}}, {1, 1, 1, "VALID", {1, 4, 3}},
  };
  return c;
}

// out[b, t, f] = bias[f] + sum over a, c of x[b, t * stride + a * dilation - left, c] *
// kernel[a, c, f], steps outside the input counting as zeros; left is TensorFlow's "same"
// padding before the data, (kernel - 1) * dilation for "causal", 0 for "valid".
Naive naive_conv1d(const Tensor& x, const Conv1DImpl& conv) {
  const Shape& xs = x.shape();
  const int64_t B = xs[0], S = xs[1], C = xs[2], K = conv.kernel_size(), F = conv.filters();
  const int64_t stride = conv.options().strides, dil = conv.options().dilation_rate;
  const std::string& padding = conv.options().padding;
  std::vector<double> xv = x.to_vector<double>(), k = conv.kernel.value().to_vector<double>();
  std::vector<double> bias(size_t(F), 0);
  if (conv.options().use_bias) bias = conv.bias.value().to_vector<double>();
  int64_t left, out;
  if (padding == "causal") {
    left = (K - 1) * dil;
    out = test::ref_window(S + left, K, stride, dil, "valid").second;
  } else {
    std::tie(left, out) = test::ref_window(S, K, stride, dil, padding);
  }
  Naive r{Shape{B, out, F}, {}, {}};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < out; ++t)
      for (int64_t f = 0; f < F; ++f) {
        double acc = bias[size_t(f)], mag = std::abs(acc);
        for (int64_t a = 0; a < K; ++a) {
          const int64_t s = t * stride + a * dil - left;
          if (s < 0 || s >= S) continue;
          for (int64_t c = 0; c < C; ++c) {
            double p = xv[size_t((b * S + s) * C + c)] * k[size_t((a * C + c) * F + f)];
            acc += p;
            mag += std::abs(p);
          }
        }
        r.value.push_back(acc);
        r.magnitude.push_back(mag);
      }
  return r;
}

Conv1D conv1d_of(const Conv1DCase& cc, const std::string& activation = "linear") {
  return Conv1D(3, cc.kernel,
                {.strides = cc.stride,
                 .padding = cc.padding,
                 .dilation_rate = cc.dilation,
                 .activation = activation,
                 .bias_initializer = "random_normal",
                 .dtype = DType::f64});
}

TEST(Conv1D, MatchesTheNaiveConvolution) {
  for (const Conv1DCase& cc : conv1d_cases()) {
    SCOPED_TRACE(fmt::format("{} k={} stride={} dilation={} {}", cc.input.to_string(), cc.kernel,
                             cc.stride, cc.dilation, cc.padding));
    Conv1D conv = conv1d_of(cc);
    Tensor x = gradcheck::uniform(cc.input, 1);
    Tensor y = conv(x);
    Naive want = naive_conv1d(x, conv.get());
    // Both sides: at most kernel * channels + 1 rounded additions (and as many products).
    expect_within(y, want, 4.0 * double(cc.kernel * cc.input[2] + 1), "conv1d");
    EXPECT_EQ(conv->compute_output_shape({cc.input})[0], want.shape);
    EXPECT_EQ(conv->compute_output_shape({Shape{-1, cc.input[1], cc.input[2]}})[0],
              (Shape{-1, want.shape[1], 3}));
  }
}

TEST(Conv1D, CausalOutputSeesOnlyThePast) {
  Conv1D conv(2, 3, {.padding = "causal", .dilation_rate = 2, .dtype = DType::f64});
  Tensor x = gradcheck::uniform({1, 8, 2}, 2);
  std::vector<double> before = conv(x).to_vector<double>();
  std::vector<double> xv = x.to_vector<double>();
  for (size_t j = 5 * 2; j < xv.size(); ++j) xv[j] += 1;  // change steps 5..7
  std::vector<double> after = conv(tensor(xv, {1, 8, 2}, DType::f64)).to_vector<double>();
  for (size_t j = 0; j < before.size(); ++j) {
    if (j < 5 * 2)
      EXPECT_EQ(before[j], after[j]) << "output step " << j / 2 << " saw a future step";
    else
      EXPECT_NE(before[j], after[j]) << j;
  }
}

TEST(Conv1D, ActivationIsApplied) {
  Conv1D conv = conv1d_of(conv1d_cases()[0], "relu");
  Tensor x = gradcheck::uniform({2, 7, 3}, 3);
  Tensor y = conv(x);
  Naive want = naive_conv1d(x, conv.get());
  for (double& v : want.value) v = std::max(v, 0.0);
  expect_within(y, want, 4.0 * (3 * 3 + 1), "relu");
}

TEST(Conv1D, GradientsMatchFiniteDifferences) {
  for (const Conv1DCase& cc : conv1d_cases()) {
    SCOPED_TRACE(cc.padding);
    Conv1D conv = conv1d_of(cc);
    Tensor x = gradcheck::uniform(cc.input, 4);
    conv(x);
    EXPECT_TRUE(test::check_layer_gradients(conv, x));
  }
}

TEST(Conv1D, TracedAgreesWithEager) {
  for (const Conv1DCase& cc : conv1d_cases()) {
    SCOPED_TRACE(cc.padding);
    Conv1D conv = conv1d_of(cc);
    Tensor x = gradcheck::uniform(cc.input, 6);
    // Sums: kernel * channels (output), kernel * filters (input gradient), batch * steps
    // (kernel and bias gradients), batch * steps * filters (the loss).
    const double n = double(cc.input[0] * cc.input[1]);
    expect_traced_agrees(conv, x, 8.0 * (double(cc.kernel) * (cc.input[2] + 3) + 4 * n + 2));
  }
}

TEST(Conv1D, KerasWeightShapesNamesAndConfig) {
  Conv1D conv(5, 3, {.padding = "Causal", .name = "enc"});
  EXPECT_FALSE(conv->built());
  Tensor y = conv(ones({2, 9, 4}));
  EXPECT_EQ(y.shape(), (Shape{2, 9, 5}));
  std::vector<Variable> w = conv->weights();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].name(), "enc/kernel");
  EXPECT_EQ(w[0].shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(w[1].name(), "enc/bias");
  EXPECT_EQ(w[1].shape(), (Shape{5}));
  Json c = conv->get_config();
  for (const char* key :
       {"name", "trainable", "dtype", "filters", "kernel_size", "strides", "padding", "data_format",
        "dilation_rate", "groups", "activation", "use_bias", "kernel_initializer",
        "bias_initializer", "kernel_regularizer", "bias_regularizer", "kernel_constraint",
        "bias_constraint"})
    EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_EQ(c["kernel_size"], Json({3}));
  EXPECT_EQ(c["strides"], Json({1}));
  EXPECT_EQ(c["dilation_rate"], Json({1}));
  EXPECT_EQ(c["padding"], "causal");
  EXPECT_EQ(c["data_format"], "channels_last");
  EXPECT_EQ(c["kernel_initializer"], "glorot_uniform");
  Conv1D no_bias(2, 2, {.use_bias = false});
  no_bias(ones({1, 4, 3}));
  EXPECT_EQ(no_bias->weights().size(), 1u);
  // A functional input with unknown batch and length; a trace with both unknown.
  Conv1D sym(4, 3, {.strides = 2, .padding = "same", .name = "sym"});
  EXPECT_EQ(sym(test::symbolic_input({-1, -1, 6})).shape(), (Shape{-1, -1, 4}));
  EXPECT_EQ(MaxPooling1D()(test::symbolic_input({-1, -1, 6})).shape(), (Shape{-1, -1, 6}));
  auto f = function([&](const Tensor& x) { return sym(x); });
  EXPECT_EQ(error_of([&] {
              f.get_concrete_function(TensorSpec{{-1, -1, 6}});
            }),
            "layer \"sym\": Conv1D cannot run on a traced input of shape (None, None, 6) with "
            "more than one unknown dimension (it views the input through a reshape, which infers "
            "only one); trace with the timesteps known (an input_signature with a fixed timesteps "
            "dimension)");
  // One unknown dimension traces (the batch here), on both executors.
  Conv1D conv64 = conv1d_of(conv1d_cases()[1]);
  Tensor x = gradcheck::uniform({2, 8, 2}, 7);
  Tensor eager = conv64(x);
  for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
    auto g = function(
        [&](const Tensor& t) { return conv64(t); },
        {.input_signature = std::vector<TensorSpec>{{Shape{-1, 8, 2}, DType::f64}}, .mode = mode});
    expect_close(g(x).to_vector<double>(), eager.to_vector<double>(), 4.0 * (3 * 2 + 1),
                 execution_mode_name(mode));
  }
}

TEST(Conv1D, BadArgumentsAndInput) {
  EXPECT_THAT(error_of([] { Conv1D(0, 3); }), HasSubstr("Invalid value for argument `filters`"));
  EXPECT_THAT(error_of([] { Conv1D(2, 0, {.name = "c0"}); }),
              HasSubstr("layer \"c0\": The `kernel_size` argument must be a positive integer. "
                        "Received: kernel_size=0"));
  EXPECT_THAT(error_of([] { Conv1D(2, 3, {.strides = -1}); }), HasSubstr("strides=-1"));
  EXPECT_THAT(error_of([] { Conv1D(2, 3, {.padding = "full"}); }),
              HasSubstr("invalid padding \"full\"; expected \"valid\", \"same\" or \"causal\""));
  EXPECT_THAT(error_of([] { Conv1D(2, 3, {.strides = 2, .dilation_rate = 2}); }),
              HasSubstr("`strides > 1` not supported in conjunction with `dilation_rate > 1`"));
  Conv1D conv(2, 3, {.name = "c1"});
  EXPECT_EQ(error_of([&] {
              conv(ones({2, 5}));
            }),
            "Input 0 of layer \"c1\" is incompatible with the layer: expected ndim=3, found "
            "ndim=2. Full shape received: (2, 5)");
  conv(ones({1, 5, 3}));
  EXPECT_THAT(error_of([&] {
                conv(ones({1, 5, 2}));
              }),
              HasSubstr("expected axis -1 of input shape to have value 3"));
}

// ---------------------------------------------------------------- MaxPooling1D, AveragePooling1D

struct Pool1DCase {
  int64_t pool;
  std::optional<int64_t> strides;
  std::string padding;
  Shape input;
};

const std::vector<Pool1DCase>& pool1d_cases() {
  static const std::vector<Pool1DCase> c = {
      {2, std::nullopt, "valid", {2, 7, 3}},
      {3, 2, "same", {1, 8, 2}},
      {3, 1, "valid", {2, 5, 2}},
      {2, std::nullopt, "same", {1, 5, 3}},
  };
  return c;
}

// Max or mean of the in-bounds steps of each window (TensorFlow's windows).
Naive naive_pool1d(const Tensor& x, int64_t pool, int64_t stride, const std::string& padding,
                   bool is_max) {
  const Shape& xs = x.shape();
  const int64_t B = xs[0], S = xs[1], C = xs[2];
  auto [left, out] = test::ref_window(S, pool, stride, 1, padding);
  std::vector<double> xv = x.to_vector<double>();
  Naive r{Shape{B, out, C}, {}, {}};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < out; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double acc = is_max ? -INFINITY : 0, mag = 0;
        int64_t count = 0;
        for (int64_t a = 0; a < pool; ++a) {
          const int64_t s = t * stride + a - left;
          if (s < 0 || s >= S) continue;
          double v = xv[size_t((b * S + s) * C + c)];
          acc = is_max ? std::max(acc, v) : acc + v;
          mag += std::abs(v);
          ++count;
        }
        r.value.push_back(is_max ? acc : acc / double(count));
        r.magnitude.push_back(is_max ? 0 : mag / double(count));  // a max is exact
      }
  return r;
}

Layer pool1d_of(const Pool1DCase& pc, bool is_max) {
  Pooling1DOptions o{.strides = pc.strides, .padding = pc.padding};
  return is_max ? Layer(MaxPooling1D(pc.pool, o)) : Layer(AveragePooling1D(pc.pool, o));
}

TEST(Pooling1D, MatchesNaivePooling) {
  for (const Pool1DCase& pc : pool1d_cases())
    for (bool is_max : {true, false}) {
      SCOPED_TRACE(
          fmt::format("{} pool={} {} max={}", pc.input.to_string(), pc.pool, pc.padding, is_max));
      Layer layer = pool1d_of(pc, is_max);
      Tensor x = gradcheck::distinct(pc.input, 11);
      Naive want = naive_pool1d(x, pc.pool, pc.strides.value_or(pc.pool), pc.padding, is_max);
      // The average: pool additions and one division on each side.
      expect_within(layer(x), want, 2.0 * double(pc.pool + 1), "pool1d");
      EXPECT_EQ(layer->compute_output_shape({pc.input})[0], want.shape);
    }
}

TEST(Pooling1D, GradientsMatchFiniteDifferencesAndTracedAgrees) {
  for (const Pool1DCase& pc : pool1d_cases())
    for (bool is_max : {true, false}) {
      SCOPED_TRACE(fmt::format("{} {} max={}", pc.input.to_string(), pc.padding, is_max));
      Layer layer = pool1d_of(pc, is_max);
      Tensor x = gradcheck::distinct(pc.input, 12, -1, 0.05);
      EXPECT_TRUE(test::check_layer_gradients(layer, x));
      const double n = double(pc.input[0] * pc.input[1] * pc.input[2]);
      expect_traced_agrees(layer, x, 8.0 * (double(pc.pool) + n + 2));
    }
}

TEST(Pooling1D, DefaultsConfigAndErrors) {
  MaxPooling1D mp;
  EXPECT_EQ(mp->pool_size(), 2);
  EXPECT_EQ(mp->strides(), 2);
  EXPECT_EQ(mp(ones({1, 6, 2})).shape(), (Shape{1, 3, 2}));
  AveragePooling1D ap(3, {.strides = 1, .padding = "SAME", .name = "avg"});
  Json c = ap->get_config();
  EXPECT_EQ(c["name"], "avg");
  EXPECT_EQ(c["pool_size"], Json({3}));
  EXPECT_EQ(c["strides"], Json({1}));
  EXPECT_EQ(c["padding"], "same");
  EXPECT_EQ(c["data_format"], "channels_last");
  EXPECT_TRUE(mp->get_config()["name"].get<std::string>().starts_with("max_pooling1d"));
  EXPECT_EQ(mp(test::symbolic_input({-1, 9, 4})).shape(), (Shape{-1, 4, 4}));
  EXPECT_THAT(error_of([] { MaxPooling1D(0); }),
              HasSubstr("The `pool_size` argument must be a positive integer"));
  EXPECT_THAT(error_of([] { AveragePooling1D(2, {.padding = "causal"}); }),
              HasSubstr("invalid padding \"causal\"; expected \"valid\" or \"same\""));
  EXPECT_THAT(error_of([&] {
                ap(ones({2, 5, 2, 1}));
              }),
              HasSubstr("Input 0 of layer \"avg\" is incompatible with the layer: expected "
                        "ndim=3, found ndim=4"));
}

// ---------------------------------------------------------------- PositionEmbedding

TEST(PositionEmbedding, ReturnsTheFirstRowsBroadcastToTheInput) {
  PositionEmbedding pe(6, {.dtype = DType::f64, .name = "pos"});
  Tensor x = gradcheck::uniform({3, 4, 5}, 21);
  Tensor y = pe(x);
  ASSERT_EQ(pe->weights().size(), 1u);
  EXPECT_EQ(pe->embeddings.name(), "pos/embeddings");
  EXPECT_EQ(pe->embeddings.shape(), (Shape{6, 5}));
  EXPECT_EQ(y.shape(), x.shape());
  std::vector<double> table = pe->embeddings.value().to_vector<double>(),
                      got = y.to_vector<double>();
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t f = 0; f < 5; ++f)
        EXPECT_EQ(got[size_t((b * 4 + t) * 5 + f)], table[size_t(t * 5 + f)]);
  // The full length, and the usual use x + position_embedding(x).
  Tensor x6 = gradcheck::uniform({2, 6, 5}, 22);
  EXPECT_EQ(pe(x6).to_vector<double>(),
            broadcast_to(pe->embeddings.value(), {2, 6, 5}).to_vector<double>());
  std::vector<double> sum6 = (x6 + pe(x6)).to_vector<double>(), xv = x6.to_vector<double>();
  for (size_t j = 0; j < sum6.size(); ++j) EXPECT_EQ(sum6[j], xv[j] + table[j % 30]);
  EXPECT_EQ(pe->compute_output_shape({Shape{-1, 3, 5}})[0], (Shape{-1, 3, 5}));
}

TEST(PositionEmbedding, GradientsMaskAndTraced) {
  PositionEmbedding pe(5, {.dtype = DType::f64});
  Tensor x = gradcheck::uniform({2, 3, 4}, 23);
  pe(x);
  EXPECT_TRUE(test::check_layer_gradients(pe, x));
  // The embedding gradient sums over the batch: 2 terms per element, plus the loss.
  expect_traced_agrees(pe, x, 8.0 * (2 + 2 * 3 * 4));
  Tensor mask = cast(tensor<float>({1, 1, 0, 1, 0, 0}, {2, 3}), DType::b8);
  Tensor y = pe(x.with_keras_mask(mask));
  ASSERT_TRUE(y.keras_mask().defined());
  EXPECT_EQ(y.keras_mask().to_vector<int>(), (std::vector<int>{1, 1, 0, 1, 0, 0}));
}

TEST(PositionEmbedding, ConfigAndErrors) {
  PositionEmbedding pe(8, {.name = "pos2"});
  Json c = pe->get_config();
  EXPECT_EQ(c["sequence_length"], 8);
  EXPECT_EQ(c["initializer"], "glorot_uniform");
  EXPECT_EQ(c["name"], "pos2");
  EXPECT_EQ(c["dtype"], DTypePolicy("float32").serialize());
  EXPECT_EQ(error_of([&] {
              pe(ones({2, 9, 3}));
            }),
            "layer \"pos2\": the input has 9 positions (axis -2 of shape (2, 9, 3)), more than "
            "the layer's sequence_length=8; create the layer with sequence_length >= 9 or "
            "shorten the input");
  pe(ones({2, 8, 3}));
  EXPECT_THAT(error_of([&] {
                pe(ones({2, 8, 4}));
              }),
              HasSubstr("expected axis -1 of input shape to have value 3"));
  EXPECT_THAT(error_of([&] { pe(ones({3})); }), HasSubstr("expected min_ndim=2, found ndim=1"));
  EXPECT_THAT(error_of([] { PositionEmbedding(0); }),
              HasSubstr("`sequence_length` must be a positive integer, received 0"));
  // A trace with an unknown number of positions.
  auto f = function([&](const Tensor& x) { return pe(x); });
  EXPECT_THAT(error_of([&] {
                f.get_concrete_function(TensorSpec{{2, -1, 3}});
              }),
              HasSubstr("PositionEmbedding traced with an unknown number of positions"));
}

}  // namespace
}  // namespace kiln
