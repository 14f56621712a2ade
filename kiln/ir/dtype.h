// Element types of tensors, their sizes and names, and a compile-time dispatch helper.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"

namespace kiln {

// bf16 is last (values are stable); it is a storage dtype: ops say what they do with it in the
// bf16 column of ir/ops.def, and visit_dtype never visits it (see below).
enum class DType : uint8_t { f32, f64, i32, i64, b8, u8, bf16 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::i32, DType::i64,
                                       DType::b8,  DType::u8,  DType::bf16};

// numpy / TensorFlow style name: "float32", "int64", "bool".
std::string_view dtype_name(DType t);
// Short name used in IR text: "f32", "i64", "bool".
std::string_view dtype_short_name(DType t);
// Accepts either the long or the short name; throws kiln::Error otherwise.
DType parse_dtype(std::string_view name);
size_t dtype_size(DType t);
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }
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
  else if constexpr (std::is_same_v<T, bfloat16>)
    return DType::bf16;
  else
    static_assert(sizeof(T) == 0, "no kiln dtype for this C++ type");
}

[[noreturn]] void bf16_reached_visit_dtype();

// Calls fn(TypeTag<T>{}) with the C++ type of `t`: one of the compute types (float, double,
// int32_t, int64_t, bool, uint8_t). bfloat16 is not one: the op table's bf16 column decides
// what an op does with it before a kernel runs (ViaF32 ops run their float32 kernels), so a
// bf16 value here is an internal mistake and throws kiln::Error naming bfloat16. Kernels that
// only move elements use visit_storage.
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
    case DType::bf16:
      bf16_reached_visit_dtype();
  }
  internal_error(__FILE__, __LINE__, "bad dtype value");
}

// Like visit_dtype, with bfloat16 visited as its storage type (fn(TypeTag<bfloat16>{})): for
// kernels that move, compare bits of or convert elements themselves.
template <typename Fn>
decltype(auto) visit_storage(DType t, Fn&& fn) {
  if (t == DType::bf16) return fn(TypeTag<bfloat16>{});
  return visit_dtype(t, std::forward<Fn>(fn));
}

// Explicit conversions for code generic over visit_storage's types: a value of T from a double
// or an int64 (bfloat16: one rounding to nearest even; others: static_cast) and T's value as a
// compute type (bfloat16: its exact float; others: itself).
template <typename T>
T storage_from_double(double v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16::from_double(v);
  else
    return static_cast<T>(v);
}
// A value of T from an int64: bfloat16 one rounding to nearest even (bfloat16::from_int64);
// others static_cast (to float32 and float64 one rounding too).
template <typename T>
T storage_from_int64(int64_t v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16::from_int64(v);
  else
    return static_cast<T>(v);
}
template <typename T>
auto storage_value(T v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return v.to_float();
  else
    return v;
}

}  // namespace kiln
