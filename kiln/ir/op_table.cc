#include "kiln/ir/op_table.h"

#include <fmt/format.h>

#include <string>
#include <unordered_map>

#include "kiln/ir/shape_rules.h"

namespace kiln {
namespace {

using enum DTypeClass;

std::vector<AttrSpec> parse_schema(const char* op, std::string_view schema) {
  std::vector<AttrSpec> specs;
  while (!schema.empty()) {
    size_t comma = schema.find(',');
    std::string_view item = schema.substr(0, comma);
    schema = comma == std::string_view::npos ? std::string_view{} : schema.substr(comma + 1);
    size_t colon = item.find(':');
    KILN_ASSERT(colon != std::string_view::npos, std::string("bad attribute schema for ") + op);
    std::string_view kind = item.substr(colon + 1);
    AttrKind k;
    if (kind == "int")
      k = AttrKind::i64;
    else if (kind == "float")
      k = AttrKind::f64;
    else if (kind == "bool")
      k = AttrKind::boolean;
    else if (kind == "str")
      k = AttrKind::str;
    else if (kind == "ints")
      k = AttrKind::i64s;
    else if (kind == "dtype")
      k = AttrKind::dtype;
    else
      internal_error(__FILE__, __LINE__, std::string("bad attribute kind in schema of ") + op);
    specs.push_back({std::string(item.substr(0, colon)), k});
  }
  return specs;
}

std::vector<OpInfo> build_table() {
  using namespace rules;
  std::vector<OpInfo> t;
#define KILN_OP(e, name, arity, traits, dtypes, fusion, codegen, attrs, rule)    \
  t.push_back(OpInfo{OpKind::e, name, arity, traits, dtypes, FusionRole::fusion, \
                     Lowering::codegen, parse_schema(name, attrs), &rule});
#include "kiln/ir/ops.def"
#undef KILN_OP
  return t;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = build_table();
  return t;
}

}  // namespace

bool dtype_in_class(DType t, DTypeClass c) {
  switch (c) {
    case Float:
      return is_floating(t);
    case Numeric:
      return is_numeric(t);
    case Bool:
      return t == DType::b8;
    case Any:
      return true;
  }
  return false;
}

std::string_view dtype_class_description(DTypeClass c) {
  switch (c) {
    case Float:
      return "a floating dtype (float32 or float64)";
    case Numeric:
      return "a numeric dtype (not bool)";
    case Bool:
      return "bool";
    case Any:
      return "any dtype";
  }
  return "?";
}

std::string_view fusion_role_name(FusionRole r) {
  switch (r) {
    case FusionRole::NoFusion:
      return "none";
    case FusionRole::Loop:
      return "loop";
    case FusionRole::Reduction:
      return "reduction";
    case FusionRole::Contraction:
      return "contraction";
  }
  return "?";
}

const OpInfo& op_info(OpKind kind) { return table()[size_t(kind)]; }

std::optional<OpKind> find_op(std::string_view name) {
  static const std::unordered_map<std::string_view, OpKind> by_name = [] {
    std::unordered_map<std::string_view, OpKind> m;
    for (const OpInfo& op : table()) m.emplace(op.name, op.kind);
    return m;
  }();
  auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

std::span<const OpInfo> all_ops() { return table(); }

TensorType infer_type(OpKind kind, std::span<const TensorType> inputs, const Attrs& attrs) {
  const OpInfo& op = op_info(kind);
  if (op.arity >= 0 && int(inputs.size()) != op.arity)
    throw Error(fmt::format("{}: expected {} input{}, got {}", op.name, op.arity,
                            op.arity == 1 ? "" : "s", inputs.size()));
  if (op.arity < 0 && inputs.empty())
    throw Error(fmt::format("{}: expected at least one input, got none", op.name));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!dtype_in_class(inputs[i].dtype, op.dtypes))
      throw DTypeError(fmt::format("{}: input {} has dtype {}, but {} needs {}", op.name, i,
                                   dtype_name(inputs[i].dtype), op.name,
                                   dtype_class_description(op.dtypes)));
  }
  if (attrs.size() != op.attrs.size() || !attrs.empty()) {
    for (const AttrSpec& spec : op.attrs) {
      const AttrValue* v = attrs.find(spec.name);
      if (!v) throw Error(fmt::format("{}: missing attribute \"{}\"", op.name, spec.name));
      AttrKind got = attr_kind_of(*v);
      bool ok = got == spec.kind || (spec.kind == AttrKind::f64 && got == AttrKind::i64);
      if (!ok)
        throw Error(fmt::format("{}: attribute \"{}\" must be of type {}, got {} ({})", op.name,
                                spec.name, attr_kind_name(spec.kind), attr_kind_name(got),
                                attr_value_to_string(*v)));
    }
    for (const auto& [name, v] : attrs.items()) {
      bool known = false;
      for (const AttrSpec& spec : op.attrs) known = known || spec.name == name;
      if (!known) {
        std::string expected;
        for (const AttrSpec& s : op.attrs) expected += (expected.empty() ? "" : ", ") + s.name;
        throw Error(fmt::format("{}: unknown attribute \"{}\" (expected: {})", op.name, name,
                                expected.empty() ? std::string("none") : expected));
      }
    }
  }
  return op.rule(op, inputs, attrs);
}

}  // namespace kiln
