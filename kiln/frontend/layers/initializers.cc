#include "kiln/frontend/layers/initializers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"

namespace kiln {
namespace {

struct GlobalSeeds {
  std::mutex mutex;
  Generator gen{1337};
};
GlobalSeeds& global() {
  static GlobalSeeds g;
  return g;
}

}  // namespace

void set_random_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(global().mutex);
  global().gen = Generator(seed);
}

int64_t next_global_seed() {
  std::lock_guard<std::mutex> lock(global().mutex);
  return global().gen.next_seed();
}

Tensor Initializer::operator()(const Shape& shape, DType dtype) const {
  if (!fn_) throw Error("Initializer: empty initializer");
  if (!is_floating(dtype) && name_ != "zeros" && name_ != "ones" && name_ != "constant")
    throw Error(
        fmt::format("initializer {} needs a floating dtype, got {}", name_, dtype_name(dtype)));
  return fn_(shape, dtype, seed_ ? *seed_ : next_global_seed());
}

namespace initializers {

std::pair<double, double> compute_fans(const Shape& s) {
  if (s.rank() == 0) return {1, 1};
  if (s.rank() == 1) return {double(s[0]), double(s[0])};
  if (s.rank() == 2) return {double(s[0]), double(s[1])};
  double receptive = 1;
  for (int i = 0; i < s.rank() - 2; ++i) receptive *= double(s[i]);
  return {double(s.dim(-2)) * receptive, double(s.dim(-1)) * receptive};
}

Initializer zeros() {
  return {"zeros", [](const Shape& s, DType t, int64_t) { return kiln::zeros(s, t); }};
}
Initializer ones() {
  return {"ones", [](const Shape& s, DType t, int64_t) { return kiln::ones(s, t); }};
}
Initializer constant(double v) {
  return {"constant", [v](const Shape& s, DType t, int64_t) { return full(s, v, t); }};
}
Initializer random_normal(double mean, double stddev, std::optional<int64_t> seed) {
  return {"random_normal",
          [=](const Shape& s, DType t, int64_t sd) {
            return kiln::random_normal(s, sd, mean, stddev, t);
          },
          seed};
}
Initializer random_uniform(double minval, double maxval, std::optional<int64_t> seed) {
  return {"random_uniform",
          [=](const Shape& s, DType t, int64_t sd) {
            return kiln::random_uniform(s, sd, minval, maxval, t);
          },
          seed};
}

namespace {
// Standard normal values redrawn (with fresh seeds) until all lie within 2 standard deviations.
Tensor truncated(const Shape& s, DType t, int64_t seed, double mean, double stddev) {
  Generator gen{static_cast<uint64_t>(seed)};
  Tensor x = kiln::random_normal(s, gen.next_seed(), 0, 1, t);
  for (int round = 0; round < 64; ++round) {
    Tensor bad = greater(abs(x), scalar(2, t));
    if (!max(cast(bad, DType::i32)).item<int32_t>()) break;
    x = where(bad, kiln::random_normal(s, gen.next_seed(), 0, 1, t), x);
  }
  // 64 rounds leave a value outside with probability ~0.0455^64: never in practice; clip anyway.
  x = minimum(maximum(x, scalar(-2, t)), scalar(2, t));
  return x * stddev + mean;
}
}  // namespace

Initializer truncated_normal(double mean, double stddev, std::optional<int64_t> seed) {
  return {"truncated_normal",
          [=](const Shape& s, DType t, int64_t sd) { return truncated(s, t, sd, mean, stddev); },
          seed};
}

// Keras' VarianceScaling: scale / fan, with fan = fan_in, fan_out or their average.
namespace {
Initializer variance_scaling(const char* name, double scale, bool fan_avg, bool uniform,
                             std::optional<int64_t> seed) {
  return {name,
          [=](const Shape& s, DType t, int64_t sd) {
            auto [fan_in, fan_out] = compute_fans(s);
            double fan = fan_avg ? (fan_in + fan_out) / 2 : fan_in;
            double var = scale / std::max(1.0, fan);
            if (uniform) {
              double limit = std::sqrt(3.0 * var);
              return kiln::random_uniform(s, sd, -limit, limit, t);
            }
            // Keras divides by the stddev of a standard normal truncated to [-2, 2].
            return truncated(s, t, sd, 0, std::sqrt(var) / 0.87962566103423978);
          },
          seed};
}
}  // namespace

Initializer glorot_uniform(std::optional<int64_t> seed) {
  return variance_scaling("glorot_uniform", 1, true, true, seed);
}
Initializer glorot_normal(std::optional<int64_t> seed) {
  return variance_scaling("glorot_normal", 1, true, false, seed);
}
Initializer he_uniform(std::optional<int64_t> seed) {
  return variance_scaling("he_uniform", 2, false, true, seed);
}
Initializer he_normal(std::optional<int64_t> seed) {
  return variance_scaling("he_normal", 2, false, false, seed);
}

Initializer orthogonal(double gain, std::optional<int64_t> seed) {
  return {
      "orthogonal",
      [gain](const Shape& s, DType t, int64_t sd) {
        if (s.rank() < 2)
          throw Error(fmt::format(
              "initializer orthogonal needs a weight of rank >= 2, got shape {}", s.to_string()));
        const int64_t cols = s.dim(-1), rows = s.num_elements() / cols;
        // Columns of a (long x short) normal matrix, orthonormalised in double by
        // modified Gram-Schmidt (R's diagonal comes out positive, as Keras' sign fix
        // makes it).
        const int64_t n = std::max(rows, cols), k = std::min(rows, cols);
        std::vector<double> a =
            kiln::random_normal(Shape{k, n}, sd, 0.0, 1.0, DType::f64).to_vector<double>();
        for (int64_t j = 0; j < k; ++j) {
          double* v = &a[size_t(j * n)];
          for (int64_t p = 0; p < j; ++p) {
            const double* q = &a[size_t(p * n)];
            double dot = 0;
            for (int64_t i = 0; i < n; ++i) dot += q[i] * v[i];
            for (int64_t i = 0; i < n; ++i) v[i] -= dot * q[i];
          }
          double norm = 0;
          for (int64_t i = 0; i < n; ++i) norm += v[i] * v[i];
          norm = std::sqrt(norm);
          for (int64_t i = 0; i < n; ++i) v[i] /= norm;
        }
        // a holds k orthonormal vectors of length n: as [n, k] columns when rows >= cols
        // (orthonormal columns), as [k, n] rows otherwise.
        std::vector<double> w(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c)
            w[size_t(r * cols + c)] =
                gain * (rows >= cols ? a[size_t(c * n + r)] : a[size_t(r * n + c)]);
        return tensor(w, s, t);
      },
      seed};
}

}  // namespace initializers

Initializer::Initializer(const char* name) {
  std::string n = name;
  using namespace initializers;
  if (n == "zeros")
    *this = zeros();
  else if (n == "ones")
    *this = ones();
  else if (n == "random_normal" || n == "normal")  // "normal", "uniform": Keras' aliases
    *this = random_normal();
  else if (n == "random_uniform" || n == "uniform")
    *this = random_uniform();
  else if (n == "truncated_normal")
    *this = truncated_normal();
  else if (n == "glorot_uniform")
    *this = glorot_uniform();
  else if (n == "glorot_normal")
    *this = glorot_normal();
  else if (n == "he_uniform")
    *this = he_uniform();
  else if (n == "he_normal")
    *this = he_normal();
  else if (n == "orthogonal")
    *this = orthogonal();
  else
    throw Error(
        fmt::format("unknown initializer \"{}\": expected zeros, ones, random_normal (normal), "
                    "random_uniform (uniform), truncated_normal, glorot_uniform, glorot_normal, "
                    "he_uniform, he_normal or orthogonal",
                    n));
}

}  // namespace kiln
