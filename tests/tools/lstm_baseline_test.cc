// The hand-written LSTM training step of `kiln bench` (bench/suite/rnn_baselines.h): its
// gradients against finite differences (float64), the float32 step against the float64 one on
// sizes where the GEMMs and row passes split over two threads, and training lowers its loss.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "bench/suite/baselines.h"
#include "bench/suite/rnn_baselines.h"
#include "tests/tools/gradient_check.h"

namespace kiln::bench {
namespace {

using testing::normal_values;

std::vector<int64_t> labels_for(const LstmStep<double>::Config& c) {
  std::vector<int64_t> labels(size_t(c.batch));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int64_t(i * 7 % size_t(c.classes));
  return labels;
}

TEST(LstmBaseline, GradientsMatchFiniteDifferences) {
  Pool pool(1);
  const LstmStep<double>::Config config{
      .batch = 3, .steps = 4, .features = 3, .units = {5, 4}, .classes = 3};
  LstmStep<double> step(pool, config, /*seed=*/1);
  const std::vector<double> x = normal_values(size_t(3 * 4 * 3), 2);
  const std::vector<int64_t> labels = labels_for(config);
  step.gradients(x.data(), labels.data());
  const std::vector<std::vector<double>> grads = step.grads();
  testing::expect_gradients_match(step.params(), grads,
                                  [&] { return step.loss(x.data(), labels.data()); });
}

TEST(LstmBaseline, SingleStepSingleLayerGradients) {
  Pool pool(1);
  const LstmStep<double>::Config config{
      .batch = 2, .steps = 1, .features = 2, .units = {3}, .classes = 2};
  LstmStep<double> step(pool, config, /*seed=*/3);
  const std::vector<double> x = normal_values(4, 4);
  const std::vector<int64_t> labels = {1, 0};
  step.gradients(x.data(), labels.data());
  std::vector<std::vector<double>> grads = step.grads();
  // With one step the recurrent kernel gets no gradient: check it is zero, the rest by
  // finite differences.
  for (double g : grads[1]) EXPECT_EQ(g, 0);
  std::vector<std::vector<double>> params = step.params();
  params.erase(params.begin() + 1);
  grads.erase(grads.begin() + 1);
  auto loss = [&] {
    for (size_t p = 0, q = 0; p < step.params().size(); ++p)
      if (p != 1) step.params()[p] = params[q++];
    return step.loss(x.data(), labels.data());
  };
  testing::expect_gradients_match(params, grads, loss);
}

TEST(LstmBaseline, Float32MatchesFloat64OnTwoThreads) {
  Pool pool(2);
  const LstmStep<double>::Config config{
      .batch = 16, .steps = 8, .features = 32, .units = {128, 64}, .classes = 10};
  LstmStep<double> d(pool, config, /*seed=*/5);
  LstmStep<float> f(pool,
                    {config.batch, config.steps, config.features, config.units, config.classes},
                    /*seed=*/5);
  const std::vector<double> x = normal_values(size_t(16 * 8 * 32), 6);
  const std::vector<float> xf(x.begin(), x.end());
  const std::vector<int64_t> labels = labels_for(config);
  const double loss_d = d.gradients(x.data(), labels.data());
  const float loss_f = f.gradients(xf.data(), labels.data());
  EXPECT_NEAR(loss_f, loss_d, 1e-5 * loss_d);
  testing::expect_float_matches_double(f.grads(), d.grads(), 1e-4);
}

TEST(LstmBaseline, TrainingLowersTheLoss) {
  Pool pool(2);
  LstmStep<float> step(pool,
                       {.batch = 8, .steps = 6, .features = 4, .units = {16, 16}, .classes = 4},
                       /*seed=*/7);
  const std::vector<double> xd = normal_values(size_t(8 * 6 * 4), 8);
  const std::vector<float> x(xd.begin(), xd.end());
  const std::vector<int64_t> labels = {0, 1, 2, 3, 3, 2, 1, 0};
  std::vector<float> losses;
  for (int i = 0; i < 300; ++i) losses.push_back(step.run(x.data(), labels.data()));
  EXPECT_LT(losses.back(), 0.5f * losses.front());
  for (size_t i = 50; i < losses.size(); i += 50) EXPECT_LT(losses[i], losses[i - 50]) << i;
}

TEST(LstmBaseline, GemmOnlyCountsBatchAndRepeat) {
  Pool pool(2);
  GemmOnly gemms(pool, {{2, 3, 4}, {5, 6, 7, true, false, /*batch=*/3, /*repeat=*/4}});
  gemms.run();
  EXPECT_EQ(gemms.flops(), 2.0 * 2 * 3 * 4 + 2.0 * 5 * 6 * 7 * 12);
  // The LSTM step's GEMMs at the bench size: 63 recurrent products per layer and direction.
  const std::vector<GemmShape> shapes = lstm_step_gemms(32, 64, 64, {256, 256}, 10);
  int64_t repeated = 0;
  for (const GemmShape& s : shapes) repeated += s.repeat > 1 ? s.repeat : 0;
  EXPECT_EQ(repeated, 4 * 63);
}

}  // namespace
}  // namespace kiln::bench
