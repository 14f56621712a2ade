#include "ir/parser.h"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "ir/ir_lexer.h"

namespace kiln::ir {
namespace {

using TK = TokenKind;

// A `$N` declared in a variables block: its index and the flags the text gives it.
struct VarDecl {
  int index = 0;
  bool read = false;
  bool write = false;
};

// The names visible in one graph body (sub-graphs are closed: each has its own scope).
struct Scope {
  Graph* graph;
  std::unordered_map<std::string, Value*> values;
  std::unordered_map<std::string, VarDecl> variables;
};

struct Metadata {
  std::string name;
  SourceLocation loc;
};

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

std::string plural(size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : lex_(text, file) { advance(); }

  std::unique_ptr<Graph> parse() {
    if (!tok_.is_ident("graph")) fail_expected("'graph'");
    advance();
    expect(TK::kAt, "'@'");
    std::string name;
    if (tok_.is(TK::kIdent) && tok_.text[0] != '-')
      name = std::string(tok_.text);
    else if (tok_.is(TK::kString))
      name = tok_.str;
    else
      fail_expected("a graph name (an identifier or a string)");
    advance();
    auto g = std::make_unique<Graph>(std::move(name));
    graph_def(*g);
    if (!tok_.is(TK::kEnd)) fail_expected("end of input after the graph's closing '}'");
    return g;
  }

 private:
  // ---- tokens and errors
  void advance() { tok_ = lex_.next(); }
  bool accept(TK k) {
    if (!tok_.is(k)) return false;
    advance();
    return true;
  }
  Token expect(TK k, std::string_view what) {
    if (!tok_.is(k)) fail_expected(what);
    Token t = std::move(tok_);
    advance();
    return t;
  }
  [[noreturn]] void fail(const Token& at, const std::string& message) const {
    throw_parse_error(lex_.file_name(), at.line, at.column, message);
  }
  [[noreturn]] void fail_expected(std::string_view what) const {
    fail(tok_, fmt::format("expected {}, got {}", what, describe_token(tok_)));
  }

  // ---- literals
  int64_t int_value(const Token& t, std::string_view range_name = "i64") const {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec == std::errc::result_out_of_range)
      fail(t, fmt::format("value {} is out of range of {}", t.text, range_name));
    KILN_ASSERT(ec == std::errc() && end == t.text.data() + t.text.size(), "bad int token");
    return v;
  }

  // A float from an int, float, nan, inf or -inf token; an error naming `expected` otherwise.
  template <typename T>
  T float_value(const Token& t, DType dtype, std::string_view expected) const {
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

  // ---- types and values
  TensorType type() {
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
      if (d != kUnknownDim && d != 0 &&
          (__builtin_mul_overflow(n, d, &n) || n > kMaxIrTypeElements))
        fail(at, fmt::format("type {} has more than {} elements (2^40, kMaxIrTypeElements)",
                             t.to_string(), kMaxIrTypeElements));
    return t;
  }

  std::vector<TensorType> type_list() {
    std::vector<TensorType> types;
    do {
      types.push_back(type());
    } while (accept(TK::kComma));
    return types;
  }

  void define(Scope& s, const Token& name, Value* v) {
    if (!s.values.emplace(name.str, v).second)
      fail(name, fmt::format("value {} is already defined", name.text));
  }

  Value* use(Scope& s) {
    if (!tok_.is(TK::kValue)) fail_expected("a value (%N)");
    auto it = s.values.find(tok_.str);
    if (it == s.values.end()) fail(tok_, fmt::format("undefined value {}", tok_.text));
    advance();
    return it->second;
  }

  std::vector<Value*> operands(Scope& s) {
    expect(TK::kLParen, "'('");
    std::vector<Value*> values;
    if (accept(TK::kRParen)) return values;
    do {
      values.push_back(use(s));
    } while (accept(TK::kComma));
    expect(TK::kRParen, "',' or ')'");
    return values;
  }

  // ---- graphs
  // `(%0: t, ...) -> (t, ...) { body }`: the signature and body of `g` (root or sub-graph).
  void graph_def(Graph& g) {
    Scope scope{&g, {}, {}};
    expect(TK::kLParen, "'('");
    if (!accept(TK::kRParen)) {
      do {
        Token name = expect(TK::kValue, "a parameter (%N: type)");
        expect(TK::kColon, "':'");
        define(scope, name, g.add_parameter(type()));
      } while (accept(TK::kComma));
      expect(TK::kRParen, "',' or ')'");
    }
    expect(TK::kArrow, "'->'");
    expect(TK::kLParen, "'('");
    std::vector<TensorType> results;
    if (!accept(TK::kRParen)) {
      results = type_list();
      expect(TK::kRParen, "',' or ')'");
    }
    body(scope, results);
  }

  void body(Scope& s, const std::vector<TensorType>& declared) {
    expect(TK::kLBrace, "'{'");
    if (tok_.is_ident("variables")) variables(s);
    while (!tok_.is_ident("return")) statement(s);
    Token ret = tok_;
    advance();
    std::vector<Value*> outputs;
    std::vector<Token> at;
    if (tok_.is(TK::kValue)) {
      do {
        at.push_back(tok_);
        outputs.push_back(use(s));
      } while (accept(TK::kComma));
    }
    if (outputs.size() != declared.size())
      fail(ret, fmt::format("the graph returns {} but its signature declares {}",
                            plural(outputs.size(), "value"), plural(declared.size(), "result")));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!(outputs[i]->type() == declared[i]))
        fail(at[i],
             fmt::format("returned value {} has type {}, but the signature declares {}", at[i].text,
                         outputs[i]->type().to_string(), declared[i].to_string()));
    }
    expect(TK::kRBrace, outputs.empty() ? "a value or '}'" : "',' or '}'");
    s.graph->set_outputs(std::move(outputs));
    for (const auto& [name, decl] : s.variables) {
      GraphVariable& v = s.graph->variable(size_t(decl.index));
      v.read = decl.read;
      v.written = decl.write;
    }
  }

