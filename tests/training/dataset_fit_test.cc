// fit / evaluate / predict on a data::Dataset: the same batches, weights and logs as the
// in-memory path for the same seed (bitwise), prefetch changes nothing, a throwing generator
// stops fit with its own error, steps_per_epoch over endless and short Datasets, validation
// Datasets, class weights, and bad options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

#include "kiln/kiln.h"
#include "tests/function/function_test_util.h"
#include "tests/support/error_of.h"
#include "tests/support/weights_of.h"

namespace kiln {
namespace {

using test::error_of;
using ::testing::HasSubstr;

struct Toy {
  Tensor x = random_uniform({23, 4}, 1, -1, 1);
  Tensor y = random_integers({23}, 2, 0, 3);
  Tensor w = random_uniform({23}, 3, 0, 2);
};

Sequential toy_model(bool eager) {
  clear_session();
  set_random_seed(7);
  Sequential m({Dense(8, {.activation = "relu"}), Dense(3)}, Shape{4});
  m->compile({.optimizer = SGD({.learning_rate = 0.2}),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"},
              .weighted_metrics = {metrics::sparse_categorical_accuracy("wacc")},
              .run_eagerly = eager});
  return m;
}

using test::weights_of;

TEST(DatasetFit, SameBatchesWeightsAndLogsAsTheInMemoryPath) {
  Toy d;
  const std::map<int64_t, double> cw{{0, 2.0}, {2, 0.5}};
  for (bool eager : {true, false}) {
    SCOPED_TRACE(eager ? "eager" : "traced");
    ScopedExecutionMode reference(ExecutionMode::kReference);
    Sequential arrays = toy_model(eager);
    auto ha = arrays->fit(d.x, d.y,
                          {.batch_size = 5,
                           .epochs = 3,
                           .verbose = 0,
                           .seed = 9,
                           .sample_weight = d.w,
                           .class_weight = cw});
    for (bool prefetch : {false, true}) {
      SCOPED_TRACE(prefetch ? "prefetch" : "no prefetch");
      Sequential streamed = toy_model(eager);
      data::Dataset ds = data::Dataset::from_tensor_slices(d.x, d.y, d.w).shuffle(23, 9).batch(5);
      if (prefetch) ds = ds.prefetch(2);
      auto hs = streamed->fit(ds, {.epochs = 3, .verbose = 0, .class_weight = cw});
      EXPECT_EQ(ha->history, hs->history);
      EXPECT_EQ(weights_of(arrays), weights_of(streamed));
    }
  }
}

TEST(DatasetFit, EvaluateAndPredictMatchTheInMemoryPath) {
  Toy d;
  Sequential m = toy_model(false);
  data::Dataset ds = data::Dataset::from_tensor_slices(d.x, d.y).batch(6);
  EXPECT_EQ(m->evaluate(ds, {.verbose = 0}),
            m->evaluate(d.x, d.y, {.batch_size = 6, .verbose = 0}));
  EXPECT_EQ(m->predict(ds).to_vector<float>(),
            m->predict(d.x, {.batch_size = 6}).to_vector<float>());
  // Validation from a Dataset gives the same val_ logs as from tensors (batched alike).
  Sequential a = toy_model(false), b = toy_model(false);
  auto ha = a->fit(
      d.x, d.y,
      {.batch_size = 5, .epochs = 2, .verbose = 0, .validation_data = std::make_pair(d.x, d.y)});
  auto hb = b->fit(d.x, d.y,
                   {.batch_size = 5,
                    .epochs = 2,
                    .verbose = 0,
                    .validation_data = data::Dataset::from_tensor_slices(d.x, d.y).batch(5)});
  EXPECT_EQ(ha->history.at("val_loss"), hb->history.at("val_loss"));
  EXPECT_EQ(ha->history.at("val_accuracy"), hb->history.at("val_accuracy"));
}

TEST(DatasetFit, AGeneratorThatThrowsStopsFitWithItsError) {
  Toy d;
  Sequential m = toy_model(false);
  data::Dataset ds = data::Dataset::from_generator([&d] {
    auto i = std::make_shared<int64_t>(0);
    return [&d, i]() -> std::optional<data::Element> {
      if (*i == 3) throw std::runtime_error("disk on fire at batch 3");
      std::vector<int64_t> rows{*i * 4, *i * 4 + 1, *i * 4 + 2, *i * 4 + 3};
      ++*i;
      return data::Element{data::take_rows(d.x, rows), data::take_rows(d.y, rows)};
    };
  });
  struct BatchCounter : Callback {
    int batches = 0;
    void on_train_batch_end(int, const Logs&) override { ++batches; }
  };
  for (data::Dataset source : {ds, ds.prefetch(2)}) {
    auto counter = std::make_shared<BatchCounter>();
    try {
      m->fit(source, {.epochs = 2, .verbose = 0, .callbacks = {counter}});
      ADD_FAILURE() << "fit did not stop";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "disk on fire at batch 3");
    }
    EXPECT_EQ(counter->batches, 3);
  }
}

TEST(DatasetFit, StepsPerEpochOverEndlessAndShortDatasets) {
  Toy d;
  Sequential m = toy_model(false);
  data::Dataset endless = data::Dataset::from_tensor_slices(d.x, d.y).batch(5).repeat();
  EXPECT_THAT(error_of([&] { m->fit(endless, {.epochs = 1, .verbose = 0}); }),
              HasSubstr("the Dataset is endless"));
  auto h = m->fit(endless, {.epochs = 4, .verbose = 0, .steps_per_epoch = 7});
  EXPECT_EQ(h->history.at("loss").size(), 4u);
  // 5 batches in all (23 rows by 5) cannot feed 2 epochs of 3: a warning, then training stops.
  test::WarningCapture warnings;
  data::Dataset short_ds = data::Dataset::from_tensor_slices(d.x, d.y).batch(5);
  auto hs = m->fit(short_ds, {.epochs = 3, .verbose = 0, .steps_per_epoch = 3});
  EXPECT_EQ(hs->history.at("loss").size(), 2u);
  ASSERT_EQ(warnings.warnings().size(), 1u);
  EXPECT_THAT(warnings.warnings()[0], HasSubstr("ran out of data after 2 of 3 batches of epoch 2"));
}

TEST(DatasetFit, SeveralInputsAndOutputsByName) {
  clear_session();
  set_random_seed(4);
  Tensor a = Input({2}, DType::f32, "a"), b = Input({3}, DType::f32, "b");
  Model m({a, b}, {Dense(1, {.name = "u"})(a), Dense(2, {.name = "v"})(Concatenate()({a, b}))});
  m->compile({.optimizer = "sgd", .loss = "mse", .loss_weights = {1.0, 3.0}});
  Tensor xa = random_uniform({12, 2}, 1), xb = random_uniform({12, 3}, 2),
         yu = random_uniform({12, 1}, 3), yv = random_uniform({12, 2}, 4);
  data::Dataset ds = data::Dataset::from_tensor_slices(Arrays::by_name({{"a", xa}, {"b", xb}}),
                                                       Arrays::by_name({{"u", yu}, {"v", yv}}))
                         .batch(4);
  Logs via_dataset = m->evaluate(ds, {.verbose = 0});
  Logs via_arrays = m->evaluate({xa, xb}, {yu, yv}, {.batch_size = 4, .verbose = 0});
  EXPECT_EQ(via_dataset, via_arrays);
  EXPECT_EQ(via_dataset.count("v_loss"), 1u);
  EXPECT_EQ(m->predict_outputs(ds).size(), 2u);
}

TEST(DatasetFit, BadOptionsAreClearErrors) {
  Toy d;
  Sequential m = toy_model(false);
  data::Dataset ds = data::Dataset::from_tensor_slices(d.x, d.y).batch(5);
  EXPECT_THAT(error_of([&] { m->fit(ds, {.verbose = 0, .validation_split = 0.2}); }),
              HasSubstr("validation_split (0.2) needs tensors"));
  EXPECT_THAT(error_of([&] { m->fit(ds, {.verbose = 0, .sample_weight = d.w}); }),
              HasSubstr("put the weights in its elements"));
  EXPECT_THAT(error_of([&] { m->fit(ds, {.verbose = 0, .steps_per_epoch = 0}); }),
              HasSubstr("at least 1"));
  data::Dataset no_targets = data::Dataset::from_tensor_slices(d.x).batch(5);
  EXPECT_THAT(error_of([&] { m->fit(no_targets, {.verbose = 0}); }),
              HasSubstr("elements have no targets"));
}

}  // namespace
}  // namespace kiln
