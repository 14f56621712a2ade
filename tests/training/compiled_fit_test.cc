// Compiled training (the default: run_eagerly=false, concrete functions JIT-compiled) against
// the same steps on the reference executor: losses, metrics and every weight agree step after
// step, for the digits MLP (Adam, SGD, RMSprop), a small CNN and causal self-attention, within
// what float32 rounding can explain: the bound of each number is derived from the spread of the
// same training run repeated on the reference executor under the rounding model
// (tests/support/rounding_model.h, every op's result moved by one correct rounding's worth), so
// it holds on every CPU whatever vector widths, FMA contraction and summation orders the
// compiled kernels use there.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "kiln/kiln.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/support/rounding_spread.h"

namespace kiln {
namespace {

// `adam_learning_rate`: an Adam with that rate instead of the named optimizer's defaults.
Sequential digits_model(const std::string& kind, const std::string& optimizer,
                        double adam_learning_rate = 0) {
  clear_session();
  set_random_seed(5);
  Sequential m =
      kind == "mlp" ? Sequential({Dense(128, {.activation = "relu"}), Dense(10)}, Shape{64})
      : kind == "attention"
          // 8 positions of 8 features through causal self-attention (the fused attention op)
          ? Sequential({Reshape({8, 8}), LayerNormalization(),
                        MultiHeadAttention(2, 4, {.use_causal_mask = true}), Flatten(), Dense(10)},
                       Shape{64})
          : Sequential(
                {Reshape({8, 8, 1}), Conv2D(8, {3, 3}, {.padding = "same", .activation = "relu"}),
                 MaxPooling2D({2, 2}), Flatten(), Dense(10)},
                Shape{64});
  m->compile({.optimizer = adam_learning_rate > 0 ? Adam({.learning_rate = adam_learning_rate})
                                                  : Optimizer(optimizer),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"}});
  return m;
}

// One training run: the loss and accuracy after each step and the final weights.
struct Trajectory {
  std::vector<double> losses, accuracies;
  std::vector<std::vector<float>> weights;
};

// Trains `steps` batches of the digits in `mode`; with `seed`, on the reference executor under
// the rounding model seeded with it.
Trajectory train(const std::string& kind, const std::string& opt, int steps, ExecutionMode mode,
                 std::optional<uint64_t> seed = std::nullopt, double adam_learning_rate = 0) {
  static const data::Examples d = data::load_digits();
  Sequential m = digits_model(kind, opt, adam_learning_rate);
  testing::ScopedRoundingModel rounding(seed);
  ScopedExecutionMode scoped(mode);
  Trajectory t;
  for (int step = 0; step < steps; ++step) {
    int64_t n = step == steps - 1 ? 17 : 64;  // the last batch is a second shape
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < n; ++i) rows.push_back(step * 64 + i);
    Logs logs = m->train_on_batch(data::take_rows(d.x, rows), data::take_rows(d.y, rows));
    t.losses.push_back(logs.at("loss"));
    t.accuracies.push_back(logs.at("accuracy"));
  }
  for (const Tensor& w : m->get_weights()) t.weights.push_back(w.to_vector<float>());
  return t;
}

// Every number of the compiled run is within 8 times the rms spread of the rounding-model runs
// around the reference run, plus 2 float32 roundings of its own magnitude (accuracies: within
// the largest change a rounding-model run showed). "" or the first number that is not.
std::string outside_rounding_spread(const Trajectory& compiled, const Trajectory& reference,
                                    const std::vector<Trajectory>& samples) {
  auto check = [&](double got, double want, auto sample_value, const std::string& what) {
    std::vector<double> values;
    for (const Trajectory& s : samples) values.push_back(sample_value(s));
    double bound = testing::rounding_spread_bound(want, values);
    if (std::abs(got - want) <= bound) return std::string();
    return what + ": compiled " + std::to_string(got) + ", reference " + std::to_string(want) +
           ", error " + std::to_string(std::abs(got - want)) + " > bound " + std::to_string(bound) +
           " (" + std::to_string(samples.size()) + " samples)";
  };
  for (size_t k = 0; k < reference.losses.size(); ++k) {
    std::string e = check(
        compiled.losses[k], reference.losses[k], [&](const Trajectory& s) { return s.losses[k]; },
        "loss of step " + std::to_string(k));
    if (!e.empty()) return e;
    double worst = 0;
    for (const Trajectory& s : samples)
      worst = std::max(worst, std::abs(s.accuracies[k] - reference.accuracies[k]));
    if (std::abs(compiled.accuracies[k] - reference.accuracies[k]) > worst)
      return "accuracy of step " + std::to_string(k) + ": compiled " +
             std::to_string(compiled.accuracies[k]) + ", reference " +
             std::to_string(reference.accuracies[k]);
  }
  if (compiled.weights.size() != reference.weights.size()) return "a different number of weights";
  for (size_t w = 0; w < reference.weights.size(); ++w)
    for (size_t i = 0; i < reference.weights[w].size(); ++i) {
      std::string e = check(
          compiled.weights[w][i], reference.weights[w][i],
          [&](const Trajectory& s) { return double(s.weights[w][i]); },
          "weight " + std::to_string(w) + " element " + std::to_string(i));
      if (!e.empty()) return e;
    }
  return "";
}

// Compiled against reference training; 4 rounding-model runs first, 16 before a failure is
// reported (a bound that came out small by chance is not a failure).
void train_both(const std::string& kind, const std::string& opt, int steps) {
  Trajectory reference = train(kind, opt, steps, ExecutionMode::kReference);
  Trajectory compiled = train(kind, opt, steps, ExecutionMode::kCompiled);
  std::vector<Trajectory> samples;
  std::string failure = "not checked";
  while (!failure.empty() && samples.size() < 16) {
    size_t target = samples.empty() ? 4 : 16;
    while (samples.size() < target)
      samples.push_back(train(kind, opt, steps, ExecutionMode::kReference, samples.size() + 1));
    failure = outside_rounding_spread(compiled, reference, samples);
  }
  EXPECT_EQ(failure, "");
  // The rounding model reached the reference executor (a spread of 0 would demand bitwise
  // equality and hide nothing, but it would mean the samples were not perturbed at all).
  EXPECT_NE(samples[0].weights, reference.weights);
}

TEST(CompiledFit, DigitsMlpMatchesReferenceExecutor) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  for (const char* opt : {"adam", "sgd", "rmsprop"}) {
    SCOPED_TRACE(opt);
    train_both("mlp", opt, 6);
  }
}

// The bound catches a real difference: a compiled step whose Adam learning rate is off by
// 1e-4 relative (as a kernel with a wrong constant would be) is outside it.
TEST(CompiledFit, AWrongConstantIsOutsideTheRoundingSpread) {
  Trajectory reference = train("mlp", "adam", 6, ExecutionMode::kReference);
  Trajectory wrong = train("mlp", "adam", 6, ExecutionMode::kCompiled, std::nullopt, 1.0001e-3);
  std::vector<Trajectory> samples;
  for (uint64_t s = 1; s <= 16; ++s)
    samples.push_back(train("mlp", "adam", 6, ExecutionMode::kReference, s));
  EXPECT_NE(outside_rounding_spread(wrong, reference, samples), "");
  Trajectory right = train("mlp", "adam", 6, ExecutionMode::kCompiled, std::nullopt, 1e-3);
  EXPECT_EQ(outside_rounding_spread(right, reference, samples), "");
}

TEST(CompiledFit, SmallCnnMatchesReferenceExecutor) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  train_both("cnn", "adam", 4);
}

// The fused attention op and its gradient inside a compiled training step (the rounding model
// moves them as their unfused ops would be moved: tests/support/attention_decomposed.h).
TEST(CompiledFit, CausalSelfAttentionMatchesReferenceExecutor) {
  train_both("attention", "adam", 6);
}

TEST(CompiledFit, TrainStepCompilesOncePerBatchShape) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  Sequential m = digits_model("mlp", "adam");
  data::Examples d = data::load_digits();
  Tensor x = data::take_rows(d.x, {0, 1, 2, 3}), y = data::take_rows(d.y, {0, 1, 2, 3});
  m->train_on_batch(x, y);
  m->train_on_batch(x, y);
  ConcreteFunction step = m->train_step_function(x, y);
  EXPECT_EQ(step.mode(), ExecutionMode::kCompiled);
  EXPECT_EQ(step.compile_stats().executables, 1);
  EXPECT_GT(step.compile_stats().compile_seconds, 0.0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CompiledExecutable, TrainingStepAllocatesNothingAfterTheFirstCall) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  Sequential m = digits_model("mlp", "adam");
  data::Examples d = data::load_digits();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 64; ++i) rows.push_back(i);
  Tensor x = data::take_rows(d.x, rows), y = data::take_rows(d.y, rows);
  ConcreteFunction step = m->train_step_function(x, y);
  step({x, y});  // compiles; allocates the arena and the pooled buffers
  const int64_t before = runtime::Storage::allocation_count();
  for (int i = 0; i < 5; ++i) step({x, y});
  EXPECT_EQ(runtime::Storage::allocation_count() - before, 0);
}

