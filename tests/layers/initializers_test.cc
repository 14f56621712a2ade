// Initializers: Keras' formulas (limits and standard deviations from the fans), seeding, and
// names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"

namespace kiln {
namespace {

struct Stats {
  double mean, stddev, min, max;
};
Stats stats_of(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  double m = 0, s = 0, lo = INFINITY, hi = -INFINITY;
  for (double x : v) m += x, lo = std::min(lo, x), hi = std::max(hi, x);
  m /= double(v.size());
  for (double x : v) s += (x - m) * (x - m);
  return {m, std::sqrt(s / double(v.size())), lo, hi};
}

TEST(Initializers, FansFollowKeras) {
  using initializers::compute_fans;
  EXPECT_EQ(compute_fans(Shape{784, 256}), std::make_pair(784.0, 256.0));
  EXPECT_EQ(compute_fans(Shape{3, 3, 16, 32}), std::make_pair(144.0, 288.0));  // HWIO
  EXPECT_EQ(compute_fans(Shape{10}), std::make_pair(10.0, 10.0));
}

TEST(Initializers, GlorotUniformLimit) {
  Tensor w = initializers::glorot_uniform(1)(Shape{400, 600});
  double limit = std::sqrt(6.0 / (400 + 600));
  Stats s = stats_of(w);
  EXPECT_GE(s.min, -limit);
  EXPECT_LT(s.max, limit);
  EXPECT_NEAR(s.stddev, limit / std::sqrt(3.0), 0.01 * limit);
  EXPECT_NEAR(s.mean, 0, 0.01 * limit);
}

TEST(Initializers, NormalVariantsHaveKerasStddev) {
  // glorot_normal: truncated normal with stddev sqrt(2 / (fan_in + fan_out)).
  Stats g = stats_of(initializers::glorot_normal(2)(Shape{500, 300}));
  EXPECT_NEAR(g.stddev, std::sqrt(2.0 / 800), 0.02 * std::sqrt(2.0 / 800));
  // he_normal: sqrt(2 / fan_in); he_uniform: limit sqrt(6 / fan_in).
  Stats h = stats_of(initializers::he_normal(3)(Shape{250, 400}));
  EXPECT_NEAR(h.stddev, std::sqrt(2.0 / 250), 0.02 * std::sqrt(2.0 / 250));
  EXPECT_LE(std::max(-h.min, h.max), 2 * std::sqrt(2.0 / 250) / 0.87962566103423978 + 1e-9);
  Stats hu = stats_of(initializers::he_uniform(4)(Shape{250, 400}));
  EXPECT_LT(std::max(-hu.min, hu.max), std::sqrt(6.0 / 250));
  // truncated_normal stays within two standard deviations.
  Stats t = stats_of(initializers::truncated_normal(1.0, 0.5, 5)(Shape{100000}));
  EXPECT_GE(t.min, 0.0);
  EXPECT_LE(t.max, 2.0);
  Stats n = stats_of(initializers::random_normal(0, 2, 6)(Shape{100000}));
  EXPECT_NEAR(n.stddev, 2, 0.03);
  Stats u = stats_of(initializers::random_uniform(-3, -1, 7)(Shape{100000}));
  EXPECT_GE(u.min, -3);
  EXPECT_LT(u.max, -1);
  EXPECT_EQ(initializers::constant(2.5)(Shape{2}, DType::f64).to_vector<double>(),
            (std::vector<double>{2.5, 2.5}));
}

TEST(Initializers, SeedsMakeThemReproducible) {
  Tensor a = initializers::glorot_uniform(9)(Shape{3, 4});
  Tensor b = initializers::glorot_uniform(9)(Shape{3, 4});
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  // Unseeded initializers draw from the global generator that set_random_seed resets.
  set_random_seed(123);
  Tensor c = Initializer("he_normal")(Shape{3, 4});
  Tensor d = Initializer("he_normal")(Shape{3, 4});
  set_random_seed(123);
  Tensor e = Initializer("he_normal")(Shape{3, 4});
  EXPECT_EQ(c.to_vector<float>(), e.to_vector<float>());
  EXPECT_NE(c.to_vector<float>(), d.to_vector<float>());
}

TEST(Initializers, UnknownNameIsAnError) {
  try {
    Initializer bad("xavier");
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("unknown initializer \"xavier\""));
  }
}

// Keras' serialized form: class names and aliases, every config argument honoured or refused,
// and a layer's config writing arguments and seeds back so that loading it makes the same
// initializer.
TEST(Initializers, FromKerasConfigHonoursEveryArgument) {
  Tensor a =
      initializer_from_keras("RandomNormal", {{"stddev", 2.0}, {"mean", 1.0}}, 3)(Shape{4, 5});
  Tensor b = initializers::random_normal(1.0, 2.0, 3)(Shape{4, 5});
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_EQ(initializer_from_keras("Constant", {{"value", 2.5}}, std::nullopt)(Shape{2})
                .to_vector<float>(),
            (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(initializer_from_keras("glorot_uniform", {}, 7)(Shape{3, 3}).to_vector<float>(),
            initializers::glorot_uniform(7)(Shape{3, 3}).to_vector<float>());
  EXPECT_EQ(initializer_from_keras("Orthogonal", {{"gain", 2.0}}, 1).class_name(), "Orthogonal");
  auto error = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_THAT(error([] {
                initializer_from_keras("GlorotUniform", {{"gain", 2.0}}, {});
              }),
              ::testing::HasSubstr("unknown argument \"gain\""));
  EXPECT_THAT(error([] { initializer_from_keras("Zeros", {}, 3); }),
              ::testing::HasSubstr("takes no seed"));
  EXPECT_THAT(error([] { initializer_from_keras("Xavier", {}, {}); }),
              ::testing::HasSubstr("unknown initializer \"Xavier\""));
}

TEST(Initializers, ArgumentsAndSeedsRecordedForConfigs) {
  EXPECT_TRUE(initializers::random_normal().args().empty());
  EXPECT_TRUE(initializers::glorot_uniform().args().empty());
  EXPECT_EQ(initializers::random_normal(0, 0.5).args(),
            (std::map<std::string, double>{{"stddev", 0.5}}));
  EXPECT_EQ(initializers::constant(3).args(), (std::map<std::string, double>{{"value", 3.0}}));
  EXPECT_EQ(initializers::he_normal(4).seed(), std::optional<int64_t>(4));
  EXPECT_EQ(initializers::he_normal(4).class_name(), "HeNormal");
}

}  // namespace
}  // namespace kiln
