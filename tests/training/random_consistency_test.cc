// The same random numbers eagerly and compiled (issue 20): a model with Dropout, built twice
// from the same global seed and trained with fit (shuffled, several epochs) eagerly
// (run_eagerly) and traced, ends with bitwise-equal weights when the traced steps run on the
// reference executor (the same kernels in the same order, and the same dropout masks: the
// layers' seed generators are variables the traced step reads and advances as the eager step
// does), and within what float32 rounding explains when they are JIT-compiled. For an LSTM
// with dropout and recurrent_dropout, the same masks, and weights within rounding (its traced
// step sums the input projection's gradients in another order).
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/support/rounding_spread.h"

namespace kiln {
namespace {

// Digits MLP with two Dropout layers (one batch shape of 64 and a last batch of 44 per epoch).
Sequential dropout_mlp(bool run_eagerly) {
  clear_session();
  set_random_seed(21);
  Sequential m({Dense(32, {.activation = "relu"}), Dropout(0.3), Dense(16, {.activation = "relu"}),
                Dropout(0.2), Dense(10)},
               Shape{64});
  m->compile({.optimizer = "adam",
              .loss = losses::sparse_categorical_crossentropy(true),
              .run_eagerly = run_eagerly});
  return m;
}

data::Examples digits_subset() {
  static const data::Examples d = data::load_digits();
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < 300; ++i) rows.push_back(i);
  return data::take(d, rows);
}

// An LSTM with input and recurrent dropout on a seeded regression (the mean of each sequence).
Sequential dropout_lstm(bool run_eagerly) {
  clear_session();
  set_random_seed(22);
  Sequential m({LSTM(8, {.dropout = 0.25, .recurrent_dropout = 0.25}), Dense(1)}, Shape{6, 3});
  m->compile({.optimizer = "adam", .loss = "mse", .run_eagerly = run_eagerly});
  return m;
}

data::Examples sequence_means() {
  Tensor x = random_normal({80, 6, 3}, 31);
  return {x, reshape(mean(x, {1, 2}), {80, 1})};
}

struct FitCase {
  std::function<Sequential(bool)> model;
  std::function<data::Examples()> data;
  FitOptions fit;
};

FitCase mlp_case() {
  return {dropout_mlp, digits_subset,
          FitOptions{.batch_size = 64, .epochs = 3, .verbose = 0, .shuffle = true, .seed = 4}};
}
FitCase lstm_case() {
  return {dropout_lstm, sequence_means,
          FitOptions{.batch_size = 32, .epochs = 3, .verbose = 0, .shuffle = true, .seed = 5}};
}

// One fit: the logged losses, the final weights and the seed generators' states (before and
// after).
struct FitResult {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  std::vector<int64_t> states_before, states_after;
};

std::vector<int64_t> seed_states(const Sequential& m) {
  std::vector<int64_t> out;
  for (const Variable& v : m->variables())
    if (v.name().ends_with("/seed_generator_state")) out.push_back(v.value().item<int64_t>());
  return out;
}

// Trains eagerly or traced in `mode`; with `rounding_seed`, the reference executor runs under
// the rounding model seeded with it.
FitResult fit_run(const FitCase& s, bool run_eagerly, ExecutionMode mode,
                  std::optional<uint64_t> rounding_seed = std::nullopt) {
  data::Examples d = s.data();
  Sequential m = s.model(run_eagerly);
  testing::ScopedRoundingModel rounding(rounding_seed);
  ScopedExecutionMode scoped(mode);
  FitResult r;
  r.states_before = seed_states(m);
  auto history = m->fit(d.x, d.y, s.fit);
  r.losses = history->history.at("loss");
  for (const Tensor& w : m->get_weights()) r.weights.push_back(w.to_vector<float>());
  r.states_after = seed_states(m);
  return r;
}

// Every state advanced once per draw: `draws_per_step` per train step, over all steps.
void expect_states_advanced(const FitResult& r, const FitCase& s, int64_t examples,
                            int draws_per_step) {
  const int64_t steps = s.fit.epochs * ((examples + s.fit.batch_size - 1) / s.fit.batch_size);
  ASSERT_EQ(r.states_before.size(), r.states_after.size());
  ASSERT_FALSE(r.states_before.empty());
  int64_t total = 0;
  for (size_t i = 0; i < r.states_before.size(); ++i)
    total += r.states_after[i] - r.states_before[i];
  EXPECT_EQ(total, steps * draws_per_step);
}

void expect_fits_bitwise_equal(const FitResult& eager, const FitResult& traced) {
  EXPECT_EQ(eager.states_before, traced.states_before);
  EXPECT_EQ(eager.states_after, traced.states_after);
  EXPECT_EQ(eager.losses, traced.losses);
  ASSERT_EQ(eager.weights.size(), traced.weights.size());
  for (size_t i = 0; i < eager.weights.size(); ++i)
    EXPECT_EQ(eager.weights[i], traced.weights[i]) << "weight " << i;
}

// "" or the first final weight of `got` outside the rounding spread of the rounding-model runs
// `samples` around `want` (tests/support/rounding_spread.h).
std::string fit_outside_rounding_spread(const FitResult& got, const FitResult& want,
                                        const std::vector<FitResult>& samples) {
  if (got.weights.size() != want.weights.size()) return "a different number of weights";
  std::vector<double> s(samples.size());
  for (size_t w = 0; w < want.weights.size(); ++w)
    for (size_t i = 0; i < want.weights[w].size(); ++i) {
      for (size_t k = 0; k < samples.size(); ++k) s[k] = samples[k].weights[w][i];
      double bound = testing::rounding_spread_bound(want.weights[w][i], s);
      double error = std::abs(double(got.weights[w][i]) - double(want.weights[w][i]));
      if (!(error <= bound))
        return "weight " + std::to_string(w) + " element " + std::to_string(i) + ": " +
               std::to_string(got.weights[w][i]) + " vs " + std::to_string(want.weights[w][i]) +
               ", error " + std::to_string(error) + " > bound " + std::to_string(bound) + " (" +
               std::to_string(samples.size()) + " samples)";
    }
  return "";
}

// `got` against the unperturbed reference fit: within the spread of 4 rounding-model fits, or
// of 16 before a failure is reported (a bound that came out small by chance is not a failure).
void expect_within_rounding_spread(const FitCase& s, const FitResult& got,
                                   const FitResult& reference) {
  std::vector<FitResult> samples;
  std::string failure = "not checked";
  while (!failure.empty() && samples.size() < 16) {
    size_t target = samples.empty() ? 4 : 16;
    while (samples.size() < target)
      samples.push_back(fit_run(s, false, ExecutionMode::kReference, samples.size() + 1));
    failure = fit_outside_rounding_spread(got, reference, samples);
  }
  EXPECT_EQ(failure, "");
  EXPECT_NE(samples[0].weights, reference.weights);  // the rounding model did perturb the runs
  // The masks do not depend on rounding: every run drew from the same states.
  for (const FitResult& r : samples) EXPECT_EQ(r.states_after, reference.states_after);
}

TEST(RandomConsistency, DropoutFitEagerAndTracedOnTheReferenceExecutorAreBitwiseEqual) {
  FitCase s = mlp_case();
  FitResult eager = fit_run(s, true, ExecutionMode::kReference);
  FitResult traced = fit_run(s, false, ExecutionMode::kReference);
  expect_states_advanced(eager, s, 300, 2);  // two Dropout layers, one draw each per step
  expect_fits_bitwise_equal(eager, traced);
  // The masks matter: a model whose dropout draws from other states trains to other weights.
  FitCase other = s;
  other.model = [](bool run_eagerly) {
    Sequential m = dropout_mlp(run_eagerly);
    for (Variable v : m->variables())
      if (v.name().ends_with("/seed_generator_state")) v.assign_add(scalar(1, DType::i64));
    return m;
  };
  EXPECT_NE(fit_run(other, false, ExecutionMode::kReference).weights, traced.weights);
}

// JIT-compiled steps: the same masks (the states end equal), and weights within the rounding
// spread of the reference fit. Kernels may round differently from the reference executor
// (vector widths, FMA contraction, summation order; docs/architecture.md), and over 15 Adam
// steps through ReLUs such differences grow by an amount no fixed epsilon describes; the
// rounding-model runs measure it for this very computation.
TEST(RandomConsistency, DropoutFitCompiledIsWithinRoundingOfTheReferenceFit) {
  FitCase s = mlp_case();
  FitResult reference = fit_run(s, false, ExecutionMode::kReference);
  FitResult compiled = fit_run(s, false, ExecutionMode::kCompiled);
  EXPECT_EQ(compiled.states_after, reference.states_after);
  expect_within_rounding_spread(s, compiled, reference);
}

TEST(RandomConsistency, LstmWithDropoutFitEagerAndTracedAgree) {
  FitCase s = lstm_case();
  FitResult eager = fit_run(s, true, ExecutionMode::kReference);
  FitResult traced = fit_run(s, false, ExecutionMode::kReference);
  expect_states_advanced(eager, s, 80, 2);  // the input and the recurrent mask per step
  // The same masks; the weights not bitwise: traced, the input projection of all steps is one
  // GEMM before the loop and the kernel's gradient one GEMM after it (recurrent.cc), summing
  // in another order than the eager per-step products.
  EXPECT_EQ(eager.states_before, traced.states_before);
  EXPECT_EQ(eager.states_after, traced.states_after);
  expect_within_rounding_spread(s, eager, traced);
  FitResult compiled = fit_run(s, false, ExecutionMode::kCompiled);
  EXPECT_EQ(compiled.states_after, traced.states_after);
  expect_within_rounding_spread(s, compiled, traced);
}

}  // namespace
}  // namespace kiln