TEST(CompiledExecutable, OneAndTwoThreadsGiveIdenticalResults) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  const int saved = num_threads();
  std::vector<std::vector<float>> weights[2];
  for (int t : {1, 2}) {
    set_num_threads(t);
    Sequential m = digits_model("cnn", "adam");
    data::Examples d = data::load_digits();
    for (int step = 0; step < 3; ++step) {
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < 64; ++i) rows.push_back(step * 64 + i);
      m->train_on_batch(data::take_rows(d.x, rows), data::take_rows(d.y, rows));
    }
    for (const Tensor& w : m->get_weights()) weights[t - 1].push_back(w.to_vector<float>());
  }
  set_num_threads(saved);
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (size_t i = 0; i < weights[0].size(); ++i) EXPECT_EQ(weights[0][i], weights[1][i]) << i;
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The first kernel weight of a digits MLP, trained one compiled step at a time.
struct InPlaceFixture {
  Sequential m = digits_model("mlp", "adam");
  Tensor x, y;
  InPlaceFixture() {
    data::Examples d = data::load_digits();
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < 64; ++i) rows.push_back(i);
    x = data::take_rows(d.x, rows);
    y = data::take_rows(d.y, rows);
  }
  Variable kernel() const { return m->trainable_weights().front(); }
};

