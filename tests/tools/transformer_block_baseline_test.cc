// The hand-written transformer-block training step of `kiln bench`
// (bench/suite/rnn_baselines.h): gradients against finite differences (float64), the float32
// step against the float64 one on two threads, and training lowers its loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bench/suite/baselines.h"
#include "bench/suite/rnn_baselines.h"
#include "tests/tools/gradient_check.h"

namespace kiln::bench {
namespace {

using testing::normal_values;
using Config = TransformerBlockStep<double>::Config;

size_t elements(const Config& c) { return size_t(c.batch * c.seq * c.dim); }

TEST(TransformerBlockBaseline, GradientsMatchFiniteDifferences) {
  Pool pool(1);
  const Config config{.batch = 2, .seq = 5, .dim = 8, .heads = 2, .ff = 12};
  TransformerBlockStep<double> step(pool, config, /*seed=*/1);
  const std::vector<double> x = normal_values(elements(config), 2);
  const std::vector<double> target = normal_values(elements(config), 3);
  step.gradients(x.data(), target.data());
  const std::vector<std::vector<double>> grads = step.grads();
  testing::expect_gradients_match(step.params(), grads,
                                  [&] { return step.loss(x.data(), target.data()); });
}

TEST(TransformerBlockBaseline, CausalMaskHidesLaterSteps) {
  // Changing x at the last step changes the output there and nowhere before it.
  Pool pool(1);
  const Config config{.batch = 1, .seq = 4, .dim = 8, .heads = 2, .ff = 12};
  TransformerBlockStep<double> step(pool, config, /*seed=*/4);
  std::vector<double> x = normal_values(elements(config), 5);
  const std::vector<double> target = normal_values(elements(config), 6);
  step.loss(x.data(), target.data());
  const std::vector<double> before = step.output();
  // Not a constant shift of the row: the layer norm would remove it before the attention.
  for (int64_t j = 0; j < config.dim; ++j) x[size_t(3 * config.dim + j)] += 0.25 * double(j % 3);
  step.loss(x.data(), target.data());
  const std::vector<double>& after = step.output();
  double last_change = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    if (i < size_t(3 * config.dim)) {
      EXPECT_NEAR(after[i], before[i], 1e-12) << i;
    } else {
      last_change = std::max(last_change, std::abs(after[i] - before[i]));
    }
  }
  EXPECT_GT(last_change, 1e-2);
}

TEST(TransformerBlockBaseline, Float32MatchesFloat64OnTwoThreads) {
  Pool pool(2);
  const Config config{.batch = 4, .seq = 16, .dim = 64, .heads = 4, .ff = 256};
  TransformerBlockStep<double> d(pool, config, /*seed=*/5);
  TransformerBlockStep<float> f(
      pool, {config.batch, config.seq, config.dim, config.heads, config.ff}, /*seed=*/5);
  const std::vector<double> x = normal_values(elements(config), 6);
  const std::vector<double> target = normal_values(elements(config), 7);
  const std::vector<float> xf(x.begin(), x.end()), target_f(target.begin(), target.end());
  const double loss_d = d.gradients(x.data(), target.data());
  const float loss_f = f.gradients(xf.data(), target_f.data());
  EXPECT_NEAR(loss_f, loss_d, 1e-5 * loss_d);
  testing::expect_float_matches_double(f.grads(), d.grads(), 1e-4);
}

TEST(TransformerBlockBaseline, TrainingLowersTheLoss) {
  Pool pool(2);
  const Config config{.batch = 2, .seq = 8, .dim = 16, .heads = 2, .ff = 32};
  TransformerBlockStep<float> step(
      pool, {config.batch, config.seq, config.dim, config.heads, config.ff}, /*seed=*/7);
  const std::vector<double> xd = normal_values(elements(config), 8);
  const std::vector<double> td = normal_values(elements(config), 9);
  const std::vector<float> x(xd.begin(), xd.end()), target(td.begin(), td.end());
  std::vector<float> losses;
  for (int i = 0; i < 300; ++i) losses.push_back(step.run(x.data(), target.data()));
  EXPECT_LT(losses.back(), 0.5f * losses.front());
  for (size_t i = 50; i < losses.size(); i += 50) EXPECT_LT(losses[i], losses[i - 50]) << i;
}

TEST(TransformerBlockBaseline, GemmFlops) {
  // d = 128, ff = 512, N = 16 * 64: projections 2 N d (3d + d + 2 ff) forward, twice that
  // backward; attention 2 s s hd per product, 2 forward + 4 backward, batch * heads of each.
  const double n = 16 * 64, d = 128, ff = 512, s = 64, hd = 32, bh = 16 * 4;
  const double expected = 3 * 2 * n * d * (3 * d + d + 2 * ff) + 6 * 2 * s * s * hd * bh;
  Pool pool(1);
  EXPECT_EQ(GemmOnly(pool, transformer_block_gemms(16, 64, 128, 4, 512)).flops(), expected);
}

}  // namespace
}  // namespace kiln::bench
