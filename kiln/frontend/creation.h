// Creating tensors: constants, ranges, data from C++ containers, and seeded random numbers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

Tensor zeros(const Shape& shape, DType dtype = DType::f32);
Tensor ones(const Shape& shape, DType dtype = DType::f32);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);
// A rank-0 tensor.
Tensor scalar(double value, DType dtype = DType::f32);
// numpy arange: start, start+step, ... < stop (step may be negative, not zero).
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::f32);
inline Tensor arange(int64_t stop, DType dtype = DType::f32) {
  return arange(0, double(stop), 1, dtype);
}

// Tensor from row-major data; the shape defaults to (data.size(),). The element type picks the
// dtype (float -> float32, double -> float64, int32_t, int64_t, bool, uint8_t).
template <typename T>
Tensor tensor(const std::vector<T>& data, const Shape& shape);
template <typename T>
Tensor tensor(const std::vector<T>& data) {
  return tensor(data, Shape{int64_t(data.size())});
}
template <typename T>
Tensor tensor(std::initializer_list<T> data, const Shape& shape) {
  return tensor(std::vector<T>(data), shape);
}
template <typename T>
Tensor tensor(std::initializer_list<T> data) {
  return tensor(std::vector<T>(data));
}
// Same, converting the values to `dtype`.
Tensor tensor(const std::vector<double>& data, const Shape& shape, DType dtype);

// Random numbers from an explicit seed (counter-based Philox: same seed, same numbers on every
// machine and thread count).
Tensor random_uniform(const Shape& shape, int64_t seed, double minval = 0, double maxval = 1,
                      DType dtype = DType::f32);
Tensor random_normal(const Shape& shape, int64_t seed, double mean = 0, double stddev = 1,
                     DType dtype = DType::f32);
// Integers uniformly in [minval, maxval).
Tensor random_integers(const Shape& shape, int64_t seed, int64_t minval, int64_t maxval,
                       DType dtype = DType::i64);

// The same, with the shape of `like` (its values are not read). Inside a kiln::function traced
// with unknown dimensions (an input_signature with -1, reduce_retracing) the numbers follow the
// arguments' sizes at each call; the plain forms need a fully known shape there.
Tensor random_uniform_like(const Tensor& like, int64_t seed, double minval = 0, double maxval = 1,
                           DType dtype = DType::f32);
Tensor random_normal_like(const Tensor& like, int64_t seed, double mean = 0, double stddev = 1,
                          DType dtype = DType::f32);
Tensor random_integers_like(const Tensor& like, int64_t seed, int64_t minval, int64_t maxval,
                            DType dtype = DType::i64);

// The same with the seed as an int64 scalar tensor, e.g. SeedGenerator::next()
// (frontend/seed_generator.h). Inside a kiln::function a traced seed goes into the graph as it
// is, so the numbers are those the same seed gives eagerly; a concrete seed (like the integer
// forms above) is replaced there by one from the function's rng_state (tracing_random.h).
Tensor random_uniform(const Shape& shape, const Tensor& seed, double minval = 0, double maxval = 1,
                      DType dtype = DType::f32);
Tensor random_normal(const Shape& shape, const Tensor& seed, double mean = 0, double stddev = 1,
                     DType dtype = DType::f32);
Tensor random_integers(const Shape& shape, const Tensor& seed, int64_t minval, int64_t maxval,
                       DType dtype = DType::i64);
Tensor random_uniform_like(const Tensor& like, const Tensor& seed, double minval = 0,
                           double maxval = 1, DType dtype = DType::f32);
Tensor random_normal_like(const Tensor& like, const Tensor& seed, double mean = 0,
                          double stddev = 1, DType dtype = DType::f32);
Tensor random_integers_like(const Tensor& like, const Tensor& seed, int64_t minval, int64_t maxval,
                            DType dtype = DType::i64);

// A seeded generator: each draw uses the next seed of a deterministic sequence, so a program
// that draws in the same order gets the same numbers everywhere. Its seeds are host integers:
// inside a kiln::function they are trace-time constants, replaced by the function's rng_state
// seeds (the traced numbers differ from the eager ones). For numbers that are the same eagerly
// and traced, draw with a SeedGenerator (frontend/seed_generator.h), as the layers do.
class Generator {
 public:
  explicit Generator(uint64_t seed) : seed_(seed) {}
  Tensor uniform(const Shape& shape, double minval = 0, double maxval = 1,
                 DType dtype = DType::f32);
  Tensor normal(const Shape& shape, double mean = 0, double stddev = 1, DType dtype = DType::f32);
  Tensor integers(const Shape& shape, int64_t minval, int64_t maxval, DType dtype = DType::i64);
  // The seed of the next draw (advances the sequence).
  int64_t next_seed();

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

namespace detail {
Tensor tensor_from_bytes(DType dtype, const Shape& shape, const void* data, size_t count);
}

template <typename T>
Tensor tensor(const std::vector<T>& data, const Shape& shape) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());
    return detail::tensor_from_bytes(DType::b8, shape, bytes.data(), bytes.size());
  } else {
    return detail::tensor_from_bytes(dtype_of<T>(), shape, data.data(), data.size());
  }
}

}  // namespace kiln
