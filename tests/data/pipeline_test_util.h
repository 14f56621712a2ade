// Helpers of the data pipeline tests (tests/data/pipeline_*_test.cc): small example tensors
// with values that name their row, and a pass collected into a vector.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::data::test {

// x float32 [n, cols] with x[i][j] = 100 i + j; y int64 [n] with y[i] = i.
inline Tensor rows_x(int64_t n, int64_t cols = 3) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cols; ++j) v.push_back(float(100 * i + j));
  return tensor(v, {n, cols});
}
inline Tensor rows_y(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return tensor(v);
}

// Every element of pass `pass`.
inline std::vector<Element> collect(const Dataset& ds, uint64_t pass) {
  std::vector<Element> out;
  Dataset::Iterator it = ds.begin_pass(pass);
  while (std::optional<Element> e = it.next()) out.push_back(std::move(*e));
  return out;
}

// The single y tensor of every element, as int64 values, concatenated.
inline std::vector<int64_t> y_values(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const Element& e : elements)
    for (int64_t v : e.y.tensors().at(0).to_vector<int64_t>()) out.push_back(v);
  return out;
}

// The same dtype, shape and values.
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  return a.to_vector<double>() == b.to_vector<double>();
}

}  // namespace kiln::data::test
