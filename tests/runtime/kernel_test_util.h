// Helpers shared by the eager reduction and softmax kernel tests: an array's elements as
// doubles, and the check that a kernel gives the same bits at any thread count.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime::kernel_test {

// The elements of `a` (any numeric dtype), converted to double.
inline std::vector<double> doubles_of(const Array& a) {
  std::vector<double> v(size_t(a.size()));
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < a.size(); ++i) v[size_t(i)] = double(a.data<T>()[i]);
  });
  return v;
}

// Runs `fn` (returning an Array) at 1, 2 and 3 threads and expects bitwise identical results.
template <typename F>
void expect_same_on_any_thread_count(F&& fn) {
  const int saved = num_threads();
  set_num_threads(1);
  Array ref = fn();
  for (int t : {2, 3}) {
    set_num_threads(t);
    Array y = fn();
    ASSERT_EQ(y.shape, ref.shape) << "threads: " << t;
    EXPECT_EQ(std::memcmp(y.raw(), ref.raw(), y.nbytes()), 0) << "threads: " << t;
  }
  set_num_threads(saved);
}

}  // namespace kiln::runtime::kernel_test
