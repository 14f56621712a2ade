// Checks shared by the tests of the hand-written `kiln bench` baselines (tests/tools/).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <vector>

namespace kiln::bench::testing {

// Every element of every parameter: the analytic gradient against central differences of
// loss() (float64), |analytic - numeric| <= atol + rtol |numeric|. Also checks that each
// parameter's gradient is not all zero (a path left out of the backward pass would be).
inline void expect_gradients_match(std::vector<std::vector<double>>& params,
                                   const std::vector<std::vector<double>>& grads,
                                   const std::function<double()>& loss) {
  constexpr double kStep = 1e-6, kAtol = 1e-8, kRtol = 1e-5;
  ASSERT_EQ(params.size(), grads.size());
  for (size_t p = 0; p < params.size(); ++p) {
    double norm = 0;
    for (size_t i = 0; i < params[p].size(); ++i) {
      const double w = params[p][i];
      params[p][i] = w + kStep;
      const double up = loss();
      params[p][i] = w - kStep;
      const double down = loss();
      params[p][i] = w;
      const double numeric = (up - down) / (2 * kStep);
      EXPECT_NEAR(grads[p][i], numeric, kAtol + kRtol * std::abs(numeric))
          << "parameter " << p << ", element " << i;
      norm += grads[p][i] * grads[p][i];
    }
    EXPECT_GT(norm, 0) << "parameter " << p << " has an all-zero gradient";
  }
}

// float32 gradients against float64 ones of the same step: per parameter, the relative error in
// the 2-norm is at most rtol.
inline void expect_float_matches_double(const std::vector<std::vector<float>>& f,
                                        const std::vector<std::vector<double>>& d, double rtol) {
  ASSERT_EQ(f.size(), d.size());
  for (size_t p = 0; p < d.size(); ++p) {
    ASSERT_EQ(f[p].size(), d[p].size());
    double err = 0, norm = 0;
    for (size_t i = 0; i < d[p].size(); ++i) {
      err += (double(f[p][i]) - d[p][i]) * (double(f[p][i]) - d[p][i]);
      norm += d[p][i] * d[p][i];
    }
    EXPECT_GT(norm, 0) << "parameter " << p;
    EXPECT_LE(std::sqrt(err), rtol * std::sqrt(norm)) << "parameter " << p;
  }
}

// n standard-normal values, float-representable (the same inputs for float and double steps).
inline std::vector<double> normal_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist;
  std::vector<double> v(n);
  for (double& e : v) e = double(float(dist(rng)));
  return v;
}

}  // namespace kiln::bench::testing
