// Test helper: tolerances from error analysis instead of fixed numbers (docs/testing.md).
//
// ErrorBoundedReference evaluates a graph three ways on the reference executor:
//   - exactly as declared (float32 where the graph says f32): y32;
//   - in float64 (ReferenceOptions::widen_f32): y64, the value a float32 kernel approximates;
//   - S more times in float64 with the rounding model (tests/support/rounding_model.h): samples
//     of what a correct float32 implementation may compute, with every intermediate value off
//     by its own rounding error.
// The error bound of each result element is
//     safety * max(|y32 - y64|, rms over samples of |sample - y64|) + 2u |y64| + tiny,
// so it scales with the magnitudes and the conditioning of everything the element depends
// on (cancellation, a small variance in a layer norm, a comparison near a tie), and is a few
// ulps of |y64| where nothing amplifies rounding. A result is accepted when it is within its
// bound of y64. A check that fails with S samples is repeated with more (up to max_samples)
// before it is reported, so a bound that came out small by chance is not a failure.
// Integer and bool results get the same rule (their spread is 0 unless they depend on a
// computed float near a tie, so they must be exact otherwise). Non-finite values must match
// (NaN matches NaN) unless the samples disagree about them.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/support/rounding_model.h"

namespace kiln::testing {

struct ErrorBoundOptions {
  int samples = 8;       // rounding-model runs made up front
  int max_samples = 64;  // runs made before a failure is reported
  double safety = 8;     // bound = safety * spread + ...
};

class ErrorBoundedReference {
 public:
  // `args` and `variables` as for runtime::execute_reference; `seed` seeds the rounding model.
  ErrorBoundedReference(const ir::Graph& graph, std::vector<runtime::Array> args,
                        std::vector<runtime::Array> variables, uint64_t seed,
                        ErrorBoundOptions options = {})
      : graph_(graph),
        args_(std::move(args)),
        variables_(std::move(variables)),
        options_(options),
        rng_seed_(seed) {
    std::vector<runtime::Array> vars = variables_;
    y32_ = results(runtime::execute_reference(graph_, args_, vars), vars);
    runtime::ReferenceOptions wide;
    wide.widen_f32 = true;
    vars = variables_;
    y64_ = values(results(runtime::execute_reference(graph_, args_, vars, wide), vars));
    sum_sq_.resize(y64_.size());
    unstable_.resize(y64_.size());
    for (size_t v = 0; v < y64_.size(); ++v) {
      sum_sq_[v].assign(y64_[v].size(), 0.0);
      unstable_[v].assign(y64_[v].size(), false);
    }
    add_samples(options_.samples);
  }

  // The reference results: the graph's outputs, then its variables' final values (float32
  // where the graph says so).
  const std::vector<runtime::Array>& float32_results() const { return y32_; }
  size_t result_count() const { return y32_.size(); }

  // Checks `got` (outputs, then variables, as the graph declares them) against the bounds.
  ::testing::AssertionResult check(const std::vector<runtime::Array>& got) {
    if (got.size() != y32_.size())
      return ::testing::AssertionFailure()
             << got.size() << " results, the reference has " << y32_.size();
    for (;;) {
      std::string failure = first_failure(got);
      if (failure.empty()) return ::testing::AssertionSuccess();
      if (samples_ >= options_.max_samples)
        return ::testing::AssertionFailure() << failure << " (" << samples_ << " samples)";
      add_samples(std::min(options_.max_samples - samples_, std::max(samples_, 8)));
    }
  }

  // The bound of element i of result v (for tests of the checker itself).
  double bound(size_t v, size_t i) const { return bound_of(v, i); }
  double float64_value(size_t v, size_t i) const { return y64_[v][i]; }
  int samples() const { return samples_; }

 private:
  // The outputs, then the variables' final values.
  static std::vector<runtime::Array> results(std::vector<runtime::Array> outs,
                                             const std::vector<runtime::Array>& vars) {
    outs.insert(outs.end(), vars.begin(), vars.end());
    return outs;
  }
  static std::vector<std::vector<double>> values(const std::vector<runtime::Array>& arrays) {
    std::vector<std::vector<double>> r;
    for (const auto& a : arrays) r.push_back(values(a));
    return r;
  }