  // `variables { $N = "name" : type [trainable] [read] [write] -> %M ... }`
  void variables(Scope& s) {
    advance();
    expect(TK::kLBrace, "'{'");
    while (!accept(TK::kRBrace)) {
      if (!tok_.is(TK::kVariable)) fail_expected("a variable declaration ($N = ...) or '}'");
      Token var = tok_;
      if (s.variables.count(var.str))
        fail(var, fmt::format("variable {} is already declared", var.text));
      advance();
      expect(TK::kEqual, "'='");
      Token name = expect(TK::kString, "the variable's name (a string)");
      expect(TK::kColon, "':'");
      TensorType t = type();
      bool trainable = false;
      VarDecl decl;
      for (;;) {
        bool* flag = tok_.is_ident("trainable") ? &trainable
                     : tok_.is_ident("read")    ? &decl.read
                     : tok_.is_ident("write")   ? &decl.write
                                                : nullptr;
        if (!flag) break;
        if (*flag) fail(tok_, fmt::format("duplicate flag '{}'", tok_.text));
        *flag = true;
        advance();
      }
      expect(TK::kArrow, "'trainable', 'read', 'write' or '->'");
      if (!tok_.is(TK::kValue)) fail_expected("the variable's entry value (%N)");
      Token entry = tok_;
      advance();
      decl.index = s.graph->add_variable(name.str, t, trainable);
      define(s, entry, s.graph->variable(size_t(decl.index)).entry);
      s.variables.emplace(var.str, decl);
    }
  }

  // ---- nodes
  void statement(Scope& s) {
    std::vector<Token> results;
    if (tok_.is(TK::kValue)) {
      do {
        if (!tok_.is(TK::kValue)) fail_expected("a value name (%N)");
        bool dup = s.values.count(tok_.str) > 0;
        for (const Token& r : results) dup = dup || r.str == tok_.str;
        if (dup) fail(tok_, fmt::format("value {} is already defined", tok_.text));
        results.push_back(tok_);
        advance();
      } while (accept(TK::kComma));
      expect(TK::kEqual, "'='");
    } else if (!tok_.is_ident("cond") && !tok_.is_ident("while")) {
      fail_expected("a node (%N = ...) or 'return'");
    }
    if (!tok_.is(TK::kIdent)) fail_expected("an op name");
    Token op = tok_;
    advance();
    Node* node = nullptr;
    if (op.text == "constant") {
      node = constant(s);
    } else if (op.text == "assign") {
      node = assignment(s, NodeKind::kAssign);
    } else if (op.text == "assign_add") {
      node = assignment(s, NodeKind::kAssignAdd);
    } else if (op.text == "assign_sub") {
      node = assignment(s, NodeKind::kAssignSub);
    } else if (op.text == "cond" || op.text == "while") {
      node = control_flow(s, op, results.size());
    } else if (op.text == "fusion") {
      node = fusion(s, op, results.size());
    } else if (std::optional<OpKind> kind = find_op(op.text)) {
      node = table_op(s, op, *kind);
    } else {
      fail(op, fmt::format("unknown op \"{}\"", op.text));
    }
    if (results.size() != node->num_outputs())
      fail(results.empty() ? op : results[0],
           fmt::format("{} defines {}, but {} given", op.text, plural(node->num_outputs(), "value"),
                       plural(results.size(), "name")));
    for (size_t i = 0; i < results.size(); ++i) define(s, results[i], node->output(i));
  }

