#include "kiln/ir/dtype.h"

#include <fmt/format.h>

namespace kiln {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::b8:
      return "bool";
    case DType::u8:
      return "uint8";
    case DType::bf16:
      return "bfloat16";
  }
  return "?";
}

std::string_view dtype_short_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::b8:
      return "bool";
    case DType::u8:
      return "u8";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes) {
    if (name == dtype_name(t) || name == dtype_short_name(t)) return t;
  }
  throw Error(fmt::format(
      "unknown dtype \"{}\": expected one of float32 (f32), float64 (f64), int32 (i32), "
      "int64 (i64), bool, uint8 (u8), bfloat16 (bf16)",
      name));
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
    case DType::b8:
      return 1;
    case DType::u8:
      return 1;
    case DType::bf16:
      return 2;
  }
  return 0;
}

void bf16_reached_visit_dtype() {
  throw Error(
      "internal error: a bfloat16 value reached a kernel that computes per dtype (visit_dtype); "
      "the op table's bf16 column should have widened it to float32 first (ir/ops.def)");
}

}  // namespace kiln
