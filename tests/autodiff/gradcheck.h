// Finite-difference gradient checking for the autodiff tests (header-only).
//
// check_gradients(f, inputs) compares the GradientTape gradient of
//     L(x) = sum(f(x) * w)
// with central differences (L(x + eps e_j) - L(x - eps e_j)) / (2 eps), element by element,
// for every floating input (or the ones named in Options::wrt). `w` is a fixed random
// weighting with entries of both signs and magnitudes in [0.5, 1.5], so every component of a
// non-scalar output takes part in the check. Use float64 inputs: the default tolerances are
// for float64.
//
// Test data comes from a private generator (std::mt19937_64 bits mapped to doubles by hand),
// not from kiln's random kernels, so the data is identical on every platform and does not
// depend on the code under test.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::gradcheck {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// A tensor's elements as doubles.
inline std::vector<double> doubles_of(const Tensor& t) { return t.to_vector<double>(); }

// ---- deterministic test data ----

// n doubles uniform in [lo, hi).
inline std::vector<double> uniform_values(int64_t n, uint64_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = lo + (hi - lo) * double(gen() >> 11) * 0x1.0p-53;
  return v;
}

// A float64 (or `dtype`) tensor uniform in [lo, hi).
inline Tensor uniform(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1,
                      DType dtype = DType::f64) {
  return tensor(uniform_values(shape.num_elements(), seed, lo, hi), shape, dtype);
}

// Values with magnitude in [lo, hi] and random sign: safe inputs for functions with a kink or
// a pole at zero (abs, relu, division).
inline Tensor away_from_zero(const Shape& shape, uint64_t seed, double lo = 0.2, double hi = 1.5,
                             DType dtype = DType::f64) {
  std::vector<double> mag = uniform_values(shape.num_elements(), seed, lo, hi);
  std::vector<double> sgn = uniform_values(shape.num_elements(), seed + 1, -1, 1);
  for (size_t i = 0; i < mag.size(); ++i) mag[i] = sgn[i] < 0 ? -mag[i] : mag[i];
  return tensor(mag, shape, dtype);
}

// A random permutation of start, start + step, start + 2 step, ...: all elements distinct by
// at least `step` (inputs for max/min reductions and max pooling without ties).
inline Tensor distinct(const Shape& shape, uint64_t seed, double start = -1, double step = 0.05,
                       DType dtype = DType::f64) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * double(i);
  std::mt19937_64 gen(seed);
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(gen() % i)]);
  return tensor(v, shape, dtype);
}

// Values on the grid offset + 0.2 k (k in [-5, 5)): two tensors with offsets 0 and 0.1 differ
// by at least 0.1 in every broadcast pair (maximum/minimum without ties).
inline Tensor on_grid(const Shape& shape, uint64_t seed, double offset, DType dtype = DType::f64) {
  std::vector<double> v = uniform_values(shape.num_elements(), seed, -5, 5);
  for (double& x : v) x = offset + 0.2 * std::floor(x);
  return tensor(v, shape, dtype);
}

// ---- the checker ----

struct Options {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-6;
  uint64_t weight_seed = 99;
  // Indices of the inputs to check; empty: every floating input.
  std::vector<size_t> wrt;

  // Options that check only the inputs `inputs`.
  static Options only(std::vector<size_t> inputs) {
    Options o;
    o.wrt = std::move(inputs);
    return o;
  }
  // Options with another step and tolerances.
  static Options steps(double eps, double rtol, double atol) {
    Options o;
    o.eps = eps;
    o.rtol = rtol;
    o.atol = atol;
    return o;
  }
};