  static std::vector<double> values(const runtime::Array& a) { return as_doubles(a); }

  static bool same_class(double a, double b) {  // both NaN, or the same infinity
    return (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b);
  }

  void add_samples(int count) {
    for (int s = 0; s < count; ++s) {
      RoundingModel model(rng_seed_ * 1000003u + uint64_t(samples_) + 1);
      runtime::ReferenceOptions opts;
      opts.widen_f32 = true;
      opts.after_op = std::ref(model);
      std::vector<runtime::Array> vars = variables_;
      std::vector<std::vector<double>> y =
          values(results(runtime::execute_reference(graph_, args_, vars, opts), vars));
      for (size_t v = 0; v < y.size(); ++v)
        for (size_t i = 0; i < y[v].size(); ++i) {
          double e = y64_[v][i], x = y[v][i];
          if (!std::isfinite(e) || !std::isfinite(x)) {
            if (!same_class(e, x)) unstable_[v][i] = true;
            continue;
          }
          sum_sq_[v][i] += (x - e) * (x - e);
        }
      ++samples_;
    }
  }

  double unit_roundoff(size_t v) const {
    DType t = y32_[v].dtype;
    return t == DType::f32 ? 0x1p-24 : t == DType::f64 ? 0x1p-53 : 0.0;
  }
  double tiny(size_t v) const {
    DType t = y32_[v].dtype;
    return t == DType::f32   ? double(std::numeric_limits<float>::min())
           : t == DType::f64 ? std::numeric_limits<double>::min()
                             : 0.0;
  }

  double bound_of(size_t v, size_t i) const {
    double e = y64_[v][i];
    double spread = std::sqrt(sum_sq_[v][i] / std::max(samples_, 1));
    double y32 = values_y32(v, i);
    if (std::isfinite(y32)) spread = std::max(spread, std::abs(y32 - e));
    return options_.safety * spread + 2 * unit_roundoff(v) * std::abs(e) +
           options_.safety * tiny(v);
  }
  double values_y32(size_t v, size_t i) const {
    double x = 0;
    visit_dtype(y32_[v].dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      x = double(static_cast<const T*>(y32_[v].raw())[i]);
    });
    return x;
  }

  // "" if every element of `got` is within its bound, else a description of the first one
  // that is not.
  std::string first_failure(const std::vector<runtime::Array>& got) const {
    for (size_t v = 0; v < got.size(); ++v) {
      const runtime::Array& g = got[v];
      if (g.dtype != y32_[v].dtype || g.shape != y32_[v].shape)
        return "result " + std::to_string(v) + ": type " + g.type().to_string() +
               ", the reference has " + y32_[v].type().to_string();
      std::vector<double> x = values(g);
      for (size_t i = 0; i < x.size(); ++i) {
        if (unstable_[v][i]) continue;
        double e = y64_[v][i], b = bound_of(v, i);
        bool ok;
        if (!std::isfinite(e))
          ok = same_class(x[i], e);
        else if (g.dtype == DType::f32 && std::abs(e) > std::numeric_limits<float>::max())
          ok = (std::isinf(x[i]) && (x[i] > 0) == (e > 0)) || std::abs(x[i] - e) <= b;
        else
          ok = std::isfinite(x[i]) && std::abs(x[i] - e) <= b;
        if (!ok) {
          std::ostringstream os;
          os.precision(9);
          os << "result " << v << " element " << i << " of " << x.size() << ": got " << x[i]
             << ", float64 reference " << e << ", float32 reference " << values_y32(v, i)
             << ", error " << std::abs(x[i] - e) << " > bound " << b << " ("
             << b / std::max(std::abs(x[i] - e), 1e-300) << "x)";
          return os.str();
        }
      }
    }
    return "";
  }

  const ir::Graph& graph_;
  std::vector<runtime::Array> args_, variables_;
  ErrorBoundOptions options_;
  uint64_t rng_seed_;
  std::vector<runtime::Array> y32_;
  std::vector<std::vector<double>> y64_, sum_sq_;
  std::vector<std::vector<bool>> unstable_;
  int samples_ = 0;
};

}  // namespace kiln::testing
