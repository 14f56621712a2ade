// The IR text parser: types, attributes, constants and their literals (see parser_internal.h).
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>

#include "kiln/ir/parser.h"
#include "kiln/ir/parser_internal.h"

namespace kiln::ir::parsing {

std::string_view attr_kind_phrase(AttrKind k) {
  switch (k) {
    case AttrKind::i64:
      return "an int";
    case AttrKind::f64:
      return "a float";
    case AttrKind::boolean:
      return "a bool (true or false)";
    case AttrKind::str:
      return "a string";
    case AttrKind::i64s:
      return "ints";
    case AttrKind::dtype:
      return "a dtype";
  }
  return "?";
}

template <typename T>
T Parser::float_value(const Token& t, DType dtype, std::string_view expected) const {
  if (t.is_ident("nan")) return std::numeric_limits<T>::quiet_NaN();
  if (t.is_ident("inf")) return std::numeric_limits<T>::infinity();
  if (t.is_ident("-inf")) return -std::numeric_limits<T>::infinity();
  if (!t.is(TK::kInt) && !t.is(TK::kFloat))
    fail(t, fmt::format("expected {}, got {}", expected, describe_token(t)));
  T v{};
  auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (ec == std::errc::result_out_of_range)
    fail(t, fmt::format("value {} is out of range of {}", t.text, dtype_short_name(dtype)));
  KILN_ASSERT(ec == std::errc() && end == t.text.data() + t.text.size(), "bad float token");
  return v;
}

template <typename T>
T Parser::element(const Token& e, DType dtype) const {
  std::string expected = fmt::format("a value of type {}", dtype_short_name(dtype));
  if constexpr (std::is_same_v<T, bfloat16>) {  // the decimal's nearest bf16 (one rounding)
    const double d = float_value<double>(e, dtype, expected);
    const bfloat16 v = bfloat16::from_double(d);
    if (std::isfinite(d) && std::isinf(v.to_float()))
      fail(e, fmt::format("value {} is out of range of {}", e.text, dtype_short_name(dtype)));
    return v;
  } else if constexpr (std::is_floating_point_v<T>) {
    return float_value<T>(e, dtype, expected);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (e.is_ident("true")) return true;
    if (e.is_ident("false")) return false;
    fail(e, fmt::format("expected {} (true or false), got {}", expected, describe_token(e)));
  } else {
    if (!e.is(TK::kInt)) fail(e, fmt::format("expected {}, got {}", expected, describe_token(e)));
    int64_t v = int_value(e, dtype_short_name(dtype));
    if (v < int64_t(std::numeric_limits<T>::lowest()) ||
        (sizeof(T) < sizeof(int64_t) && v > int64_t(std::numeric_limits<T>::max())))
      fail(e, fmt::format("value {} is out of range of {}", e.text, dtype_short_name(dtype)));
    return T(v);
  }
}

int64_t Parser::int_value(const Token& t, std::string_view range_name) const {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
  if (ec == std::errc::result_out_of_range)
    fail(t, fmt::format("value {} is out of range of {}", t.text, range_name));
  KILN_ASSERT(ec == std::errc() && end == t.text.data() + t.text.size(), "bad int token");
  return v;
}

TensorType Parser::type() {
  Token at = tok_;
  if (!at.is(TK::kIdent) || at.text[0] == '-') fail_expected("a type (like f32[2,3])");
  DType dtype = DType::f32;
  try {
    dtype = parse_dtype(at.text);
  } catch (const Error& e) {
    fail(at, e.what());
  }
  advance();
  expect(TK::kLBracket, "'[' after the dtype");
  std::vector<int64_t> dims;
  if (!accept(TK::kRBracket)) {
    for (;;) {
      if (accept(TK::kQuestion)) {
        dims.push_back(kUnknownDim);
      } else if (tok_.is(TK::kInt) && tok_.text[0] != '-') {
        dims.push_back(int_value(tok_));
        advance();
      } else {
        fail_expected("a dimension (a non-negative integer or '?')");
      }
      if (!accept(TK::kComma)) break;
    }
    expect(TK::kRBracket, "',' or ']'");
  }
  if (dims.size() > size_t(kMaxRank))
    fail(at, fmt::format("a type of rank {} is not supported: kiln tensors have rank 0 to {}",
                         dims.size(), kMaxRank));
  TensorType t{dtype, Shape(dims)};
  // Known non-zero dimensions count: an empty f32[0,2^40,2^40] would overflow its strides.
  int64_t n = 1;
  for (int64_t d : dims)
    if (d != kUnknownDim && d != 0 && (__builtin_mul_overflow(n, d, &n) || n > kMaxIrTypeElements))
      fail(at, fmt::format("type {} has more than {} elements (2^40, kMaxIrTypeElements)",
                           t.to_string(), kMaxIrTypeElements));
  return t;
}

std::vector<TensorType> Parser::type_list() {
  std::vector<TensorType> types;
  do {
    types.push_back(type());
  } while (accept(TK::kComma));
  return types;
}

Attrs Parser::attributes(const OpInfo& op) {
  expect(TK::kLBrace, "'{'");
  Attrs attrs;
  if (accept(TK::kRBrace)) return attrs;
  do {
    if (!tok_.is(TK::kIdent)) fail_expected("an attribute name");
    Token name = tok_;
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& a : op.attrs)
      if (a.name == name.text) spec = &a;
    if (!spec) {
      std::string names;
      for (const AttrSpec& a : op.attrs) names += (names.empty() ? "" : ", ") + a.name;
      fail(name, fmt::format("unknown attribute \"{}\" of {} (expected: {})", name.text, op.name,
                             names.empty() ? std::string("none") : names));
    }
    if (attrs.has(name.text)) fail(name, fmt::format("duplicate attribute \"{}\"", name.text));
    advance();
    expect(TK::kEqual, "'='");
    attrs.set(spec->name, attr_value(op, *spec));
  } while (accept(TK::kComma));
  expect(TK::kRBrace, "',' or '}'");
  return attrs;
}

