// Test helpers: how far another execution (compiled kernels, a different operation order) may
// move a number of a float32 computation, measured with the rounding model
// (tests/support/rounding_model.h): runs of the same computation on the reference executor
// with every op's result moved by one correct rounding's worth are samples of "some correct
// rounding", and their spread around the unperturbed reference run shows how much rounding can
// move this number in this computation (cancellation, ReLU kinks and comparisons near a tie,
// amplification over training steps all widen it).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>

#include "kiln/runtime/reference_executor.h"
#include "tests/support/rounding_model.h"

namespace kiln::testing {

// While alive, the reference executor runs on this thread under the rounding model seeded with
// `seed`; with no seed, unperturbed.
class ScopedRoundingModel {
 public:
  explicit ScopedRoundingModel(std::optional<uint64_t> seed) {
    if (!seed) return;
    model_.emplace(*seed);
    hook_.emplace(std::ref(*model_));
  }
  ScopedRoundingModel(const ScopedRoundingModel&) = delete;
  ScopedRoundingModel& operator=(const ScopedRoundingModel&) = delete;

 private:
  std::optional<RoundingModel> model_;
  std::optional<runtime::ScopedReferenceHook> hook_;  // destroyed first
};

// The bound on |got - want| for a number whose unperturbed reference value is `want` and whose
// rounding-model runs gave `samples`: 8 times their rms distance from `want`, plus 2 float32
// roundings of its own magnitude and 8 smallest normals (for numbers the samples did not move).
inline double rounding_spread_bound(double want, std::span<const double> samples) {
  const double u = 0x1p-24, tiny = std::numeric_limits<float>::min();
  double sum_sq = 0;
  for (double s : samples) sum_sq += (s - want) * (s - want);
  double rms = samples.empty() ? 0 : std::sqrt(sum_sq / double(samples.size()));
  return 8 * rms + 2 * u * std::abs(want) + 8 * tiny;
}

}  // namespace kiln::testing
