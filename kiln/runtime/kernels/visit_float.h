// Internal to the float-only eager kernels (conv.cc, pool.cc): calls fn(TypeTag<float>) or
// fn(TypeTag<double>) for a float32 or float64 dtype; any other dtype is a kiln::Error naming
// the op.
#pragma once

#include <fmt/format.h>

#include "kiln/ir/dtype.h"
#include "kiln/ir/error.h"

namespace kiln::runtime {

template <typename F>
void visit_float(DType t, const char* op, F&& fn) {
  if (t == DType::f32) return fn(TypeTag<float>{});
  if (t == DType::f64) return fn(TypeTag<double>{});
  throw Error(fmt::format("{}: only float32 and float64 are supported, got {}", op, dtype_name(t)));
}

}  // namespace kiln::runtime
