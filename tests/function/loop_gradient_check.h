// Checks shared by the loop gradient tests (while_gradient_test.cc, scan_test.cc): central
// finite differences of an eager float64 function, and closeness of a traced result to the
// eager one with a tolerance derived from the number of terms summed in another order.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln::test {

// The execution modes a loop test compares: the reference executor and the compiled step.
inline constexpr ExecutionMode kModes[] = {ExecutionMode::kReference, ExecutionMode::kCompiled};

// A function of float64 tensors returning one float64 tensor, run eagerly.
using Forward = std::function<Tensor(const std::vector<Tensor>&)>;

// d/d(inputs[i]) of L = sum(forward(inputs) * weights) by central differences (eager,
// float64), one element at a time.
inline std::vector<double> finite_difference(const Forward& forward,
                                             const std::vector<Tensor>& inputs, size_t i,
                                             const Tensor& weights, double eps) {
  std::vector<double> base = inputs[i].to_vector<double>(), out(base.size());
  for (size_t j = 0; j < base.size(); ++j) {
    std::vector<Tensor> args = inputs;
    std::vector<double> v = base;
    v[j] = base[j] + eps;
    args[i] = tensor(v, inputs[i].shape(), DType::f64);
    double plus = sum(forward(args) * weights).item<double>();
    v[j] = base[j] - eps;
    args[i] = tensor(v, inputs[i].shape(), DType::f64);
    double minus = sum(forward(args) * weights).item<double>();
    out[j] = (plus - minus) / (2 * eps);
  }
  return out;
}

// `got` equals the finite differences `fd` within gradcheck's float64 tolerance (derived from
// its step: truncation O(eps^2), rounding O(u / eps)).
inline void expect_matches_fd(const Tensor& got, const std::vector<double>& fd,
                              const std::string& what) {
  const gradcheck::Options o;
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), fd.size()) << what;
  for (size_t j = 0; j < g.size(); ++j) {
    double tol = o.atol + o.rtol * std::max(std::abs(g[j]), std::abs(fd[j]));
    EXPECT_LE(std::abs(g[j] - fd[j]), tol)
        << what << " element " << j << ": " << g[j] << " vs finite difference " << fd[j];
  }
}

// The traced gradient equals the eager (tape-unrolled) one up to summation order: each
// element is a sum of at most `terms` products, accumulated in another order, so the two may
// differ by terms * u * (the largest magnitude involved), u = 2^-52. (On the compiled path the
// JIT's vector tanh/exp add their documented few-ulp error per step; `terms` counts them.)
inline void expect_close(const Tensor& traced, const Tensor& eager, double terms,
                         const std::string& what) {
  ASSERT_EQ(traced.type(), eager.type()) << what;
  std::vector<double> a = traced.to_vector<double>(), b = eager.to_vector<double>();
  double scale = 0;
  for (size_t j = 0; j < a.size(); ++j) scale = std::max({scale, std::abs(a[j]), std::abs(b[j])});
  for (size_t j = 0; j < a.size(); ++j)
    EXPECT_LE(std::abs(a[j] - b[j]), terms * 0x1p-52 * scale)
        << what << " element " << j << ": traced " << a[j] << ", eager " << b[j];
}

}  // namespace kiln::test
