#include "kiln/keras/layers/initializers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"

namespace kiln {
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
namespace {
// The arguments that differ from Keras' defaults (Initializer::args).
std::map<std::string, double> non_default(
    std::initializer_list<std::tuple<const char*, double, double>> args) {
  std::map<std::string, double> out;
  for (const auto& [name, value, keras_default] : args)
    if (value != keras_default) out[name] = value;
  return out;
}
}  // namespace

Initializer constant(double v) {
  Initializer init{"constant", [v](const Shape& s, DType t, int64_t) { return full(s, v, t); }};
  return init.set_args(non_default({{"value", v, 0.0}}));
}
Initializer random_normal(double mean, double stddev, std::optional<int64_t> seed) {
  Initializer init{"random_normal",
                   [=](const Shape& s, DType t, int64_t sd) {
                     return kiln::random_normal(s, sd, mean, stddev, t);
                   },
                   seed};
  return init.set_args(non_default({{"mean", mean, 0.0}, {"stddev", stddev, 0.05}}));
}
Initializer random_uniform(double minval, double maxval, std::optional<int64_t> seed) {
  Initializer init{"random_uniform",
                   [=](const Shape& s, DType t, int64_t sd) {
                     return kiln::random_uniform(s, sd, minval, maxval, t);
                   },
                   seed};
  return init.set_args(non_default({{"minval", minval, -0.05}, {"maxval", maxval, 0.05}}));
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
  Initializer init{
      "truncated_normal",
      [=](const Shape& s, DType t, int64_t sd) { return truncated(s, t, sd, mean, stddev); }, seed};
  return init.set_args(non_default({{"mean", mean, 0.0}, {"stddev", stddev, 0.05}}));
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
  Initializer init{
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
  return init.set_args(non_default({{"gain", gain, 1.0}}));
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

namespace {
// Keras' initializer classes: class name, kiln's name, the config numbers each takes (besides
// its seed), and whether it takes a seed.
struct KerasInitializer {
  const char* class_name;
  const char* alias;
  std::vector<const char*> args;
  bool seeded;
};
const std::vector<KerasInitializer>& keras_initializers() {
  static const std::vector<KerasInitializer> kinds = {
      {"Zeros", "zeros", {}, false},
      {"Ones", "ones", {}, false},
      {"Constant", "constant", {"value"}, false},
      {"RandomNormal", "random_normal", {"mean", "stddev"}, true},
      {"RandomUniform", "random_uniform", {"minval", "maxval"}, true},
      {"TruncatedNormal", "truncated_normal", {"mean", "stddev"}, true},
      {"GlorotUniform", "glorot_uniform", {}, true},
      {"GlorotNormal", "glorot_normal", {}, true},
      {"HeUniform", "he_uniform", {}, true},
      {"HeNormal", "he_normal", {}, true},
      {"Orthogonal", "orthogonal", {"gain"}, true},
  };
  return kinds;
}
}  // namespace

std::string Initializer::class_name() const {
  for (const KerasInitializer& k : keras_initializers())
    if (name_ == k.alias) return k.class_name;
  return name_;
}

Initializer initializer_from_keras(std::string_view name, const std::map<std::string, double>& args,
                                   std::optional<int64_t> seed) {
  using namespace initializers;
  std::string_view n = name == "normal"    ? "random_normal"
                       : name == "uniform" ? "random_uniform"
                                           : name;
  const KerasInitializer* kind = nullptr;
  for (const KerasInitializer& k : keras_initializers())
    if (n == k.class_name || n == k.alias) kind = &k;
  if (kind == nullptr)
    throw Error(fmt::format(
        "unknown initializer \"{}\": expected one of Zeros, Ones, Constant, RandomNormal, "
        "RandomUniform, TruncatedNormal, GlorotUniform, GlorotNormal, HeUniform, HeNormal, "
        "Orthogonal (or their names zeros, ..., glorot_uniform, ...)",
        name));
  for (const auto& [key, value] : args) {
    bool known = false;
    for (const char* a : kind->args) known = known || key == a;
    if (!known)
      throw Error(fmt::format(
          "initializer {}: unknown argument \"{}\" ({}); it takes {}", kind->class_name, key, value,
          kind->args.empty()
              ? std::string(kind->seeded ? "seed" : "none")
              : fmt::format("{}{}", fmt::join(kind->args, ", "), kind->seeded ? ", seed" : "")));
  }
  if (seed && !kind->seeded)
    throw Error(fmt::format("initializer {} takes no seed, got {}", kind->class_name, *seed));
  auto arg = [&](const char* key, double fallback) {
    auto it = args.find(key);
    return it == args.end() ? fallback : it->second;
  };
  const std::string_view c = kind->class_name;
  if (c == "Zeros") return zeros();
  if (c == "Ones") return ones();
  if (c == "Constant") return constant(arg("value", 0.0));
  if (c == "RandomNormal") return random_normal(arg("mean", 0.0), arg("stddev", 0.05), seed);
  if (c == "RandomUniform") return random_uniform(arg("minval", -0.05), arg("maxval", 0.05), seed);
  if (c == "TruncatedNormal") return truncated_normal(arg("mean", 0.0), arg("stddev", 0.05), seed);
  if (c == "GlorotUniform") return glorot_uniform(seed);
  if (c == "GlorotNormal") return glorot_normal(seed);
  if (c == "HeUniform") return he_uniform(seed);
  if (c == "HeNormal") return he_normal(seed);
  return orthogonal(arg("gain", 1.0), seed);
}

}  // namespace kiln