  // `name("...")` and `loc("file":line:col)`, each optional, in either order.
  Metadata metadata() {
    Metadata m;
    bool has_name = false, has_loc = false;
    for (;;) {
      Token at = tok_;
      if (at.is_ident("name")) {
        if (has_name) fail(at, "duplicate name(...)");
        has_name = true;
        advance();
        expect(TK::kLParen, "'('");
        m.name = expect(TK::kString, "the node's name (a string)").str;
        expect(TK::kRParen, "')'");
      } else if (at.is_ident("loc")) {
        if (has_loc) fail(at, "duplicate loc(...)");
        has_loc = true;
        advance();
        expect(TK::kLParen, "'('");
        m.loc.file = expect(TK::kString, "the source file name (a string)").str;
        expect(TK::kColon, "':'");
        m.loc.line = line_or_column("a line number");
        expect(TK::kColon, "':'");
        m.loc.column = line_or_column("a column number");
        expect(TK::kRParen, "')'");
      } else {
        return m;
      }
    }
  }

  uint32_t line_or_column(std::string_view what) {
    if (!tok_.is(TK::kInt) || tok_.text[0] == '-') fail_expected(what);
    int64_t v = int_value(tok_, "u32");
    if (v > int64_t(std::numeric_limits<uint32_t>::max()))
      fail(tok_, fmt::format("value {} is out of range of u32", tok_.text));
    advance();
    return uint32_t(v);
  }

  void apply(Node* n, Metadata m) {
    n->set_name(std::move(m.name));
    n->set_location(std::move(m.loc));
  }

  Node* table_op(Scope& s, const Token& op, OpKind kind) {
    std::vector<Value*> inputs = operands(s);
    Attrs attrs;
    if (tok_.is(TK::kLBrace)) attrs = attributes(op_info(kind));
    Node* n = nullptr;
    try {
      n = s.graph->add_op(kind, std::move(inputs), std::move(attrs));
    } catch (const Error& e) {
      fail(op, e.what());
    }
    expect(TK::kColon, "':' and the result type");
    Token at = tok_;
    TensorType declared = type();
    const TensorType& inferred = n->output()->type();
    if (!(declared == inferred))
      fail(at, fmt::format("declared type {} does not match the type {} infers: {}",
                           declared.to_string(), op.text, inferred.to_string()));
    apply(n, metadata());
    return n;
  }

