#include "kiln/frontend/creation.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "kiln/frontend/dispatch.h"
#include "kiln/frontend/ops.h"

namespace kiln {

Tensor full(const Shape& shape, double value, DType dtype) {
  runtime::Array a = runtime::Array::empty(dtype, shape);
  visit_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = storage_from_double<T>(value);
    T* p = a.data<T>();
    std::fill(p, p + a.size(), v);
  });
  return Tensor(std::move(a));
}

Tensor zeros(const Shape& shape, DType dtype) {
  return Tensor(runtime::Array::zeros(dtype, shape));
}
Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
// With unknown dimensions (a shape-polymorphic trace) the value is broadcast like x.
Tensor full_like(const Tensor& x, double value) {
  if (!x.shape().is_fully_known()) return broadcast_like(scalar(value, x.dtype()), x);
  return full(x.shape(), value, x.dtype());
}
Tensor zeros_like(const Tensor& x) { return full_like(x, 0); }
Tensor ones_like(const Tensor& x) { return full_like(x, 1); }
Tensor scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor arange(double start, double stop, double step, DType dtype) {
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop))
    throw Error(
        fmt::format("arange: start {}, stop {} and step {} must be finite and step "
                    "non-zero",
                    start, stop, step));
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil((stop - start) / step)));
  runtime::Array a = runtime::Array::empty(dtype, Shape{n});
  visit_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = a.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = storage_from_double<T>(start + double(i) * step);
  });
  return Tensor(std::move(a));
}

namespace detail {
Tensor tensor_from_bytes(DType dtype, const Shape& shape, const void* data, size_t count) {
  if (int64_t(count) != shape.num_elements())
    throw Error(fmt::format("tensor: got {} values for shape {}, which holds {}", count,
                            shape.to_string(), shape.num_elements()));
  runtime::Array a = runtime::Array::empty(dtype, shape);
  if (count) std::memcpy(a.raw(), data, count * dtype_size(dtype));
  return Tensor(std::move(a));
}
}  // namespace detail

Tensor tensor(const std::vector<double>& data, const Shape& shape, DType dtype) {
  if (int64_t(data.size()) != shape.num_elements())
    throw Error(fmt::format("tensor: got {} values for shape {}, which holds {}", data.size(),
                            shape.to_string(), shape.num_elements()));
  runtime::Array a = runtime::Array::empty(dtype, shape);
  visit_storage(dtype, [&](auto tag) {  // bfloat16: each value rounded once (nearest even)
    using T = typename decltype(tag)::type;
    T* p = a.data<T>();
    for (size_t i = 0; i < data.size(); ++i) p[i] = storage_from_double<T>(data[i]);
  });
  return Tensor(std::move(a));
}

namespace {
Tensor seed_tensor(int64_t seed) { return tensor(std::vector<int64_t>{seed}, Shape{}); }

Attrs uniform_attrs(double minval, double maxval, DType dtype) {
  return Attrs{{"dtype", dtype}, {"minval", minval}, {"maxval", maxval}};
}
Attrs normal_attrs(double mean, double stddev, DType dtype) {
  return Attrs{{"dtype", dtype}, {"mean", mean}, {"stddev", stddev}};
}
Attrs integer_attrs(int64_t minval, int64_t maxval, DType dtype) {
  return Attrs{{"dtype", dtype}, {"minval", minval}, {"maxval", maxval}};
}

// The random op of a fully known shape (attributes: "shape" first, then `attrs`).
Tensor random_shaped(OpKind kind, const Shape& shape, const Tensor& seed, const Attrs& attrs) {
  if (!seed.defined())
    throw Error(fmt::format("{}: the seed is an undefined tensor", op_name(kind)));
  Attrs all{{"shape", shape.to_vector()}};
  for (const auto& [name, value] : attrs.items()) all.set(name, value);
  return detail::apply(kind, {seed}, all);
}

// The random op with `like` as its shape source (input 1).
Tensor random_like(OpKind kind, const Tensor& like, const Tensor& seed, Attrs attrs) {
  if (!like.defined())
    throw Error(fmt::format("{}_like: the shape source is an undefined tensor", op_name(kind)));
  if (!seed.defined())
    throw Error(fmt::format("{}_like: the seed is an undefined tensor", op_name(kind)));
  attrs.set("shape", like.shape().to_vector());
  return detail::apply(kind, {seed, like}, attrs);
}
}  // namespace