AttrValue Parser::attr_value(const OpInfo& op, const AttrSpec& spec) {
  Token at = tok_;
  auto bad = [&](const Token& t) {
    fail(t, fmt::format("attribute \"{}\" of {} must be {}, got {}", spec.name, op.name,
                        attr_kind_phrase(spec.kind), describe_token(t)));
  };
  advance();
  switch (spec.kind) {
    case AttrKind::i64:
      if (!at.is(TK::kInt)) bad(at);
      return int_value(at);
    case AttrKind::f64:
      if (!at.is(TK::kInt) && !at.is(TK::kFloat) && !at.is_ident("nan") && !at.is_ident("inf") &&
          !at.is_ident("-inf"))
        bad(at);
      return float_value<double>(at, DType::f64, "a float");
    case AttrKind::boolean:
      if (!at.is_ident("true") && !at.is_ident("false")) bad(at);
      return at.text == "true";
    case AttrKind::str:
      if (!at.is(TK::kString)) bad(at);
      return at.str;
    case AttrKind::i64s: {
      if (!at.is(TK::kLBracket)) bad(at);
      std::vector<int64_t> values;
      if (accept(TK::kRBracket)) return values;
      do {
        if (!tok_.is(TK::kInt)) bad(tok_);
        values.push_back(int_value(tok_));
        advance();
      } while (accept(TK::kComma));
      expect(TK::kRBracket, "',' or ']'");
      return values;
    }
    case AttrKind::dtype:
      if (!at.is(TK::kIdent)) bad(at);
      try {
        return parse_dtype(at.text);
      } catch (const Error& e) {
        fail(at, e.what());
      }
  }
  internal_error(__FILE__, __LINE__, "bad attribute kind");
}

Node* Parser::constant(Scope& s) {
  if (!tok_.is_ident("dense")) fail_expected("'dense<...>'");
  advance();
  expect(TK::kLess, "'<'");
  Token list_at = tok_;
  bool list = accept(TK::kLBracket);
  std::vector<Token> elements;
  if (!list || !accept(TK::kRBracket)) {
    do {
      if (!tok_.is(TK::kInt) && !tok_.is(TK::kFloat) && !tok_.is(TK::kIdent))
        fail_expected("a constant value (a number, true, false, nan, inf or -inf)");
      elements.push_back(tok_);
      advance();
    } while (list && accept(TK::kComma));
    if (list) expect(TK::kRBracket, "',' or ']'");
  }
  expect(TK::kGreater, "'>'");
  expect(TK::kColon, "':' and the constant's type");
  Token type_at = tok_;
  TensorType t = type();
  if (!t.shape.is_fully_known())
    fail(type_at, fmt::format("a constant needs a fully known shape, got {}", t.to_string()));
  int64_t n = t.shape.num_elements();  // <= kMaxIrTypeElements: type() checked it
  if (n > kMaxIrConstantBytes / int64_t(dtype_size(t.dtype)))
    fail(type_at,
         fmt::format("constant of type {} has {} bytes of data, more than the limit "
                     "of {} (kMaxIrConstantBytes)",
                     t.to_string(), n * int64_t(dtype_size(t.dtype)), kMaxIrConstantBytes));
  if (list && int64_t(elements.size()) != n)
    fail(list_at, fmt::format("expected {} for {}, got {}", plural(size_t(n), "element"),
                              t.to_string(), elements.size()));
  std::vector<unsigned char> bytes(size_t(n) * dtype_size(t.dtype));
  visit_storage(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = reinterpret_cast<T*>(bytes.data());
    if (list) {
      for (int64_t i = 0; i < n; ++i) out[i] = element<T>(elements[size_t(i)], t.dtype);
    } else {
      T v = element<T>(elements[0], t.dtype);
      for (int64_t i = 0; i < n; ++i) out[i] = v;
    }
  });
  Node* node = s.graph->add_constant(Literal::copy_of(t, bytes.data()));
  apply(node, metadata());
  return node;
}

}  // namespace kiln::ir::parsing
