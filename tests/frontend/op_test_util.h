// Helpers shared by the frontend op tests: building tensors from doubles, comparing a tensor
// with expected values, naive numpy-broadcasting references, and catching kiln::Error.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::test {

inline constexpr DType kFloatDTypes[] = {DType::f32, DType::f64};
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The value `v` becomes when stored as `dtype` (bool: v != 0).
inline double stored(double v, DType dtype) {
  return visit_storage(dtype, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return v != 0 ? 1.0 : 0.0;
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      return double(bfloat16::from_double(v).to_float());
    } else {
      return static_cast<double>(static_cast<T>(v));
    }
  });
}

// The message of the kiln::Error that fn throws; "<no exception>" if it returns normally and
// "<other exception: ...>" if it throws something else, so EXPECT_THAT(..., HasSubstr(...))
// shows what happened on failure.
template <typename F>
std::string error_message(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other exception: ") + e.what() + ">";
  }
  return "<no exception>";
}

// Relative + absolute tolerance per dtype for results of a few float operations.
inline double default_rtol(DType dtype) {
  return dtype == DType::f32 ? 2e-6 : (dtype == DType::f64 ? 1e-13 : 0.0);
}

// Checks dtype, shape and every value (NaN matches NaN, infinities must match exactly).
inline void expect_tensor(const Tensor& t, DType dtype, const Shape& shape,
                          const std::vector<double>& want, double rtol = -1, double atol = 0) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(dtype_name(t.dtype()), dtype_name(dtype));
  ASSERT_EQ(t.shape().to_string(), shape.to_string());
  ASSERT_EQ(static_cast<size_t>(t.size()), want.size());
  if (rtol < 0) rtol = default_rtol(dtype);
  std::vector<double> got = t.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < want.size() && reported < 10; ++i) {
    double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok) {
      ++reported;
      ADD_FAILURE() << "element " << i << ": got " << g << ", want " << w << " (rtol " << rtol
                    << ", atol " << atol << ")";
    }
  }
}

// Bitwise equality of two tensors (same dtype, shape and bytes).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  size_t bytes = static_cast<size_t>(a.size()) * dtype_size(a.dtype());
  return bytes == 0 || std::memcmp(a.array().raw(), b.array().raw(), bytes) == 0;
}

// numpy broadcasting of two shapes, computed independently of kiln.
inline std::vector<int64_t> ref_broadcast_shape(const std::vector<int64_t>& a,
                                                const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Flat offset into an array of shape `in` (right-aligned against `out`) of output index `idx`,
// broadcasting size-1 dimensions.
inline int64_t ref_broadcast_offset(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                    const std::vector<int64_t>& idx) {
  int64_t off = 0;
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) off = off * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

// Calls fn(flat, index) for every index of `shape` in row-major order.
inline void for_each_index(const std::vector<int64_t>& shape,
                           const std::function<void(int64_t, const std::vector<int64_t>&)>& fn) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(flat, idx);
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
}

// out = f(a, b) with numpy broadcasting, on plain vectors.
inline std::vector<double> ref_binary(const std::vector<double>& a, const std::vector<int64_t>& as,
                                      const std::vector<double>& b, const std::vector<int64_t>& bs,
                                      const std::function<double(double, double)>& f) {
  std::vector<int64_t> os = ref_broadcast_shape(as, bs);
  std::vector<double> out;
  for_each_index(os, [&](int64_t, const std::vector<int64_t>& idx) {
    out.push_back(f(a[size_t(ref_broadcast_offset(as, os, idx))],
                    b[size_t(ref_broadcast_offset(bs, os, idx))]));
  });
  return out;
}

// Deterministic pseudo-random doubles in [lo, hi) (an LCG, so tests do not depend on kiln's RNG).
inline std::vector<double> test_values(size_t n, double lo, double hi, uint64_t seed = 1) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * double(s >> 11) / double(1ull << 53);
  }
  return v;
}

// Values rounded to what `dtype` stores, so references see exactly the tensor's inputs.
inline std::vector<double> rounded(std::vector<double> v, DType dtype) {
  for (auto& x : v) x = stored(x, dtype);
  return v;
}

}  // namespace kiln::test