  Attrs attributes(const OpInfo& op) {
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

  AttrValue attr_value(const OpInfo& op, const AttrSpec& spec) {
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

  // `constant dense<v> : type` or `constant dense<[v, ...]> : type`.
  Node* constant(Scope& s) {
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
    visit_dtype(t.dtype, [&](auto tag) {
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

  template <typename T>
  T element(const Token& e, DType dtype) const {
    std::string expected = fmt::format("a value of type {}", dtype_short_name(dtype));
    if constexpr (std::is_floating_point_v<T>) {
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

  // `assign $V, %value : type` (and assign_add, assign_sub).
  Node* assignment(Scope& s, NodeKind kind) {
    if (!tok_.is(TK::kVariable)) fail_expected("a variable ($N)");
    Token var = tok_;
    auto it = s.variables.find(var.str);
    if (it == s.variables.end()) fail(var, fmt::format("undefined variable {}", var.text));
    int index = it->second.index;
    advance();
    expect(TK::kComma, "','");
    Token value_at = tok_;
    Value* value = use(s);
    Node* n = nullptr;
    try {
      n = s.graph->add_assignment(kind, index, value);
    } catch (const Error& e) {
      fail(value_at, e.what());
    }
    expect(TK::kColon, "':' and the type");
    Token type_at = tok_;
    TensorType declared = type();
    const GraphVariable& v = s.graph->variable(size_t(index));
    if (!(declared == v.type))
      fail(type_at,
           fmt::format("declared type {} does not match the type of variable {} (\"{}\"): {}",
                       declared.to_string(), var.text, v.name, v.type.to_string()));
    apply(n, metadata());
    return n;
  }

  // `cond(...) : types { then ... else ... }` / `while(...) : types { cond ... body ... }`.
  Node* control_flow(Scope& s, const Token& op, size_t num_results) {
    bool is_cond = op.text == "cond";
    std::vector<Value*> inputs = operands(s);
    std::vector<TensorType> types;
    if (accept(TK::kColon)) types = type_list();
    if (types.size() != num_results)
      fail(op, fmt::format("{} declares {} but {}", op.text, plural(types.size(), "result type"),
                           plural(num_results, "value name")));
    bool stacked = false;
    if (!is_cond && tok_.is_ident("stacked")) {
      stacked = true;
      advance();
    }
    Metadata meta = metadata();
    expect(TK::kLBrace, "'{'");
    std::vector<std::unique_ptr<Graph>> subgraphs;
    for (std::string_view label : {is_cond ? "then" : "cond", is_cond ? "else" : "body"}) {
      if (!tok_.is_ident(label)) fail_expected(fmt::format("'{}'", label));
      advance();
      auto sub = std::make_unique<Graph>(std::string(label));
      nested_graph_def(op, *sub);
      subgraphs.push_back(std::move(sub));
    }
    expect(TK::kRBrace, "'}'");
    Node* n = s.graph->add_control_flow(is_cond ? NodeKind::kCond : NodeKind::kWhile,
                                        std::move(inputs), std::move(subgraphs), std::move(types));
    if (stacked) n->mutable_attrs().set("stacked", true);
    apply(n, std::move(meta));
    return n;
  }

  // `fusion(...) : types kind("loop") @name [name(...)] [loc(...)] { body (...) -> (...) {...} }`
  Node* fusion(Scope& s, const Token& op, size_t num_results) {
    std::vector<Value*> inputs = operands(s);
    std::vector<TensorType> types;
    if (accept(TK::kColon)) types = type_list();
    if (types.size() != num_results)
      fail(op, fmt::format("fusion declares {} but {}", plural(types.size(), "result type"),
                           plural(num_results, "value name")));
    if (!tok_.is_ident("kind")) fail_expected("'kind(\"...\")' after the fusion's result types");
    advance();
    expect(TK::kLParen, "'('");
    std::string kind = expect(TK::kString, "the fusion kind (a string)").str;
    expect(TK::kRParen, "')'");
    expect(TK::kAt, "'@' and the fusion's group name");
    std::string name;
    if (tok_.is(TK::kIdent) && tok_.text[0] != '-')
      name = std::string(tok_.text);
    else if (tok_.is(TK::kString))
      name = tok_.str;
    else
      fail_expected("a group name (an identifier or a string)");
    advance();
    Metadata meta = metadata();
    expect(TK::kLBrace, "'{'");
    if (!tok_.is_ident("body")) fail_expected("'body'");
    advance();
    auto body = std::make_unique<Graph>(name);
    nested_graph_def(op, *body);
    expect(TK::kRBrace, "'}'");
    Node* n = s.graph->add_fusion(std::move(name), std::move(kind), std::move(inputs),
                                  std::move(body), std::move(types));
    apply(n, std::move(meta));
    return n;
  }

  // `graph_def` of a sub-graph of the node `op`, one nesting level deeper.
  void nested_graph_def(const Token& op, Graph& sub) {
    if (depth_ >= kMaxIrNestingDepth)
      fail(op, fmt::format("sub-graphs nest deeper than {} levels (kMaxIrNestingDepth)",
                           kMaxIrNestingDepth));
    ++depth_;
    graph_def(sub);
    --depth_;
  }

  Lexer lex_;
  Token tok_;
  int depth_ = 0;  // sub-graphs around the one being parsed
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view file_name) {
  Parser parser(text, file_name);
  return parser.parse();
}

std::unique_ptr<Graph> parse_graph_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open IR file \"{}\": {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("cannot read IR file \"{}\"", path));
  return parse_graph(text.str(), path);
}

}  // namespace kiln::ir
