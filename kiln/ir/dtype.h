// Element types of tensors, their sizes and names, and a compile-time dispatch helper.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "kiln/ir/error.h"

namespace kiln {

enum class DType : uint8_t { f32, f64, i32, i64, b8, u8 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::i32,
                                       DType::i64, DType::b8,  DType::u8};

// numpy / TensorFlow style name: "float32", "int64", "bool".
std::string_view dtype_name(DType t);
// Short name used in IR text: "f32", "i64", "bool".
std::string_view dtype_short_name(DType t);
// Accepts either the long or the short name; throws kiln::Error otherwise.
DType parse_dtype(std::string_view name);
size_t dtype_size(DType t);
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
inline bool is_integer(DType t) { return t == DType::i32 || t == DType::i64 || t == DType::u8; }
inline bool is_numeric(DType t) { return t != DType::b8; }

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::f64;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::i64;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::b8;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::u8;
  else
    static_assert(sizeof(T) == 0, "no kiln dtype for this C++ type");
}

// Calls fn(TypeTag<T>{}) with the C++ type of `t`.
template <typename Fn>
decltype(auto) visit_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32:
      return fn(TypeTag<float>{});
    case DType::f64:
      return fn(TypeTag<double>{});
    case DType::i32:
      return fn(TypeTag<int32_t>{});
    case DType::i64:
      return fn(TypeTag<int64_t>{});
    case DType::b8:
      return fn(TypeTag<bool>{});
    case DType::u8:
      return fn(TypeTag<uint8_t>{});
  }
  internal_error(__FILE__, __LINE__, "bad dtype value");
}

}  // namespace kiln
