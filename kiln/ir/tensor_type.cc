#include "kiln/ir/tensor_type.h"

namespace kiln {

std::string TensorType::to_string() const {
  std::string s(dtype_short_name(dtype));
  s += "[";
  for (int i = 0; i < shape.rank(); ++i) {
    if (i) s += ",";
    s += shape[i] == kUnknownDim ? std::string("?") : std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace kiln
