// Helpers shared by the eager layout and indexing kernel tests (tests/runtime/*_kernels_test.cc):
// random arrays, element access by bytes, (un)ravelling indices and a bitwise comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime::layout_test {

using Index = std::vector<int64_t>;

inline Array random_elements(DType dt, const Shape& s, std::mt19937_64& rng) {
  Array a = Array::empty(dt, s);
  visit_storage(dt, [&](auto tag) {  // bfloat16 too: these kernels move its 2-byte elements
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>)
        p[i] = (rng() & 1) != 0;
      else if constexpr (std::is_same_v<T, bfloat16>)
        p[i] = bfloat16::from_double(std::uniform_real_distribution<double>(-10, 10)(rng));
      else if constexpr (std::is_floating_point_v<T>)
        p[i] = T(std::uniform_real_distribution<double>(-10, 10)(rng));
      else
        p[i] = T(rng() % 100);
    }
  });
  return a;
}

template <typename T>
Array make(const Shape& s, const std::vector<T>& v) {
  Array a = Array::empty(dtype_of<T>(), s);
  EXPECT_EQ(int64_t(v.size()), a.size());
  std::copy(v.begin(), v.end(), a.data<T>());
  return a;
}

template <typename T>
std::vector<T> values(const Array& a) {
  return std::vector<T>(a.data<T>(), a.data<T>() + a.size());
}

inline Index unravel(int64_t flat, const Shape& s) {
  Index idx(size_t(s.rank()));
  for (int i = s.rank() - 1; i >= 0; --i) {
    idx[size_t(i)] = flat % s[i];
    flat /= s[i];
  }
  return idx;
}

inline int64_t ravel(const Index& idx, const Shape& s) {
  int64_t f = 0;
  for (int i = 0; i < s.rank(); ++i) f = f * s[i] + idx[size_t(i)];
  return f;
}

// Element `i` of `a` as raw bytes.
inline const char* elem(const Array& a, int64_t i) {
  return static_cast<const char*>(a.raw()) + i * int64_t(dtype_size(a.dtype));
}
inline char* elem(Array& a, int64_t i) {
  return static_cast<char*>(a.raw()) + i * int64_t(dtype_size(a.dtype));
}
inline void copy_elem(const Array& from, int64_t i, Array& to, int64_t j) {
  std::memcpy(elem(to, j), elem(from, i), dtype_size(from.dtype));
}

inline void expect_same(const Array& got, const Array& want) {
  ASSERT_EQ(got.dtype, want.dtype);
  ASSERT_EQ(got.shape, want.shape) << got.shape.to_string() << " vs " << want.shape.to_string();
  for (int64_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(elem(got, i), elem(want, i), dtype_size(got.dtype)), 0)
        << "element " << i << " of " << got.shape.to_string() << " (" << dtype_name(got.dtype)
        << ")";
}

inline Array run(OpKind k, std::vector<Array> in, const Attrs& attrs) {
  return run_op(k, in, attrs);
}

// Sets kiln's thread count for a scope.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace kiln::runtime::layout_test
