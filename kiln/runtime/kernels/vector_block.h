// A 64-byte block of values (16 floats, 8 doubles) as a GCC vector, for eager kernels written
// with explicit vectors where the compiler's loop vectorizer does not keep a block in registers
// (the direct convolutions of conv_shallow.cc, conv.cc's col2im): one AVX-512 register, two
// AVX2 ones, four SSE ones. load/store copy exactly n values, so a partial block never touches
// memory past its end.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln::runtime::vector_block {

template <typename T>
struct Vec;
template <>
struct Vec<float> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct Vec<double> {
  typedef double type __attribute__((vector_size(64)));
};
template <typename T>
using V = typename Vec<T>::type;
template <typename T>
constexpr int64_t kLanes = 64 / int64_t(sizeof(T));

// The first n (<= kLanes) values at p, the rest zeros; kFull: n == kLanes (one vector load, a
// constant-size copy).
template <bool kFull, typename T>
V<T> load(const T* p, int64_t n) {
  V<T> v = {};
  std::memcpy(&v, p, kFull ? sizeof(V<T>) : size_t(n) * sizeof(T));
  return v;
}
template <bool kFull, typename T>
void store(T* p, const V<T>& v, int64_t n) {
  std::memcpy(p, &v, kFull ? sizeof(V<T>) : size_t(n) * sizeof(T));
}

}  // namespace kiln::runtime::vector_block