TEST(CompiledExecutable, TrainingStepUpdatesWeightsInPlace) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  InPlaceFixture f;
  f.m->train_on_batch(f.x, f.y);  // compiles; the weights now live in their final buffers
  // Kernels (flat Adam epilogues of the weight gradients) and biases (serial kernels that also
  // sum the bias gradient over the batch) alike.
  std::vector<const float*> buffers;
  std::vector<std::vector<float>> before;
  for (const Variable& w : f.m->trainable_weights()) {
    buffers.push_back(w.value().data<float>());
    before.push_back(w.value().to_vector<float>());
  }
  f.m->train_on_batch(f.x, f.y);
  std::vector<Variable> weights = f.m->trainable_weights();
  ASSERT_EQ(weights.size(), 4u);
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_EQ(weights[i].value().data<float>(), buffers[i]) << weights[i].name();
    EXPECT_NE(weights[i].value().to_vector<float>(), before[i]) << weights[i].name();
  }
}

TEST(CompiledExecutable, AHeldWeightValueIsNotOverwritten) {
  ScopedExecutionMode compiled(ExecutionMode::kCompiled);
  InPlaceFixture f;
  f.m->train_on_batch(f.x, f.y);
  Tensor held = f.kernel().value();  // shares the weight's buffer: the step must copy
  const std::vector<float> before = held.to_vector<float>();
  f.m->train_on_batch(f.x, f.y);
  EXPECT_EQ(held.to_vector<float>(), before);
  EXPECT_NE(f.kernel().value().data<float>(), held.data<float>());
  EXPECT_NE(f.kernel().value().to_vector<float>(), before);
}

}  // namespace
}  // namespace kiln
