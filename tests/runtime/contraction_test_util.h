// Helpers shared by the eager contraction and window kernel tests (contraction_kernels_test.cc,
// pool_kernels_test.cc): random arrays, values as double, tolerance and bitwise comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/runtime/kernels.h"

namespace kiln::runtime::contraction_test {

using Ints = std::vector<int64_t>;

inline Array random_array(DType dt, const Shape& s, std::mt19937_64& rng) {
  Array a = Array::empty(dt, s);
  visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>)
        p[i] = T(std::uniform_real_distribution<double>(-1, 1)(rng));
      else if constexpr (std::is_same_v<T, uint8_t>)
        p[i] = T(rng() % 256);
      else if constexpr (!std::is_same_v<T, bool>)
        p[i] = T(int64_t(rng() % 21) - 10);
    }
  });
  return a;
}

inline std::vector<double> as_double(const Array& a) {
  std::vector<double> v(size_t(a.size()));
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) v[size_t(i)] = double(p[i]);
  });
  return v;
}

inline void expect_close(const Array& got, const std::vector<double>& want, double tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), int64_t(want.size())) << what;
  std::vector<double> g = as_double(got);
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(g[i], want[i], tol * scale) << what << " at flat index " << i;
}

inline bool bitwise_equal(const Array& a, const Array& b) {
  return a.shape == b.shape && a.dtype == b.dtype && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// TensorFlow's output size and padding before, computed independently of the library.
inline void tf_window(int64_t in, int64_t k, int64_t s, int64_t d, const std::string& padding,
                      int64_t& out, int64_t& pad) {
  int64_t eff = (k - 1) * d + 1;
  if (padding == "valid") {
    out = (in - eff + s) / s;
    pad = 0;
  } else {
    out = (in + s - 1) / s;
    pad = std::max<int64_t>(0, (out - 1) * s + eff - in) / 2;
  }
}

}  // namespace kiln::runtime::contraction_test
