// GlobalAveragePooling1D and GlobalMaxPooling1D: against naive loops (float64), masks (a padded
// batch gives each sequence its result alone, eagerly and traced), finite differences, traced
// against eager, configs, bad input.
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
using ::testing::HasSubstr;

Layer global_pool(bool is_max, GlobalPooling1DOptions o = {}) {
  return is_max ? Layer(GlobalMaxPooling1D(o)) : Layer(GlobalAveragePooling1D(o));
}

// Mean or max over the steps of x [batch, steps, channels] where `keep` (empty: all) is set.
std::vector<double> naive_global(const Tensor& x, const std::vector<int>& keep, bool is_max) {
  const Shape& s = x.shape();
  std::vector<double> xv = x.to_vector<double>(), out;
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t c = 0; c < s[2]; ++c) {
      double acc = is_max ? -INFINITY : 0;
      int count = 0;
      for (int64_t t = 0; t < s[1]; ++t) {
        if (!keep.empty() && keep[size_t(b * s[1] + t)] == 0) continue;
        double v = xv[size_t((b * s[1] + t) * s[2] + c)];
        acc = is_max ? std::max(acc, v) : acc + v;
        ++count;
      }
      out.push_back(is_max ? acc : acc / count);
    }
  return out;
}

const std::vector<int64_t> kLengths{5, 2, 4};
constexpr int64_t kTimeSteps = 5, kC = 3;

// x [3, 5, 3] whose padding steps hold 50 (larger than any real value: a max that used them
// would show it) and the mask of kLengths.
std::pair<Tensor, Tensor> padded_batch() {
  const int64_t B = int64_t(kLengths.size());
  std::vector<double> xv = gradcheck::uniform({B, kTimeSteps, kC}, 31).to_vector<double>(), m;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < kTimeSteps; ++t) {
      const bool real = t < kLengths[size_t(b)];
      m.push_back(real ? 1 : 0);
      if (!real)
        for (int64_t c = 0; c < kC; ++c) xv[size_t((b * kTimeSteps + t) * kC + c)] = 50;
    }
  return {tensor(xv, {B, kTimeSteps, kC}, DType::f64),
          cast(tensor(m, {B, kTimeSteps}, DType::f64), DType::b8)};
}

TEST(GlobalPooling1D, MatchesTheNaiveReductions) {
  Tensor x = gradcheck::uniform({2, 6, 4}, 30);
  for (bool is_max : {true, false})
    for (bool keepdims : {false, true}) {
      SCOPED_TRACE(fmt::format("max={} keepdims={}", is_max, keepdims));
      Layer layer = global_pool(is_max, {.keepdims = keepdims});
      Tensor y = layer(x);
      EXPECT_EQ(y.shape(), keepdims ? (Shape{2, 1, 4}) : (Shape{2, 4}));
      EXPECT_EQ(layer->compute_output_shape({Shape{-1, 6, 4}})[0],
                keepdims ? (Shape{-1, 1, 4}) : (Shape{-1, 4}));
      // The mean: 6 additions and a division on each side.
      expect_close(y.to_vector<double>(), naive_global(x, {}, is_max), 2.0 * (6 + 1), "no mask");
    }
}

