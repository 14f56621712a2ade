// The pipeline feeding training: a plain train_on_batch loop over
// from_tensor_slices(x, y).shuffle(n, seed).batch(b) (prefetched or not) ends with the very
// weights the in-memory fit(x, y, {shuffle, seed}) reaches, epoch for pass; a generator that
// throws stops the loop with its error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"
#include "tests/support/weights_of.h"

namespace kiln {
namespace {

using data::Dataset;
using data::Element;
using ::kiln::test::error_of;
using ::testing::HasSubstr;

Sequential small_mlp(uint64_t seed) {
  clear_session();
  set_random_seed(seed);
  Sequential m({Dense(16, {.activation = "relu"}), Dense(10)}, Shape{64});
  m->compile({.optimizer = SGD({.learning_rate = 0.1}),
              .loss = losses::sparse_categorical_crossentropy(true),
              .run_eagerly = true});
  return m;
}

using test::weights_of;

// One epoch per pass: train_on_batch on every batch of pass `epoch`.
void train_loop(const Sequential& m, const Dataset& ds, int epochs) {
  for (int epoch = 0; epoch < epochs; ++epoch) {
    Dataset::Iterator it = ds.begin_pass(uint64_t(epoch));
    while (std::optional<Element> b = it.next())
      m->train_on_batch(b->x.tensors()[0], b->y.tensors()[0]);
  }
}

TEST(PipelineTraining, LoopMatchesTheInMemoryFitBitForBit) {
  data::Examples d = data::load_digits();
  const int64_t n = 100, batch = 32;  // 4 batches per epoch, the last of 4 examples
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(i);
  Tensor x = data::take_rows(d.x, rows), y = data::take_rows(d.y, rows);

  Sequential reference = small_mlp(3);
  reference->fit(x, y, {.batch_size = batch, .epochs = 3, .verbose = 0, .seed = 9});
  std::vector<std::vector<float>> expected = weights_of(reference);

  Dataset ds = Dataset::from_tensor_slices(x, y).shuffle(n, 9).batch(batch);
  for (const Dataset& pipeline : {ds, ds.prefetch(2)}) {
    Sequential m = small_mlp(3);
    train_loop(m, pipeline, 3);
    EXPECT_EQ(weights_of(m), expected);
  }
  // A small shuffle buffer gives other batches, hence other weights.
  Sequential other = small_mlp(3);
  train_loop(other, Dataset::from_tensor_slices(x, y).shuffle(8, 9).batch(batch), 3);
  EXPECT_NE(weights_of(other), expected);
}

TEST(PipelineTraining, AGeneratorThatThrowsStopsTheLoopWithItsError) {
  data::Examples d = data::load_digits();
  Dataset ds =
      Dataset::from_generator([&] {
        return [&, i = int64_t(0)]() mutable -> std::optional<Element> {
          if (i == 40) throw Error("generator: example 40 is corrupt");
          std::vector<int64_t> row{i++};
          return Element{reshape(data::take_rows(d.x, row), {64}), data::take_rows(d.y, row)};
        };
      })
          .prefetch(4)
          .batch(16);
  Sequential m = small_mlp(1);
  int steps = 0;
  EXPECT_THAT(error_of([&] {
                Dataset::Iterator it = ds.begin_pass(0);
                while (std::optional<Element> b = it.next()) {
                  m->train_on_batch(b->x.tensors()[0], squeeze(b->y.tensors()[0], {1}));
                  ++steps;
                }
              }),
              HasSubstr("generator: example 40 is corrupt"));
  EXPECT_EQ(steps, 2);  // batches of examples 0-15 and 16-31; 32-39 never became a batch
}

}  // namespace
}  // namespace kiln
