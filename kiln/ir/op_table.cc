#include "kiln/ir/op_table.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "kiln/ir/shape_rules.h"

namespace kiln {
namespace {

using enum DTypeClass;

[[noreturn]] void bad_schema(const char* op, std::string_view item, std::string_view why) {
  internal_error(
      __FILE__, __LINE__,
      fmt::format("bad attribute schema of {} in ir/ops.def at \"{}\": {}", op, item, why));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

int64_t parse_int(const char* op, std::string_view item, std::string_view text) {
  text = trim(text);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    bad_schema(op, item, fmt::format("\"{}\" is not an int", text));
  return v;
}

// A default in the IR's text form of its kind: -1, 0.2, true, "valid", [1, 1], f32.
AttrValue parse_default(const char* op, std::string_view item, AttrKind kind,
                        std::string_view text) {
  switch (kind) {
    case AttrKind::i64:
      return parse_int(op, item, text);
    case AttrKind::f64: {
      std::string t(text);
      char* end = nullptr;
      double v = std::strtod(t.c_str(), &end);
      if (t.empty() || end != t.c_str() + t.size())
        bad_schema(op, item, fmt::format("\"{}\" is not a float", text));
      return v;
    }
    case AttrKind::boolean:
      if (text == "true") return true;
      if (text == "false") return false;
      bad_schema(op, item, fmt::format("\"{}\" is not true or false", text));
    case AttrKind::str:
      if (text.size() < 2 || text.front() != '"' || text.back() != '"' ||
          text.substr(1, text.size() - 2).find('"') != std::string_view::npos)
        bad_schema(op, item, fmt::format("{} is not a quoted string", text));
      return std::string(text.substr(1, text.size() - 2));
    case AttrKind::i64s: {
      if (text.size() < 2 || text.front() != '[' || text.back() != ']')
        bad_schema(op, item, fmt::format("{} is not a list [a, b, ...]", text));
      std::vector<int64_t> v;
      std::string_view body = trim(text.substr(1, text.size() - 2));
      while (!body.empty()) {
        size_t comma = body.find(',');
        v.push_back(parse_int(op, item, body.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        body = body.substr(comma + 1);
      }
      return v;
    }
    case AttrKind::dtype:
      for (DType t : kAllDTypes)
        if (text == dtype_short_name(t)) return t;
      bad_schema(op, item, fmt::format("\"{}\" is not a dtype's short name (f32, i64, ...)", text));
  }
  bad_schema(op, item, "unknown kind");
}

// Splits "a:int=1,b:ints=[1, 2],c:str=\"x,y\"" at the commas outside brackets and quotes.
std::vector<std::string_view> split_schema(std::string_view schema) {
  std::vector<std::string_view> items;
  int depth = 0;
  bool quoted = false;
  size_t begin = 0;
  for (size_t i = 0; i <= schema.size(); ++i) {
    char c = i < schema.size() ? schema[i] : ',';
    if (c == '"') quoted = !quoted;
    if (quoted) continue;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(schema.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  return items;
}

std::vector<AttrSpec> parse_schema(const char* op, std::string_view schema) {
  std::vector<AttrSpec> specs;
  if (schema.empty()) return specs;
  for (std::string_view item : split_schema(schema)) {
    size_t colon = item.find(':');
    if (colon == std::string_view::npos) bad_schema(op, item, "expected name:kind");
    size_t eq = item.find('=', colon);
    std::string_view kind =
        item.substr(colon + 1, eq == std::string_view::npos ? eq : eq - colon - 1);
    const std::optional<AttrKind> parsed = schema_kind_of(kind);
    if (!parsed) bad_schema(op, item, fmt::format("unknown kind \"{}\"", kind));
    const AttrKind k = *parsed;
    AttrSpec spec{std::string(item.substr(0, colon)), k, std::nullopt};
    if (eq != std::string_view::npos)
      spec.default_value = parse_default(op, item, k, item.substr(eq + 1));
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<OpInfo> build_table() {
  using namespace rules;
  std::vector<OpInfo> t;
#define KILN_OP(e, name, arity, traits, dtypes, bf16, fusion, codegen, rounding, attrs, rule)    \
  t.push_back(OpInfo{OpKind::e, name, arity, traits, dtypes, Bf16Rule::bf16, FusionRole::fusion, \
                     Lowering::codegen, RoundingClass::rounding, parse_schema(name, attrs),      \
                     &rule});
#include "kiln/ir/ops.def"
#undef KILN_OP
  return t;
}

const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> t = build_table();
  return t;
}

}  // namespace

namespace {

[[noreturn]] void refuse_bf16(const OpInfo& op, std::string_view where) {
  std::string what;
  switch (op.kind) {
    case OpKind::RandomUniform:
      what =
          "a float32 draw rounded to bfloat16 can round up to maxval; draw float32 "
          "(random_uniform with dtype float32) and cast the result to bfloat16";
      break;
    case OpKind::RandomInt:
      what = "random_int makes integers; cast its result to bfloat16";
      break;
    default:
      what = fmt::format("cast the {} to a dtype {} takes", where, op.name);
  }
  throw DTypeError(
      fmt::format("{}: does not support bfloat16 (its {} is bfloat16; the bf16 "
                  "column of ir/ops.def says no): {}",
                  op.name, where, what));
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

std::string_view schema_kind_word(AttrKind k) {
  switch (k) {
    case AttrKind::i64:
      return "int";
    case AttrKind::f64:
      return "float";
    case AttrKind::boolean:
      return "bool";
    case AttrKind::str:
      return "str";
    case AttrKind::i64s:
      return "ints";
    case AttrKind::dtype:
      return "dtype";
  }
  return "?";
}

std::optional<AttrKind> schema_kind_of(std::string_view word) {
  for (AttrKind k : {AttrKind::i64, AttrKind::f64, AttrKind::boolean, AttrKind::str, AttrKind::i64s,
                     AttrKind::dtype})
    if (schema_kind_word(k) == word) return k;
  return std::nullopt;
}

std::string_view dtype_class_word(DTypeClass c) {
  switch (c) {
    case Float:
      return "float";
    case Numeric:
      return "numeric";
    case Bool:
      return "bool";
    case Any:
      return "any";
  }
  return "?";
}

std::string_view dtype_class_description(DTypeClass c) {
  switch (c) {
    case Float:
      return "a floating dtype (float32, float64 or bfloat16)";
    case Numeric:
      return "a numeric dtype (not bool)";
    case Bool:
      return "bool";
    case Any:
      return "any dtype";
  }
  return "?";
}

std::string_view bf16_rule_word(Bf16Rule r) {
  switch (r) {
    case Bf16Rule::Bytes:
      return "bytes";
    case Bf16Rule::ViaF32:
      return "via-f32";
    case Bf16Rule::Convert:
      return "convert";
    case Bf16Rule::No:
      return "no";
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
    case FusionRole::Output:
      return "output";
  }
  return "?";
}

std::string_view rounding_class_word(RoundingClass r) {
  switch (r) {
    case RoundingClass::Exact:
      return "exact";
    case RoundingClass::Rounded:
      return "rounded";
    case RoundingClass::Addition:
      return "addition";
    case RoundingClass::TwoRoundings:
      return "two-roundings";
    case RoundingClass::VectorMath:
      return "vector-math";
    case RoundingClass::VectorMathOperand:
      return "vector-math-operand";
    case RoundingClass::Product:
      return "product";
    case RoundingClass::Accumulation:
      return "accumulation";
    case RoundingClass::Normalization:
      return "normalization";
    case RoundingClass::Decomposed:
      return "decomposed";
  }
  return "?";
}

std::vector<std::string_view> trait_names(uint32_t traits) {
  static constexpr std::pair<OpTrait, std::string_view> kNames[] = {
      {kElementwise, "elementwise"},
      {kReduction, "reduction"},
      {kCommutative, "commutative"},
      {kSideEffecting, "side-effecting"},
      {kRandom, "random"},
      {kLayout, "layout"},
      {kContraction, "contraction"},
      {kTranscendental, "transcendental"},
      {kNoGradient, "no-gradient"},
      {kWindow, "window"},
      {kInternal, "internal"},
      {kSelects, "selects"},
      {kRoundsOperands, "rounds-operands"},
  };
  std::vector<std::string_view> names;
  for (const auto& [bit, name] : kNames)
    if (traits & bit) names.push_back(name);
  return names;
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
    // (a random op's inputs are its seed and a tensor whose shape it takes: only its output
    // dtype matters)
    if (inputs[i].dtype == DType::bf16 && op.bf16 == Bf16Rule::No && !op.has(kRandom))
      refuse_bf16(op, "input");
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
  TensorType out = op.rule(op, inputs, attrs);
  if (out.dtype == DType::bf16 && op.bf16 == Bf16Rule::No) refuse_bf16(op, "output");
  return out;
}

}  // namespace kiln
