// fit(x, y, steps_per_epoch) on tensors (Keras 3's EpochIterator on arrays): each epoch takes
// steps_per_epoch batches of a pass that continues across epochs; an epoch that reaches the
// end of the pass is short (with a warning) and the next starts a new pass. Checked against
// train_on_batch on the batches that schedule names, against resuming with initial_epoch, and
// for its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"
#include "tests/support/weights_of.h"

namespace kiln {
namespace {

using test::error_of;
using ::testing::HasSubstr;

struct EpochToy {  // 10 examples: 5 batches of 2 per pass
  Tensor x = random_uniform({10, 3}, 1, -1, 1);
  Tensor y = random_integers({10}, 2, 0, 2);
};

Sequential epoch_toy_model() {
  clear_session();
  set_random_seed(5);
  Sequential m({Dense(4, {.activation = "tanh"}), Dense(2)}, Shape{3});
  m->compile({.optimizer = SGD({.learning_rate = 0.3}),
              .loss = losses::sparse_categorical_crossentropy(true)});
  return m;
}

using test::weights_of;

// Counts the training batches of each epoch.
struct BatchCounter : Callback {
  std::vector<int> per_epoch;
  void on_epoch_begin(int, const Logs&) override { per_epoch.push_back(0); }
  void on_train_batch_end(int, const Logs&) override { ++per_epoch.back(); }
};

struct WarningCapture {
  std::vector<std::string> messages;
  LogSink previous;
  WarningCapture() {
    previous = set_log_sink([this](LogLevel level, std::string_view m) {
      if (level == LogLevel::kWarning) messages.emplace_back(m);
    });
  }
  ~WarningCapture() { set_log_sink(previous); }
};

TEST(StepsPerEpoch, EpochsContinueOnePassAndTheShortEpochWarns) {
  EpochToy d;
  Sequential fitted = epoch_toy_model();
  auto counter = std::make_shared<BatchCounter>();
  WarningCapture warnings;
  fitted->fit(d.x, d.y,
              {.batch_size = 2,
               .epochs = 4,
               .verbose = 0,
               .callbacks = {counter},
               .shuffle = false,
               .steps_per_epoch = 2});
  // 5 batches per pass: epochs take batches {0, 1}, {2, 3}, {4} (the pass ends) and {0, 1} of
  // the next pass.
  EXPECT_EQ(counter->per_epoch, (std::vector<int>{2, 2, 1, 2}));
  ASSERT_EQ(warnings.messages.size(), 1u);
  EXPECT_THAT(warnings.messages[0], HasSubstr("ran out after 1 of steps_per_epoch=2 batches of "
                                              "epoch 3"));

  // The same updates, batch by batch.
  Sequential by_hand = epoch_toy_model();
  for (int64_t b : {0, 1, 2, 3, 4, 0, 1}) {
    Tensor rows = tensor<int64_t>({2 * b, 2 * b + 1});
    by_hand->train_on_batch(gather(d.x, rows, 0), gather(d.y, rows, 0));
  }
  EXPECT_EQ(weights_of(fitted), weights_of(by_hand));
}

TEST(StepsPerEpoch, ResumingWithInitialEpochEqualsOneRun) {
  EpochToy d;
  WarningCapture warnings;  // epochs 2 and 4 are short (5 batches per pass, 3 per epoch)
  FitOptions o{.batch_size = 2, .epochs = 5, .verbose = 0, .seed = 3, .steps_per_epoch = 3};
  Sequential whole = epoch_toy_model();
  auto hw = whole->fit(d.x, d.y, o);
  Sequential resumed = epoch_toy_model();
  FitOptions first = o;
  first.epochs = 2;
  auto h1 = resumed->fit(d.x, d.y, first);
  FitOptions rest = o;
  rest.initial_epoch = 2;
  auto h2 = resumed->fit(d.x, d.y, rest);
  EXPECT_EQ(weights_of(whole), weights_of(resumed));
  std::vector<double> losses = h1->history.at("loss");
  for (double l : h2->history.at("loss")) losses.push_back(l);
  EXPECT_EQ(losses, hw->history.at("loss"));
  // A shuffled pass differs from the unshuffled one (the schedule shuffles per pass).
  Sequential unshuffled = epoch_toy_model();
  FitOptions plain = o;
  plain.shuffle = false;
  unshuffled->fit(d.x, d.y, plain);
  EXPECT_NE(weights_of(whole), weights_of(unshuffled));
}

TEST(StepsPerEpoch, BadValuesAreClearErrors) {
  EpochToy d;
  Sequential m = epoch_toy_model();
  for (int64_t steps : {int64_t(0), int64_t(-2)})
    EXPECT_THAT(error_of([&] { m->fit(d.x, d.y, {.verbose = 0, .steps_per_epoch = steps}); }),
                HasSubstr("steps_per_epoch must be at least 1"));
}

}  // namespace
}  // namespace kiln
