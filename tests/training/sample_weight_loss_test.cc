// Sample weights in losses (Keras' sample_weight with the "sum_over_batch_size" reduction):
// hand-computed weighted sums, broadcasting over time steps, masks, traced agreement, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/kiln.h"
#include "tests/function/function_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using ::testing::HasSubstr;

// -log softmax(row)[label] in double.
double xent(const std::vector<double>& row, int label) {
  double top = row[0], s = 0;
  for (double v : row) top = std::max(top, v);
  for (double v : row) s += std::exp(v - top);
  return top + std::log(s) - row[size_t(label)];
}

TEST(SampleWeightLoss, WeightedSumOverTheNumberOfSamples) {
  Tensor logits = tensor<double>({1, 2, 0, 3, -1, 4}, {3, 2});
  Tensor labels = tensor<int64_t>({1, 0, 1});
  Tensor w = tensor<double>({2, 0, 0.5});
  Loss loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true);
  const double want = (2 * xent({1, 2}, 1) + 0 * xent({0, 3}, 0) + 0.5 * xent({-1, 4}, 1)) / 3;
  EXPECT_NEAR(loss(labels, logits, w).item<double>(), want, 8 * 0x1p-52 * want);
  // A trailing 1 on the weights is accepted; no weights is the plain mean.
  EXPECT_NEAR(loss(labels, logits, reshape(w, {3, 1})).item<double>(), want, 8 * 0x1p-52 * want);
  const double plain = (xent({1, 2}, 1) + xent({0, 3}, 0) + xent({-1, 4}, 1)) / 3;
  EXPECT_NEAR(loss(labels, logits).item<double>(), plain, 8 * 0x1p-52 * plain);
  // MSE: per-sample means of the last axis, weighted.
  Tensor t = zeros({2, 2}, DType::f64), p = tensor<double>({1, 3, 2, 2}, {2, 2});
  EXPECT_DOUBLE_EQ(losses::mean_squared_error()(t, p, tensor<double>({1, 3})).item<double>(),
                   (1 * 5.0 + 3 * 4.0) / 2);
}

TEST(SampleWeightLoss, PerSequenceWeightsBroadcastOverTimeStepsAndRespectMasks) {
  // logits [1 batch... 2 sequences, 2 steps, 2 classes]; weights per sequence.
  Tensor logits = tensor<double>({1, 2, 0, 3, -1, 4, 2, 2}, {2, 2, 2});
  Tensor labels = tensor<int64_t>({1, 0, 1, 1}, {2, 2});
  Tensor w = tensor<double>({3, 1});
  Loss loss = losses::sparse_categorical_crossentropy(true);
  const double l00 = xent({1, 2}, 1), l01 = xent({0, 3}, 0), l10 = xent({-1, 4}, 1),
               l11 = xent({2, 2}, 1);
  const double want = (3 * (l00 + l01) + 1 * (l10 + l11)) / 4;
  EXPECT_NEAR(loss(labels, logits, w).item<double>(), want, 16 * 0x1p-52 * want);
  // The second step of the second sequence is padding.
  Tensor mask = cast(tensor<double>({1, 1, 1, 0}, {2, 2}), DType::b8);
  const double masked = (3 * (l00 + l01) + l10) / 3;
  EXPECT_NEAR(loss(labels, logits.with_keras_mask(mask), w).item<double>(), masked,
              16 * 0x1p-52 * masked);
}

TEST(SampleWeightLoss, TracedAgreesWithEager) {
  Tensor logits = tensor<double>({1, 2, 0, 3, -1, 4}, {3, 2});
  Tensor labels = tensor<int64_t>({1, 0, 1});
  Tensor w = tensor<double>({2, 0, 0.5});
  Loss loss = losses::sparse_categorical_crossentropy(true);
  auto f =
      function([&](const Tensor& a, const Tensor& b, const Tensor& c) { return loss(b, a, c); });
  const double eager = loss(labels, logits, w).item<double>();
  for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
    double traced = f.concrete(logits, labels, w).run({logits, labels, w}, mode)[0].item<double>();
    // 3 weighted terms and a division: a few ulps apart at most (the JIT's exp/log add their
    // documented few-ulp errors).
    EXPECT_NEAR(traced, eager, 64 * 0x1p-52 * eager) << execution_mode_name(mode);
  }
}

TEST(SampleWeightLoss, BadWeightsAreClearErrors) {
  Tensor logits = tensor<double>({1, 2, 0, 3}, {2, 2});
  Tensor labels = tensor<int64_t>({1, 0});
  Loss loss = losses::sparse_categorical_crossentropy(true);
  EXPECT_THAT(error_of([&] {
                loss(labels, logits, tensor<double>({1, 2, 3}));
              }),
              HasSubstr("sample_weight has shape (3,) (float64), but there is one value per "
                        "sample of shape (2,)"));
  EXPECT_THAT(error_of([&] {
                loss(labels, logits, tensor<double>({1, -2}));
              }),
              HasSubstr("sample_weight element 1 is -2; weights must be >= 0"));
  Loss custom("my_loss", [](const Tensor& t, const Tensor& p) { return mean(p - t); });
  EXPECT_THAT(error_of([&] {
                custom(logits, logits, tensor<double>({1, 1}));
              }),
              HasSubstr("loss \"my_loss\" returns its own scalar and cannot weight samples"));
  // A per-sample custom loss takes weights.
  Loss per = Loss::per_sample(
      "abs_sum", [](const Tensor& t, const Tensor& p) { return sum(abs(p - t), {-1}); });
  EXPECT_DOUBLE_EQ(per(zeros({2, 2}, DType::f64), logits, tensor<double>({1, 2})).item<double>(),
                   (1 * 3.0 + 2 * 3.0) / 2);
}

// A loss that reduces by itself cannot have masked positions left out for it: kiln says so
// (once per loss), instead of quietly averaging over the padding.
TEST(SampleWeightLoss, ScalarLossOnAMaskedPredictionWarnsOnce) {
  test::WarningCapture capture;
  Loss custom("my_mean", [](const Tensor& t, const Tensor& p) { return mean(p - t); });
  Tensor p = tensor<double>({1, 2}, {1, 2})
                 .with_keras_mask(cast(tensor<double>({1, 0}, {1, 2}), DType::b8));
  custom(zeros({1, 2}, DType::f64), p);
  custom(zeros({1, 2}, DType::f64), p);
  ASSERT_EQ(capture.warnings().size(), 1u);
  EXPECT_THAT(capture.warnings()[0], HasSubstr("loss \"my_mean\" returns its own scalar"));
  // Built-in (per-sample) losses apply the mask and do not warn.
  losses::mean_squared_error()(
      zeros({1, 2, 1}, DType::f64),
      tensor<double>({1, 2}, {1, 2, 1})
          .with_keras_mask(cast(tensor<double>({1, 0}, {1, 2}), DType::b8)));
  EXPECT_EQ(capture.warnings().size(), 1u);
}

}  // namespace
}  // namespace kiln
