// Keras' streaming metrics against hand-computed values over several batches: the state is
// counts, so the result is exact over all batches (not an average of batch averages).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln/kiln.h"
#include "tests/support/expect_error.h"

namespace kiln {
namespace {

using test::expect_error;

TEST(StreamingMetrics, PrecisionAndRecallCountOverBatches) {
  Metric p = metrics::precision(), r = metrics::recall();
  // Batch 1: predicted positive (> 0.5) at 0, 1; labels 1, 0, 1 -> TP 1, FP 1, FN 1.
  Tensor t1 = tensor<float>({1, 0, 1}), p1 = tensor<float>({0.9f, 0.7f, 0.2f});
  // Batch 2 (4 elements): predicted at 0, 2, 3; labels 1, 1, 1, 0 -> TP 2, FP 1, FN 1.
  Tensor t2 = tensor<float>({1, 1, 1, 0}, {4, 1}),
         p2 = tensor<float>({0.6f, 0.1f, 0.8f, 0.51f}, {4, 1});
  for (Metric* m : {&p, &r}) {
    (*m)->update_state(t1, p1);
    (*m)->update_state(t2, p2);
  }
  EXPECT_DOUBLE_EQ(p->result(), 3.0 / 5.0);  // TP 3, FP 2
  EXPECT_DOUBLE_EQ(r->result(), 3.0 / 5.0);  // TP 3, FN 2
  // Batch averages would give (1/2 + 2/3) / 2 = 7/12 instead.
  p->reset_state();
  EXPECT_EQ(p->result(), 0.0);  // 0 / 0
  Metric strict = metrics::precision("p", 0.75);
  strict->update_state(t2, p2);  // predicted at 2 only: TP 1
  EXPECT_DOUBLE_EQ(strict->result(), 1.0);
  EXPECT_EQ(Metric("precision")->name(), "precision");
  EXPECT_EQ(Metric("Recall")->name(), "recall");
}

// The ROC area by the same thresholds and trapezoids, written out independently.
double naive_auc(const std::vector<int>& labels, const std::vector<double>& preds, int n) {
  std::vector<double> thr{-1e-7};
  for (int i = 0; i < n - 2; ++i) thr.push_back(double(i + 1) / (n - 1));
  thr.push_back(1 + 1e-7);
  std::vector<double> tpr, fpr;
  for (double th : thr) {
    double tp = 0, fp = 0, pos = 0, neg = 0;
    for (size_t i = 0; i < labels.size(); ++i) {
      (labels[i] ? pos : neg) += 1;
      if (preds[i] > th) (labels[i] ? tp : fp) += 1;
    }
    tpr.push_back(pos ? tp / pos : 0);
    fpr.push_back(neg ? fp / neg : 0);
  }
  double area = 0;
  for (size_t k = 0; k + 1 < thr.size(); ++k)
    area += (fpr[k] - fpr[k + 1]) * (tpr[k] + tpr[k + 1]) / 2;
  return area;
}

TEST(StreamingMetrics, AucOverBatches) {
  // The textbook case: labels 0 0 1 1, scores 0.1 0.4 0.35 0.8 -> ROC AUC 0.75 (3 of the 4
  // positive-negative pairs are ordered right), in two batches.
  Metric m = metrics::auc();
  m->update_state(tensor<float>({0, 0}), tensor<float>({0.1f, 0.4f}));
  m->update_state(tensor<float>({1, 1}), tensor<float>({0.35f, 0.8f}));
  EXPECT_NEAR(m->result(), 0.75, 1e-12);
  // Ties inside one threshold bin are interpolated: scores 0.5 and 0.501 (same bin of 1/199).
  std::vector<int> labels{0, 1, 1, 0, 1};
  std::vector<double> preds{0.2, 0.5, 0.9, 0.501, 0.05};
  Metric a = metrics::auc("a", 20);
  a->update_state(tensor<float>({0, 1, 1, 0, 1}), tensor<double>(preds, {5}));
  EXPECT_NEAR(a->result(), naive_auc(labels, preds, 20), 1e-12);
  // Perfect separation: 1.
  Metric perfect = metrics::auc();
  perfect->update_state(tensor<float>({0, 1}), tensor<float>({0.3f, 0.7f}));
  EXPECT_NEAR(perfect->result(), 1.0, 1e-12);
  expect_error([] { metrics::auc("bad", 1); }, {"num_thresholds"});
}

TEST(StreamingMetrics, TopKAccuracy) {
  // Rows of 4 classes; labels 2, 0, 3.
  Tensor pred = tensor<float>({0.1f, 0.5f, 0.3f, 0.1f,       // label 2 is 2nd
                               0.1f, 0.2f, 0.3f, 0.4f,       // label 0 is 4th
                               0.25f, 0.25f, 0.25f, 0.25f},  // ties: label 3 counts as in
                              {3, 4});
  Metric top2 = metrics::sparse_top_k_categorical_accuracy(2);
  top2->update_state(tensor<int64_t>({2, 0, 3}), pred);
  EXPECT_DOUBLE_EQ(top2->result(), 2.0 / 3.0);
  Metric one_hot_top1 = metrics::top_k_categorical_accuracy(1);
  one_hot_top1->update_state(tensor<float>({0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1}, {3, 4}), pred);
  EXPECT_DOUBLE_EQ(one_hot_top1->result(), 1.0 / 3.0);  // only the all-ties row
  Metric by_name("sparse_top_k_categorical_accuracy");  // k = 5 >= 4 classes: all in
  by_name->update_state(tensor<int64_t>({2, 0, 3}), pred);
  EXPECT_DOUBLE_EQ(by_name->result(), 1.0);
  expect_error([] { metrics::top_k_categorical_accuracy(0); }, {"k must be positive"});
}

TEST(StreamingMetrics, MeanAbsoluteErrorPerSample) {
  Metric m("mae");
  // Two samples of 2 values, then one sample: per-sample means 1.5, 0.5, then 3.
  m->update_state(tensor<float>({0, 0, 1, 1}, {2, 2}), tensor<float>({1, 2, 1, 2}, {2, 2}));
  m->update_state(tensor<float>({0, 0}, {1, 2}), tensor<float>({3, -3}, {1, 2}));
  EXPECT_DOUBLE_EQ(m->result(), (1.5 + 0.5 + 3.0) / 3.0);
  expect_error(
      [&] {
        m->update_state(tensor<float>({0}), tensor<float>({0, 1}));
      },
      {"mae", "same shape"});
}

TEST(StreamingMetrics, MasksLeaveElementsOut) {
  Metric p = metrics::precision();
  Tensor pred = tensor<float>({0.9f, 0.8f, 0.7f}, {1, 3});
  Tensor mask = cast(tensor<float>({1, 0, 1}, {1, 3}), DType::b8);
  p->update_state(tensor<float>({1, 0, 0}, {1, 3}), pred.with_keras_mask(mask));
  EXPECT_DOUBLE_EQ(p->result(), 0.5);  // the masked false positive does not count
}

TEST(StreamingMetrics, SampleWeightsWeighTheCounts) {
  // Accuracy: matches 1, 0, 1 with weights 2, 1, 0.5 -> (2 + 0.5) / 3.5; a second batch adds
  // a match of weight 1.5.
  Metric acc = metrics::sparse_categorical_accuracy();
  acc->update_state(tensor<int64_t>({0, 1, 1}),
                    tensor<float>({0.9f, 0.1f, 0.8f, 0.2f, 0.3f, 0.7f}, {3, 2}),
                    tensor<float>({2, 1, 0.5f}));
  EXPECT_DOUBLE_EQ(acc->result(), 2.5 / 3.5);
  acc->update_state(tensor<int64_t>({1}), tensor<float>({0.4f, 0.6f}, {1, 2}),
                    tensor<float>({1.5f}));
  EXPECT_DOUBLE_EQ(acc->result(), 4.0 / 5.0);
  // Precision: predicted positive at 0, 1 (labels 1, 0) weighted 3 and 1 -> 3 / 4.
  Metric p = metrics::precision();
  p->update_state(tensor<float>({1, 0, 1}), tensor<float>({0.9f, 0.7f, 0.2f}),
                  tensor<float>({3, 1, 5}));
  EXPECT_DOUBLE_EQ(p->result(), 3.0 / 4.0);
  // AUC with integer weights equals the AUC of the data with each sample repeated that often.
  std::vector<int> labels{1, 0, 1, 0, 1};
  std::vector<double> preds{0.8, 0.3, 0.35, 0.6, 0.95};
  std::vector<float> w{2, 1, 3, 0, 1};
  std::vector<int> rep_labels;
  std::vector<double> rep_preds;
  for (size_t i = 0; i < labels.size(); ++i)
    for (int k = 0; k < int(w[i]); ++k)
      rep_labels.push_back(labels[i]), rep_preds.push_back(preds[i]);
  Metric weighted = metrics::auc();
  weighted->update_state(tensor<double>({1, 0, 1, 0, 1}), tensor<double>(preds), tensor<float>(w));
  EXPECT_NEAR(weighted->result(), naive_auc(rep_labels, rep_preds, 200), 1e-12);
  EXPECT_NE(weighted->result(), naive_auc(labels, preds, 200));
  // Negative or wrongly shaped weights are errors.
  expect_error(
      [&] {
        acc->update_state(tensor<int64_t>({0}), tensor<float>({1, 0}, {1, 2}), tensor<float>({-1}));
      },
      {"weights must be >= 0"});
  expect_error(
      [&] {
        acc->update_state(tensor<int64_t>({0}), tensor<float>({1, 0}, {1, 2}),
                          tensor<float>({1, 1}));
      },
      {"sample_weight has shape (2,)"});
}

}  // namespace
}  // namespace kiln
