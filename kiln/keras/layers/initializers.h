// Weight initializers (Keras' names and formulas), all seeded. An initializer without an
// explicit seed draws one from the global generator, which kiln::set_random_seed resets, so a
// program that builds the same layers in the same order gets the same weights.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/frontend/seed_generator.h"
#include "kiln/frontend/tensor.h"

namespace kiln {

class Initializer {
 public:
  using Fn = std::function<Tensor(const Shape& shape, DType dtype, int64_t seed)>;
  Initializer() = default;
  Initializer(std::string name, Fn fn, std::optional<int64_t> seed = std::nullopt)
      : name_(std::move(name)), fn_(std::move(fn)), seed_(seed) {}
  // By name: "zeros", "ones", "random_normal", "random_uniform", "truncated_normal",
  // "glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "orthogonal".
  Initializer(const char* name);  // NOLINT: implicit, so a string can stand for one
  Initializer(const std::string& name) : Initializer(name.c_str()) {}  // NOLINT

  Tensor operator()(const Shape& shape, DType dtype = DType::f32) const;
  const std::string& name() const { return name_; }
  bool defined() const { return static_cast<bool>(fn_); }
  // Keras' class name of this initializer ("GlorotUniform" for "glorot_uniform").
  std::string class_name() const;
  // The arguments it was made with that differ from Keras' defaults ({"stddev": 0.5}), and its
  // seed: a layer's config writes Keras' {"class_name", "config"} form when there are any, so
  // that loading the config makes the same initializer (layer_util::initializer_config).
  const std::map<std::string, double>& args() const { return args_; }
  const std::optional<int64_t>& seed() const { return seed_; }
  Initializer& set_args(std::map<std::string, double> args) {
    args_ = std::move(args);
    return *this;
  }

 private:
  std::string name_;
  Fn fn_;
  std::optional<int64_t> seed_;
  std::map<std::string, double> args_;
};

// Keras' serialized initializer {"class_name": name, "config": {...}}: `name` is a class name
// ("GlorotUniform", "RandomNormal", "Constant", ...) or a name of Initializer(const char*)
// ("glorot_uniform", "constant"), `args` the config's numbers (value, mean, stddev, minval,
// maxval, gain; absent: Keras' default) and `seed` its seed (nullopt: null). An argument the
// initializer does not take, or an unknown name, is a kiln::Error naming it.
Initializer initializer_from_keras(std::string_view name, const std::map<std::string, double>& args,
                                   std::optional<int64_t> seed);

namespace initializers {
Initializer zeros();
Initializer ones();
Initializer constant(double value);
Initializer random_normal(double mean = 0, double stddev = 0.05,
                          std::optional<int64_t> seed = std::nullopt);
Initializer random_uniform(double minval = -0.05, double maxval = 0.05,
                           std::optional<int64_t> seed = std::nullopt);
// Normal values redrawn until within two standard deviations of the mean.
Initializer truncated_normal(double mean = 0, double stddev = 0.05,
                             std::optional<int64_t> seed = std::nullopt);
Initializer glorot_uniform(std::optional<int64_t> seed = std::nullopt);
Initializer glorot_normal(std::optional<int64_t> seed = std::nullopt);
Initializer he_uniform(std::optional<int64_t> seed = std::nullopt);
Initializer he_normal(std::optional<int64_t> seed = std::nullopt);
// Keras' Orthogonal (the default recurrent_initializer): a 2-D weight (higher ranks are
// flattened to [prod(shape[:-1]), shape[-1]]) whose rows or columns, whichever are fewer, are
// orthonormal, times `gain`: Q of the QR decomposition of a standard normal matrix, with the
// signs that make R's diagonal positive.
Initializer orthogonal(double gain = 1.0, std::optional<int64_t> seed = std::nullopt);

// Keras' compute_fans: (fan_in, fan_out) of a weight shape (HWIO for convolution kernels).
std::pair<double, double> compute_fans(const Shape& shape);
}  // namespace initializers

}  // namespace kiln
