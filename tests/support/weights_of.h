// Test helper: a model's weights as float32 vectors, to compare two training runs exactly.
#pragma once

#include <vector>

#include "kiln/kiln.h"

namespace kiln::test {

// Every weight of `m` (Model::get_weights order), each flattened and converted to float32.
inline std::vector<std::vector<float>> weights_of(const Model& m) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : m->get_weights()) out.push_back(t.to_vector<float>());
  return out;
}

}  // namespace kiln::test
