// TensorType: dtype plus shape, the static type of every value in kiln (eager or traced).
#pragma once

#include <string>

#include "kiln/ir/dtype.h"
#include "kiln/ir/shape.h"

namespace kiln {

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  // IR text form: f32[64,256], bool[], i64[?,10].
  std::string to_string() const;
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
};

}  // namespace kiln