Tensor random_uniform(const Shape& shape, const Tensor& seed, double minval, double maxval,
                      DType dtype) {
  return random_shaped(OpKind::RandomUniform, shape, seed, uniform_attrs(minval, maxval, dtype));
}
Tensor random_normal(const Shape& shape, const Tensor& seed, double mean, double stddev,
                     DType dtype) {
  return random_shaped(OpKind::RandomNormal, shape, seed, normal_attrs(mean, stddev, dtype));
}
Tensor random_integers(const Shape& shape, const Tensor& seed, int64_t minval, int64_t maxval,
                       DType dtype) {
  return random_shaped(OpKind::RandomInt, shape, seed, integer_attrs(minval, maxval, dtype));
}

Tensor random_uniform_like(const Tensor& like, const Tensor& seed, double minval, double maxval,
                           DType dtype) {
  return random_like(OpKind::RandomUniform, like, seed, uniform_attrs(minval, maxval, dtype));
}
Tensor random_normal_like(const Tensor& like, const Tensor& seed, double mean, double stddev,
                          DType dtype) {
  return random_like(OpKind::RandomNormal, like, seed, normal_attrs(mean, stddev, dtype));
}
Tensor random_integers_like(const Tensor& like, const Tensor& seed, int64_t minval, int64_t maxval,
                            DType dtype) {
  return random_like(OpKind::RandomInt, like, seed, integer_attrs(minval, maxval, dtype));
}

Tensor random_uniform(const Shape& shape, int64_t seed, double minval, double maxval, DType dtype) {
  return random_uniform(shape, seed_tensor(seed), minval, maxval, dtype);
}
Tensor random_normal(const Shape& shape, int64_t seed, double mean, double stddev, DType dtype) {
  return random_normal(shape, seed_tensor(seed), mean, stddev, dtype);
}
Tensor random_integers(const Shape& shape, int64_t seed, int64_t minval, int64_t maxval,
                       DType dtype) {
  return random_integers(shape, seed_tensor(seed), minval, maxval, dtype);
}

Tensor random_uniform_like(const Tensor& like, int64_t seed, double minval, double maxval,
                           DType dtype) {
  return random_uniform_like(like, seed_tensor(seed), minval, maxval, dtype);
}
Tensor random_normal_like(const Tensor& like, int64_t seed, double mean, double stddev,
                          DType dtype) {
  return random_normal_like(like, seed_tensor(seed), mean, stddev, dtype);
}
Tensor random_integers_like(const Tensor& like, int64_t seed, int64_t minval, int64_t maxval,
                            DType dtype) {
  return random_integers_like(like, seed_tensor(seed), minval, maxval, dtype);
}

int64_t Generator::next_seed() {
  // splitmix64 of (seed, counter): well-mixed, distinct seeds for consecutive draws.
  uint64_t z = seed_ + 0x9E3779B97F4A7C15ull * (++counter_);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return int64_t(z ^ (z >> 31));
}

Tensor Generator::uniform(const Shape& shape, double minval, double maxval, DType dtype) {
  return random_uniform(shape, next_seed(), minval, maxval, dtype);
}
Tensor Generator::normal(const Shape& shape, double mean, double stddev, DType dtype) {
  return random_normal(shape, next_seed(), mean, stddev, dtype);
}
Tensor Generator::integers(const Shape& shape, int64_t minval, int64_t maxval, DType dtype) {
  return random_integers(shape, next_seed(), minval, maxval, dtype);
}

}  // namespace kiln
