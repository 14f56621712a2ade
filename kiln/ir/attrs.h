// Attrs: the named, typed attributes of one op call (axes, perm, alpha, dtype, padding...).
// Stored as a small vector; an op without attributes costs no allocation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/ir/dtype.h"

namespace kiln {

enum class AttrKind : uint8_t { i64, f64, boolean, str, i64s, dtype };
using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, DType>;

std::string_view attr_kind_name(AttrKind k);
AttrKind attr_kind_of(const AttrValue& v);
// Text form used by the IR printer and error messages: 3, 0.5, true, "same", [0, 2], f32.
std::string attr_value_to_string(const AttrValue& v);

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  Attrs& set(std::string name, AttrValue value);
  bool has(std::string_view name) const { return find(name) != nullptr; }
  const AttrValue* find(std::string_view name) const;

  // Typed getters; throw kiln::Error naming `op` when the attribute is missing or mistyped.
  int64_t get_int(std::string_view name, const char* op) const;
  double get_double(std::string_view name, const char* op) const;
  bool get_bool(std::string_view name, const char* op) const;
  const std::string& get_string(std::string_view name, const char* op) const;
  const std::vector<int64_t>& get_ints(std::string_view name, const char* op) const;
  DType get_dtype(std::string_view name, const char* op) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  friend bool operator==(const Attrs& a, const Attrs& b) { return a.items_ == b.items_; }

 private:
  const AttrValue& require(std::string_view name, const char* op) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace kiln
