// The eager training loop: the digits MLP reaches the accuracy bar, runs are reproducible,
// and fit/evaluate/predict/train_on_batch report what they should.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

using ::kiln::test::error_of;

Sequential digits_mlp(uint64_t seed) {
  clear_session();
  set_random_seed(seed);
  Sequential m({Dense(128, {.activation = "relu"}), Dense(10)}, Shape{64});
  m->compile({.optimizer = Adam({.learning_rate = 1e-3}),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"}});
  return m;
}

TEST(Fit, DigitsMlpReachesTheAccuracyBar) {
  auto [train, test] = data::train_test_split(data::load_digits(), 0.2, 0);
  Sequential m = digits_mlp(0);
  auto history = m->fit(train.x, train.y, {.batch_size = 32, .epochs = 20, .verbose = 0});
  ASSERT_EQ(history->history.at("loss").size(), 20u);
  EXPECT_LT(history->history.at("loss").back(), history->history.at("loss").front());
  Logs result = m->evaluate(test.x, test.y, {.verbose = 0});
  EXPECT_GE(result.at("accuracy"), 0.95);
  // Accuracy computed independently from predict agrees with evaluate's metric.
  Tensor logits = m->predict(test.x);
  Tensor hits = equal(argmax(logits, -1), test.y);
  EXPECT_NEAR(mean(cast(hits, DType::f64)).item<double>(), result.at("accuracy"), 1e-9);
}

TEST(Fit, IsReproducibleForASeed) {
  auto [train, test] = data::train_test_split(data::load_digits(), 0.2, 0);
  auto run = [&](uint64_t seed) {
    Sequential m = digits_mlp(seed);
    return m->fit(train.x, train.y, {.epochs = 2, .verbose = 0, .seed = seed})->history.at("loss");
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

TEST(Fit, ValidationSplitAddsValMetrics) {
  data::Examples d = data::load_digits();
  Sequential m = digits_mlp(1);
  auto h = m->fit(d.x, d.y, {.epochs = 2, .verbose = 0, .validation_split = 0.25});
  for (const char* k : {"loss", "accuracy", "val_loss", "val_accuracy"})
    EXPECT_EQ(h->history.at(k).size(), 2u) << k;
  EXPECT_EQ(h->epoch, (std::vector<int>{0, 1}));
  EXPECT_THAT(error_of([&] { m->fit(d.x, d.y, {.validation_split = 1.5}); }),
              HasSubstr("validation_split"));
}

TEST(Fit, TrainOnBatchLowersTheLoss) {
  data::Examples d = data::load_digits();
  Tensor x = data::take_rows(d.x, data::permutation(64, 0));
  Tensor y = data::take_rows(d.y, data::permutation(64, 0));
  Sequential m = digits_mlp(2);
  double first = m->train_on_batch(x, y).at("loss");
  for (int i = 0; i < 20; ++i) m->train_on_batch(x, y);
  EXPECT_LT(m->test_on_batch(x, y).at("loss"), first);
}

TEST(Fit, RegularizationLossesAreAdded) {
  data::Examples d = data::load_digits();
  clear_session();
  set_random_seed(5);
  Sequential m({Dense(10, {.kernel_regularizer = regularizers::l2(0.5)})}, Shape{64});
  m->compile({.optimizer = SGD({.learning_rate = 0.0}),
              .loss = losses::sparse_categorical_crossentropy(true)});
  Logs logs = m->test_on_batch(d.x, d.y);
  Tensor kernel = m->weights()[0].value();
  Tensor plain =
      losses::sparse_categorical_crossentropy(true)(d.y, m->predict(d.x, {.batch_size = 2000}));
  double l2 = 0.5 * sum(square(kernel)).item<double>();
  EXPECT_NEAR(logs.at("loss"), plain.item<double>() + l2, 1e-4);
}

TEST(Fit, ErrorsAreClear) {
  Sequential m({Dense(2)}, Shape{3});
  EXPECT_THAT(error_of([&] {
                m->fit(ones({4, 3}), zeros({4}, DType::i64));
              }),
              HasSubstr("must be compiled before training"));
  m->compile({.loss = "mse"});
  EXPECT_THAT(error_of([&] {
                m->fit(ones({4, 3}), zeros({5, 2}));
              }),
              HasSubstr("must have the same number of examples"));
  EXPECT_THAT(error_of([&] { m->predict(zeros({0, 3})); }), HasSubstr("no examples"));
}

}  // namespace
}  // namespace kiln