TEST(GlobalPooling1D, PaddedBatchEqualsEachSequenceAlone) {
  auto [x, mask] = padded_batch();
  std::vector<int> keep = cast(mask, DType::i32).to_vector<int>();
  std::vector<double> xv = x.to_vector<double>();
  for (bool is_max : {true, false}) {
    SCOPED_TRACE(is_max ? "max" : "average");
    Layer layer = global_pool(is_max);
    Tensor masked = layer(x.with_keras_mask(mask));
    EXPECT_FALSE(masked.keras_mask().defined());  // the output has no mask
    auto f =
        function([&](const Tensor& xx, const Tensor& mm) { return layer(xx.with_keras_mask(mm)); });
    std::vector<Tensor> traced{f(x, mask)};
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled})
      traced.push_back(f.concrete(x, mask).run({x, mask}, mode)[0]);
    // A numeric mask (nonzero: kept) gives the same.
    Tensor numeric = layer(x.with_keras_mask(cast(mask, DType::f32)));
    expect_close(numeric.to_vector<double>(), masked.to_vector<double>(), 0, "numeric mask");
    expect_close(masked.to_vector<double>(), naive_global(x, keep, is_max), 2.0 * (kTimeSteps + 1),
                 "naive");
    for (size_t b = 0; b < kLengths.size(); ++b) {
      const int64_t L = kLengths[b];
      std::vector<double> seq(xv.begin() + int64_t(b) * kTimeSteps * kC,
                              xv.begin() + (int64_t(b) * kTimeSteps + L) * kC);
      std::vector<double> alone = layer(tensor(seq, {1, L, kC}, DType::f64)).to_vector<double>();
      for (const Tensor& got : {masked, traced[0], traced[1], traced[2]}) {
        std::vector<double> all = got.to_vector<double>();
        std::vector<double> row(all.begin() + int64_t(b) * kC, all.begin() + int64_t(b + 1) * kC);
        expect_close(row, alone, 2.0 * (kTimeSteps + 2), fmt::format("sequence {}", b));
      }
    }
  }
}

TEST(GlobalPooling1D, MaskedGradientsMatchFiniteDifferences) {
  auto [x, mask] = padded_batch();
  // Distinct values: no ties in the max.
  Tensor xd = gradcheck::distinct(x.shape(), 32);
  for (bool is_max : {true, false}) {
    SCOPED_TRACE(is_max ? "max" : "average");
    Layer layer = global_pool(is_max);
    auto f = [&](const std::vector<Tensor>& xs) { return layer(xs[0].with_keras_mask(mask)); };
    EXPECT_TRUE(gradcheck::check_gradients(f, {xd}));
    // Masked steps get no gradient.
    GradientTape tape;
    tape.watch(xd);
    Tensor loss = sum(layer(xd.with_keras_mask(mask)));
    std::vector<double> g = tape.gradient(loss, xd).to_vector<double>();
    for (size_t b = 0; b < kLengths.size(); ++b)
      for (int64_t t = kLengths[b]; t < kTimeSteps; ++t)
        for (int64_t c = 0; c < kC; ++c)
          EXPECT_EQ(g[size_t((int64_t(b) * kTimeSteps + t) * kC + c)], 0);
    // Traced gradients with the mask agree with eager.
    auto grads = [layer](const Tensor& xx, const Tensor& mm) {
      GradientTape t;
      t.watch(xx);
      Tensor l = sum(square(layer(xx.with_keras_mask(mm))));
      return std::vector<Tensor>{l, t.gradient(l, xx)};
    };
    std::vector<Tensor> eager = grads(xd, mask);
    auto fn = function(grads);
    for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
      std::vector<Tensor> traced = fn.concrete(xd, mask).run({xd, mask}, mode);
      for (size_t i = 0; i < 2; ++i)
        expect_close(traced[i].to_vector<double>(), eager[i].to_vector<double>(),
                     4.0 * (kTimeSteps + 3 * kLengths.size() * kC),
                     fmt::format("{} output {}", execution_mode_name(mode), i));
    }
  }
}

TEST(GlobalPooling1D, EmbeddingMaskZeroThroughASequentialModel) {
  // Token 0 is padding: the pooled vector of a padded row equals the unpadded row's.
  for (bool is_max : {true, false}) {
    Embedding emb(10, 4, {.mask_zero = true, .dtype = DType::f64});
    Sequential model({emb, global_pool(is_max)});
    Tensor a = model(tensor<int64_t>({3, 1, 4, 0, 0}, {1, 5}));
    Tensor b = model(tensor<int64_t>({3, 1, 4}, {1, 3}));
    EXPECT_FALSE(a.keras_mask().defined());
    expect_close(a.to_vector<double>(), b.to_vector<double>(), 2.0 * (5 + 1),
                 is_max ? "max" : "average");
  }
}

