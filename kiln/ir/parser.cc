// The IR text parser: graph structure (see parser_internal.h; values in parser_values.cc).
#include "kiln/ir/parser.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/ir/parser_internal.h"

namespace kiln::ir {
namespace parsing {

std::string plural(size_t n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

std::string Parser::symbol_name(std::string_view what) {
  std::string name;
  if (tok_.is(TK::kIdent) && tok_.text[0] != '-')
    name = std::string(tok_.text);
  else if (tok_.is(TK::kString))
    name = tok_.str;
  else
    fail_expected(fmt::format("{} (an identifier or a string)", what));
  advance();
  return name;
}

std::unique_ptr<Graph> Parser::parse() {
  if (!tok_.is_ident("graph")) fail_expected("'graph'");
  advance();
  expect(TK::kAt, "'@'");
  auto g = std::make_unique<Graph>(symbol_name("a graph name"));
  graph_def(*g);
  if (!tok_.is(TK::kEnd)) fail_expected("end of input after the graph's closing '}'");
  return g;
}

bool Parser::accept(TK k) {
  if (!tok_.is(k)) return false;
  advance();
  return true;
}

Token Parser::expect(TK k, std::string_view what) {
  if (!tok_.is(k)) fail_expected(what);
  Token t = std::move(tok_);
  advance();
  return t;
}

void Parser::define(Scope& s, const Token& name, Value* v) {
  if (!s.values.emplace(name.str, v).second)
    fail(name, fmt::format("value {} is already defined", name.text));
}

Value* Parser::use(Scope& s) {
  if (!tok_.is(TK::kValue)) fail_expected("a value (%N)");
  auto it = s.values.find(tok_.str);
  if (it == s.values.end()) fail(tok_, fmt::format("undefined value {}", tok_.text));
  advance();
  return it->second;
}

std::vector<Value*> Parser::operands(Scope& s) {
  expect(TK::kLParen, "'('");
  std::vector<Value*> values;
  if (accept(TK::kRParen)) return values;
  do {
    values.push_back(use(s));
  } while (accept(TK::kComma));
  expect(TK::kRParen, "',' or ')'");
  return values;
}

void Parser::graph_def(Graph& g) {
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

void Parser::body(Scope& s, const std::vector<TensorType>& declared) {
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
      fail(at[i], fmt::format("returned value {} has type {}, but the signature declares {}",
                              at[i].text, outputs[i]->type().to_string(), declared[i].to_string()));
  }
  expect(TK::kRBrace, outputs.empty() ? "a value or '}'" : "',' or '}'");
  s.graph->set_outputs(std::move(outputs));
  for (const auto& [name, decl] : s.variables) {
    GraphVariable& v = s.graph->variable(size_t(decl.index));
    v.read = decl.read;
    v.written = decl.write;
  }
}

void Parser::variables(Scope& s) {
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

void Parser::statement(Scope& s) {
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

Metadata Parser::metadata() {
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

uint32_t Parser::line_or_column(std::string_view what) {
  if (!tok_.is(TK::kInt) || tok_.text[0] == '-') fail_expected(what);
  int64_t v = int_value(tok_, "u32");
  if (v > int64_t(std::numeric_limits<uint32_t>::max()))
    fail(tok_, fmt::format("value {} is out of range of u32", tok_.text));
  advance();
  return uint32_t(v);
}

void Parser::apply(Node* n, Metadata m) {
  n->set_name(std::move(m.name));
  n->set_location(std::move(m.loc));
}

Node* Parser::table_op(Scope& s, const Token& op, OpKind kind) {
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

Node* Parser::assignment(Scope& s, NodeKind kind) {
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

Node* Parser::control_flow(Scope& s, const Token& op, size_t num_results) {
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

Node* Parser::fusion(Scope& s, const Token& op, size_t num_results) {
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
  std::string name = symbol_name("a group name");
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

void Parser::nested_graph_def(const Token& op, Graph& sub) {
  if (depth_ >= kMaxIrNestingDepth)
    fail(op, fmt::format("sub-graphs nest deeper than {} levels (kMaxIrNestingDepth)",
                         kMaxIrNestingDepth));
  ++depth_;
  graph_def(sub);
  --depth_;
}

}  // namespace parsing

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view file_name) {
  parsing::Parser parser(text, file_name);
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
