// Metrics on small hand-made batches: accumulation over batches, reset, label shapes, the
// by-name constructor, Keras' shape-based and loss-based choice of "accuracy", and errors.
#include "kiln/keras/training/metric.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/training/loss.h"
#include "tests/support/expect_error.h"

namespace kiln {
namespace {

using test::expect_error;

// Rows whose argmax is 1, 0, 1.
Tensor three_rows() { return tensor({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, {3, 2}); }

TEST(Metrics, SparseCategoricalAccuracyAccumulatesAndResets) {
  Metric m = metrics::sparse_categorical_accuracy();
  EXPECT_EQ(m->name(), "accuracy");
  EXPECT_EQ(m->result(), 0.0);  // no batch yet
  // Labels [1, 1, 1] vs argmax [1, 0, 1]: 2 of 3.
  m->update_state(tensor({1, 1, 1}), three_rows());
  EXPECT_DOUBLE_EQ(m->result(), 2.0 / 3.0);
  // One more right row ([0.6, 0.4] with label 0): 3 of 4.
  m->update_state(tensor<int64_t>({0}), tensor({0.6f, 0.4f}, {1, 2}));
  EXPECT_DOUBLE_EQ(m->result(), 0.75);
  m->reset_state();
  EXPECT_EQ(m->result(), 0.0);
  // Labels of shape (N, 1) and float labels are accepted: [0, 0, 1] vs [1, 0, 1] -> 2 of 3.
  m->update_state(tensor<int64_t>({0, 0, 1}, {3, 1}), three_rows());
  EXPECT_DOUBLE_EQ(m->result(), 2.0 / 3.0);
  m->update_state(tensor({1.f, 0.f, 1.f}), three_rows());  // all 3 right -> 5 of 6
  EXPECT_DOUBLE_EQ(m->result(), 5.0 / 6.0);
}

TEST(Metrics, CategoricalAccuracy) {
  // argmax(y_true) [1, 0] vs argmax(y_pred) [1, 1]: 1 of 2.
  Metric m = metrics::categorical_accuracy("cat");
  EXPECT_EQ(m->name(), "cat");
  m->update_state(tensor({0.f, 1.f, 1.f, 0.f}, {2, 2}), tensor({0.2f, 0.8f, 0.3f, 0.7f}, {2, 2}));
  EXPECT_DOUBLE_EQ(m->result(), 0.5);
}

TEST(Metrics, BinaryAccuracyWithThresholds) {
  Tensor y_true = tensor({1.f, 0.f, 1.f, 0.f});
  Tensor y_pred = tensor({0.7f, 0.2f, 0.4f, 0.6f});
  // threshold 0.5: predictions [1, 0, 0, 1] vs [1, 0, 1, 0] -> 2 of 4.
  Metric half = metrics::binary_accuracy();
  half->update_state(y_true, y_pred);
  EXPECT_DOUBLE_EQ(half->result(), 0.5);
  // threshold 0.3: predictions [1, 0, 1, 1] -> 3 of 4.
  Metric low = metrics::binary_accuracy("acc03", 0.3);
  low->update_state(y_true, y_pred);
  EXPECT_DOUBLE_EQ(low->result(), 0.75);
  // y_pred (N, 1) against y_true (N,), and integer labels.
  Metric m = metrics::binary_accuracy();
  m->update_state(tensor({1, 0, 1, 0}), reshape(y_pred, {4, 1}));
  EXPECT_DOUBLE_EQ(m->result(), 0.5);
}

TEST(Metrics, MeanCountsEveryElement) {
  // 1, 2, then [3, 4, 5]: (1 + 2 + 3 + 4 + 5) / 5 = 3.
  Metric m = metrics::mean("loss");
  EXPECT_EQ(m->name(), "loss");
  m->update_state(Tensor(), scalar(1.0));
  m->update_state(Tensor(), scalar(2.f));
  EXPECT_DOUBLE_EQ(m->result(), 1.5);
  m->update_state(Tensor(), tensor({3.0, 4.0, 5.0}));
  EXPECT_DOUBLE_EQ(m->result(), 3.0);
  m->reset_state();
  EXPECT_EQ(m->result(), 0.0);
}

TEST(Metrics, ByName) {
  Metric m("sparse_categorical_accuracy");
  EXPECT_EQ(m->name(), "sparse_categorical_accuracy");
  EXPECT_EQ(m.requested_name(), "sparse_categorical_accuracy");
  EXPECT_EQ(Metric("categorical_accuracy")->name(), "categorical_accuracy");
  EXPECT_EQ(Metric(std::string("binary_accuracy"))->name(), "binary_accuracy");
  expect_error([] { Metric("f1_score"); }, {"f1_score", "accuracy", "binary_accuracy", "auc"});
  expect_error([] { Metric()->result(); }, {"empty"});
}

TEST(Metrics, AccuracyByNamePicksTheKindFromShapesLikeKeras) {
  // Integer labels of lower rank: sparse categorical.
  Metric sparse("accuracy");
  EXPECT_EQ(sparse.requested_name(), "accuracy");
  EXPECT_EQ(sparse->name(), "accuracy");
  sparse->update_state(tensor({1, 1, 1}), three_rows());
  EXPECT_DOUBLE_EQ(sparse->result(), 2.0 / 3.0);
  // y_pred with one column: binary. [0.7, 0.2] vs [1, 1] -> 1 of 2.
  Metric binary("acc");
  EXPECT_EQ(binary->name(), "acc");
  binary->update_state(tensor({1.f, 1.f}, {2, 1}), tensor({0.7f, 0.2f}, {2, 1}));
  EXPECT_DOUBLE_EQ(binary->result(), 0.5);
  // One-hot labels: categorical. argmax [1, 0] vs [1, 1] -> 1 of 2.
  Metric categorical("accuracy");
  categorical->update_state(tensor({0.f, 1.f, 1.f, 0.f}, {2, 2}),
                            tensor({0.2f, 0.8f, 0.3f, 0.7f}, {2, 2}));
  EXPECT_DOUBLE_EQ(categorical->result(), 0.5);
  categorical->reset_state();
  EXPECT_EQ(categorical->result(), 0.0);
}

TEST(Metrics, ResolveMetricFollowsTheLoss) {
  // Binary crossentropy: "accuracy" becomes binary accuracy even on one-hot-looking shapes.
  // Elementwise (y_pred > 0.5) == (y_true > 0.5): [1, 1] vs [0, 1] and [0, 1] vs [1, 0] -> 1/4.
  Metric bin = resolve_metric(Metric("accuracy"), Loss("binary_crossentropy"));
  EXPECT_EQ(bin->name(), "accuracy");
  EXPECT_EQ(bin.requested_name(), "accuracy");
  bin->update_state(tensor({0.f, 1.f, 1.f, 0.f}, {2, 2}), tensor({0.6f, 0.8f, 0.3f, 0.7f}, {2, 2}));
  EXPECT_DOUBLE_EQ(bin->result(), 0.25);
  // Categorical crossentropy: argmax comparison on the same data -> [1, 1] vs [1, 0] -> 1/2.
  Metric cat = resolve_metric(Metric("acc"), losses::categorical_crossentropy(true));
  EXPECT_EQ(cat->name(), "acc");
  cat->update_state(tensor({0.f, 1.f, 1.f, 0.f}, {2, 2}), tensor({0.6f, 0.8f, 0.3f, 0.7f}, {2, 2}));
  EXPECT_DOUBLE_EQ(cat->result(), 0.5);
  // Sparse: integer labels.
  Metric sp = resolve_metric(Metric("accuracy"), Loss("sparse_categorical_crossentropy"));
  sp->update_state(tensor({1, 0, 1}), three_rows());
  EXPECT_DOUBLE_EQ(sp->result(), 1.0);
  // Other losses and explicitly chosen metrics are returned as they are.
  Metric a("accuracy");
  EXPECT_EQ(resolve_metric(a, Loss("mse")).operator->(), a.operator->());
  Metric b("binary_accuracy");
  EXPECT_EQ(resolve_metric(b, Loss("sparse_categorical_crossentropy")).operator->(),
            b.operator->());
  Metric c = metrics::sparse_categorical_accuracy();
  EXPECT_EQ(resolve_metric(c, Loss("binary_crossentropy")).operator->(), c.operator->());
}

TEST(Metrics, ShapeErrorsNameTheMetricAndShapes) {
  Metric m = metrics::sparse_categorical_accuracy("sca");
  expect_error([&] { m->update_state(tensor({1, 1}), three_rows()); }, {"sca", "(2,)", "(3, 2)"});
  Metric c = metrics::categorical_accuracy();
  expect_error([&] { c->update_state(zeros({3, 3}), three_rows()); }, {"(3, 3)", "(3, 2)"});
  Metric b = metrics::binary_accuracy("bin");
  expect_error([&] { b->update_state(zeros({3}), three_rows()); }, {"bin", "(3,)", "(3, 2)"});
  EXPECT_EQ(m->result(), 0.0);  // failed updates add nothing
}

}  // namespace
}  // namespace kiln