TEST(GlobalPooling1D, MaskThroughAFunctionalModelWithUnknownLength) {
  Tensor in = Input({-1}, DType::i64);
  Embedding emb(10, 4, {.mask_zero = true, .dtype = DType::f64});
  for (bool is_max : {true, false}) {
    Tensor pooled = global_pool(is_max)(emb(in));
    EXPECT_EQ(pooled.shape(), (Shape{-1, 4}));
    EXPECT_FALSE(pooled.keras_mask().defined());
    Model model(in, Dense(2, {.dtype = DType::f64})(pooled));
    Tensor a = model(tensor<int64_t>({3, 1, 4, 0, 0, 2, 0, 0, 0, 0}, {2, 5}));
    Tensor b = model(tensor<int64_t>({3, 1, 4}, {1, 3}));
    Tensor c = model(tensor<int64_t>({2}, {1, 1}));
    std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(),
                        cv = c.to_vector<double>();
    // Sums of 5 steps, then a Dense of 4 inputs.
    expect_close({av[0], av[1]}, bv, 2.0 * (5 + 1 + 4 + 1), "row 0");
    expect_close({av[2], av[3]}, cv, 2.0 * (5 + 1 + 4 + 1), "row 1");
  }
}

TEST(GlobalPooling1D, MaskedWithKeepdimsAndIntegers) {
  auto [x, mask] = padded_batch();
  for (bool is_max : {true, false}) {
    Tensor kept = global_pool(is_max, {.keepdims = true})(x.with_keras_mask(mask));
    EXPECT_EQ(kept.shape(), (Shape{3, 1, kC}));
    EXPECT_EQ(kept.to_vector<double>(),
              global_pool(is_max)(x.with_keras_mask(mask)).to_vector<double>());
  }
  // Integer inputs: the max of the unmasked steps, also when all are negative.
  Tensor ints = tensor<int32_t>({-7, -3, 9, -5, -1, 4}, {2, 3, 1});
  Tensor m = cast(tensor<float>({1, 1, 0, 1, 0, 0}, {2, 3}), DType::b8);
  EXPECT_EQ(global_pool(true)(ints.with_keras_mask(m)).to_vector<int32_t>(),
            (std::vector<int32_t>{-3, -5}));
}

TEST(GlobalPooling1D, EveryStepMaskedFollowsKeras) {
  // Keras: the average of no steps is 0 / 0; the max of none is the reduction's identity.
  Tensor x = gradcheck::uniform({1, 3, 2}, 33);
  Tensor none = cast(zeros({1, 3}), DType::b8);
  for (double v : global_pool(false)(x.with_keras_mask(none)).to_vector<double>())
    EXPECT_TRUE(std::isnan(v));
  for (double v : global_pool(true)(x.with_keras_mask(none)).to_vector<double>())
    EXPECT_EQ(v, -INFINITY);
}

TEST(GlobalPooling1D, ConfigAndErrors) {
  GlobalAveragePooling1D gap({.keepdims = true, .name = "gap"});
  Json c = gap->get_config();
  EXPECT_EQ(c["name"], "gap");
  EXPECT_EQ(c["keepdims"], true);
  EXPECT_EQ(c["data_format"], "channels_last");
  EXPECT_TRUE(c.contains("trainable"));
  EXPECT_TRUE(GlobalMaxPooling1D()->get_config()["name"].get<std::string>().starts_with(
      "global_max_pooling1d"));
  Tensor x = ones({2, 4, 3});
  EXPECT_EQ(error_of([&] {
              gap(x.with_keras_mask(cast(ones({2, 5}), DType::b8)));
            }),
            "layer \"gap\": the mask must have shape [batch, timesteps] matching the input's "
            "first two axes; got a mask of shape (2, 5) for an input of shape (2, 4, 3)");
  EXPECT_THAT(error_of([&] {
                gap(ones({2, 4}));
              }),
              HasSubstr("Input 0 of layer \"gap\" is incompatible with the layer: expected "
                        "ndim=3, found ndim=2"));
  // Symbolic (functional) inputs keep the types.
  EXPECT_EQ(gap(test::symbolic_input({-1, 7, 3})).shape(), (Shape{-1, 1, 3}));
}

}  // namespace
}  // namespace kiln