// "[1, 0, 2]" for flat index 6 of shape (2, 2, 3).
inline std::string index_string(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    idx[size_t(d)] = shape[d] > 0 ? flat % shape[d] : 0;
    if (shape[d] > 0) flat /= shape[d];
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

namespace detail {

inline double weighted_sum(const Tensor& y, const std::vector<double>& w) {
  std::vector<double> v = y.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
  return s;
}

}  // namespace detail

// Returns success, or a failure naming the input, the worst element (multi-index), the tape
// and finite-difference values and how many elements were out of tolerance.
inline ::testing::AssertionResult check_gradients(const Fn& f, const std::vector<Tensor>& inputs,
                                                  const Options& opts = {}) {
  std::vector<size_t> wrt = opts.wrt;
  if (wrt.empty())
    for (size_t i = 0; i < inputs.size(); ++i)
      if (is_floating(inputs[i].dtype())) wrt.push_back(i);
  if (wrt.empty()) return ::testing::AssertionFailure() << "no floating input to check";

  Tensor y0 = f(inputs);
  if (!y0.defined()) return ::testing::AssertionFailure() << "f returned an undefined tensor";
  if (!is_floating(y0.dtype()))
    return ::testing::AssertionFailure() << "f returned a non-floating tensor " << y0.to_string();
  // Weights of both signs, magnitude in [0.5, 1.5].
  std::vector<double> w = uniform_values(y0.size(), opts.weight_seed, 0.5, 1.5);
  std::vector<double> sgn = uniform_values(y0.size(), opts.weight_seed + 1, -1, 1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = sgn[i] < 0 ? -w[i] : w[i];
  Tensor weights = tensor(w, y0.shape(), y0.dtype());

  // Analytic gradients from the tape.
  std::vector<Tensor> sources;
  for (size_t i : wrt) sources.push_back(inputs[i]);
  std::vector<Tensor> grads;
  {
    GradientTape tape;
    tape.watch(sources);
    Tensor y = f(inputs);
    Tensor loss = sum(y * weights);
    grads = tape.gradient(loss, sources, UnconnectedGradients::kZero);
  }

  ::testing::AssertionResult result = ::testing::AssertionSuccess();
  bool ok = true;
  for (size_t s = 0; s < wrt.size(); ++s) {
    size_t i = wrt[s];
    const Tensor& x = inputs[i];
    const Tensor& g = grads[s];
    if (!(g.type() == x.type())) {
      ok = false;
      result = ::testing::AssertionFailure() << "input " << i << " is " << x.type().to_string()
                                             << " but its gradient is " << g.type().to_string();
      continue;
    }
    std::vector<double> analytic = g.to_vector<double>();
    std::vector<double> base = x.to_vector<double>();
    double worst_ratio = -1, worst_a = 0, worst_n = 0, worst_tol = 0;
    int64_t worst_j = -1, bad = 0;
    for (int64_t j = 0; j < x.size(); ++j) {
      std::vector<Tensor> args = inputs;
      std::vector<double> v = base;
      v[size_t(j)] = base[size_t(j)] + opts.eps;
      args[i] = tensor(v, x.shape(), x.dtype());
      double plus = detail::weighted_sum(f(args), w);
      v[size_t(j)] = base[size_t(j)] - opts.eps;
      args[i] = tensor(v, x.shape(), x.dtype());
      double minus = detail::weighted_sum(f(args), w);
      double numeric = (plus - minus) / (2 * opts.eps);
      double a = analytic[size_t(j)];
      double tol = opts.atol + opts.rtol * std::max(std::abs(a), std::abs(numeric));
      double err = std::abs(a - numeric);
      double ratio = std::isfinite(err) ? err / tol : std::numeric_limits<double>::infinity();
      if (ratio > 1) ++bad;
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst_j = j;
        worst_a = a;
        worst_n = numeric;
        worst_tol = tol;
      }
    }
    if (bad > 0) {
      if (ok) result = ::testing::AssertionFailure();
      ok = false;
      result << fmt::format(
          "input {} ({}): {} of {} gradient elements out of tolerance; worst at {}: tape {:.12g}, "
          "finite difference {:.12g}, |diff| {:.3g} > tolerance {:.3g}\n",
          i, x.type().to_string(), bad, x.size(), index_string(x.shape(), worst_j), worst_a,
          worst_n, std::abs(worst_a - worst_n), worst_tol);
    }
  }
  return result;
}

// The same comparison along random directions instead of element by element, for inputs
// too large for one finite difference per element: for each direction v (one random tensor
// per checked input), the tape's sum_i <grad_i, v_i> must match
// (L(x + eps v) - L(x - eps v)) / (2 eps). The tolerance scales with sum_i |grad_i| . |v_i|.
inline ::testing::AssertionResult check_directional(const Fn& f, const std::vector<Tensor>& inputs,
                                                    int directions = 3, const Options& opts = {}) {
  std::vector<size_t> wrt = opts.wrt;
  if (wrt.empty())
    for (size_t i = 0; i < inputs.size(); ++i)
      if (is_floating(inputs[i].dtype())) wrt.push_back(i);
  Tensor y0 = f(inputs);
  std::vector<double> w = uniform_values(y0.size(), opts.weight_seed, 0.5, 1.5);
  std::vector<double> sgn = uniform_values(y0.size(), opts.weight_seed + 1, -1, 1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = sgn[i] < 0 ? -w[i] : w[i];
  Tensor weights = tensor(w, y0.shape(), y0.dtype());
  std::vector<Tensor> sources;
  for (size_t i : wrt) sources.push_back(inputs[i]);
  std::vector<std::vector<double>> grads;
  {
    GradientTape tape;
    tape.watch(sources);
    Tensor loss = sum(f(inputs) * weights);
    for (const Tensor& g : tape.gradient(loss, sources, UnconnectedGradients::kZero))
      grads.push_back(g.to_vector<double>());
  }
  for (int d = 0; d < directions; ++d) {
    std::vector<Tensor> plus = inputs, minus = inputs;
    double analytic = 0, scale = 0;
    for (size_t s = 0; s < wrt.size(); ++s) {
      const Tensor& x = inputs[wrt[s]];
      std::vector<double> v =
          uniform_values(x.size(), opts.weight_seed * 7919 + uint64_t(d) * 104729 + s, -1, 1);
      std::vector<double> base = x.to_vector<double>(), xp = base, xm = base;
      for (size_t j = 0; j < v.size(); ++j) {
        analytic += grads[s][j] * v[j];
        scale += std::abs(grads[s][j] * v[j]);
        xp[j] += opts.eps * v[j];
        xm[j] -= opts.eps * v[j];
      }
      plus[wrt[s]] = tensor(xp, x.shape(), x.dtype());
      minus[wrt[s]] = tensor(xm, x.shape(), x.dtype());
    }
    double numeric =
        (detail::weighted_sum(f(plus), w) - detail::weighted_sum(f(minus), w)) / (2 * opts.eps);
    double tol = opts.atol + opts.rtol * std::max(scale, std::abs(numeric));
    double err = std::abs(analytic - numeric);
    if (!(err <= tol))
      return ::testing::AssertionFailure() << fmt::format(
                 "direction {}: tape {:.12g}, finite difference {:.12g}, |diff| {:.3g} > "
                 "tolerance {:.3g}",
                 d, analytic, numeric, err, tol);
  }
  return ::testing::AssertionSuccess();
}

// Runs f's tape gradient once with the float64 inputs and once with the same values in
// float32 (float64 inputs only; others are passed unchanged) and checks the float32 gradients
// agree with the float64 ones within rtol * max|gradient| + atol: catches float32-only kernel
// paths that the float64 checks do not reach.
inline ::testing::AssertionResult check_float32_matches_float64(const Fn& f,
                                                                const std::vector<Tensor>& inputs,
                                                                double rtol = 1e-4,
                                                                double atol = 1e-5) {
  std::vector<Tensor> in32 = inputs;
  std::vector<size_t> wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::f64) continue;
    wrt.push_back(i);
    in32[i] = tensor(inputs[i].to_vector<double>(), inputs[i].shape(), DType::f32);
  }
  auto run = [&](const std::vector<Tensor>& in) {
    std::vector<Tensor> sources;
    for (size_t i : wrt) sources.push_back(in[i]);
    GradientTape tape;
    tape.watch(sources);
    Tensor y = f(in);
    Tensor weights = tensor(uniform_values(y.size(), 5, -1.5, 1.5), y.shape(), y.dtype());
    return tape.gradient(sum(y * weights), sources, UnconnectedGradients::kZero);
  };
  std::vector<Tensor> g64 = run(inputs), g32 = run(in32);
  for (size_t s = 0; s < wrt.size(); ++s) {
    if (g32[s].dtype() != DType::f32)
      return ::testing::AssertionFailure()
             << "input " << wrt[s] << ": float32 gradient has dtype " << dtype_name(g32[s].dtype());
    std::vector<double> a = g64[s].to_vector<double>(), b = g32[s].to_vector<double>();
    double scale = 0;
    for (double v : a) scale = std::max(scale, std::abs(v));
    double tol = atol + rtol * scale;
    for (size_t j = 0; j < a.size(); ++j)
      if (!(std::abs(a[j] - b[j]) <= tol))
        return ::testing::AssertionFailure() << fmt::format(
                   "input {}: float32 gradient {:.8g} vs float64 {:.8g} at {} (tolerance {:.3g})",
                   wrt[s], b[j], a[j], index_string(inputs[wrt[s]].shape(), int64_t(j)), tol);
  }
  return ::testing::AssertionSuccess();
}

// The tape gradient of sum(f(x)) with respect to the single input x, computed on its own
// tape: the first derivative as a function, which check_gradients can differentiate again
// (second derivatives through nested tapes).
inline Fn first_derivative(std::function<Tensor(const Tensor&)> f) {
  return [f](const std::vector<Tensor>& xs) {
    GradientTape tape;
    tape.watch(xs[0]);
    Tensor y = f(xs[0]);
    return tape.gradient(sum(y), xs[0]);
  };
}

// Largest |a - b| over all elements (same shape required); inf on a shape mismatch.
inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape())) return std::numeric_limits<double>::infinity();
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = std::abs(x[i] - y[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

}  // namespace kiln::gradcheck

// EXPECT_GRADIENTS(f, inputs[, options]): the tape gradient of f matches finite differences.
#define EXPECT_GRADIENTS(...) EXPECT_TRUE(::kiln::gradcheck::check_gradients(__VA_ARGS__))
// EXPECT_DIRECTIONAL_GRADIENTS(f, inputs[, directions, options]): same, along random directions.
#define EXPECT_DIRECTIONAL_GRADIENTS(...) \
  EXPECT_TRUE(::kiln::gradcheck::check_directional(__VA_ARGS__))
