#include "kiln/ir/attrs.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

namespace kiln {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::i64:
      return "int";
    case AttrKind::f64:
      return "float";
    case AttrKind::boolean:
      return "bool";
    case AttrKind::str:
      return "string";
    case AttrKind::i64s:
      return "int list";
    case AttrKind::dtype:
      return "dtype";
  }
  return "?";
}

AttrKind attr_kind_of(const AttrValue& v) { return AttrKind(v.index()); }

std::string attr_value_to_string(const AttrValue& v) {
  switch (attr_kind_of(v)) {
    case AttrKind::i64:
      return std::to_string(std::get<int64_t>(v));
    case AttrKind::f64: {
      double d = std::get<double>(v);
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      // Shortest text that reads back to the same double.
      char buf[64];
      for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (std::strtod(buf, nullptr) == d) break;
      }
      std::string s = buf;
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      return s;
    }
    case AttrKind::boolean:
      return std::get<bool>(v) ? "true" : "false";
    case AttrKind::str:
      return "\"" + std::get<std::string>(v) + "\"";
    case AttrKind::i64s:
      return fmt::format("[{}]", fmt::join(std::get<std::vector<int64_t>>(v), ", "));
    case AttrKind::dtype:
      return std::string(dtype_short_name(std::get<DType>(v)));
  }
  return "?";
}

Attrs& Attrs::set(std::string name, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == name) {
      v = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(std::move(name), std::move(value));
  return *this;
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

const AttrValue& Attrs::require(std::string_view name, const char* op) const {
  const AttrValue* v = find(name);
  if (!v) throw Error(fmt::format("{}: missing attribute \"{}\"", op, name));
  return *v;
}

namespace {
template <typename T>
const T& typed(const AttrValue& v, std::string_view name, const char* op, AttrKind want) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  throw Error(fmt::format("{}: attribute \"{}\" must be of type {}, got {} ({})", op, name,
                          attr_kind_name(want), attr_kind_name(attr_kind_of(v)),
                          attr_value_to_string(v)));
}
}  // namespace

int64_t Attrs::get_int(std::string_view n, const char* op) const {
  return typed<int64_t>(require(n, op), n, op, AttrKind::i64);
}
double Attrs::get_double(std::string_view n, const char* op) const {
  const AttrValue& v = require(n, op);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return double(*i);
  return typed<double>(v, n, op, AttrKind::f64);
}
bool Attrs::get_bool(std::string_view n, const char* op) const {
  return typed<bool>(require(n, op), n, op, AttrKind::boolean);
}
const std::string& Attrs::get_string(std::string_view n, const char* op) const {
  return typed<std::string>(require(n, op), n, op, AttrKind::str);
}
const std::vector<int64_t>& Attrs::get_ints(std::string_view n, const char* op) const {
  return typed<std::vector<int64_t>>(require(n, op), n, op, AttrKind::i64s);
}
DType Attrs::get_dtype(std::string_view n, const char* op) const {
  return typed<DType>(require(n, op), n, op, AttrKind::dtype);
}

}  // namespace kiln
