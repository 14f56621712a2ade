// The IR text parser's internals (ir/parser.h is the interface): one recursive-descent Parser
// over the lexer's tokens. parser.cc holds the graph structure (graphs, bodies, variables,
// statements, ops, assignments, control flow, fusion); parser_values.cc the values inside
// statements (types, attributes, constants and their literals).
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/ir_lexer.h"
#include "kiln/ir/op_table.h"

namespace kiln::ir::parsing {

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

// "an int", "a float", ... for error messages.
std::string_view attr_kind_phrase(AttrKind k);
// "1 value", "3 values".
std::string plural(size_t n, std::string_view word);

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : lex_(text, file) { advance(); }

  std::unique_ptr<Graph> parse();

 private:
  // ---- tokens and errors
  void advance() { tok_ = lex_.next(); }
  bool accept(TK k);
  Token expect(TK k, std::string_view what);
  [[noreturn]] void fail(const Token& at, const std::string& message) const {
    throw_parse_error(lex_.file_name(), at.line, at.column, message);
  }
  [[noreturn]] void fail_expected(std::string_view what) const {
    fail(tok_, fmt::format("expected {}, got {}", what, describe_token(tok_)));
  }

  // ---- literals
  int64_t int_value(const Token& t, std::string_view range_name = "i64") const;

  // A float from an int, float, nan, inf or -inf token; an error naming `expected` otherwise.
  template <typename T>
  T float_value(const Token& t, DType dtype, std::string_view expected) const;

  // ---- types and values
  TensorType type();

  std::vector<TensorType> type_list();

  void define(Scope& s, const Token& name, Value* v);

  Value* use(Scope& s);

  std::vector<Value*> operands(Scope& s);
  // The name after '@' (a graph or fusion group): an identifier or a string.
  std::string symbol_name(std::string_view what);

  // ---- graphs
  // `(%0: t, ...) -> (t, ...) { body }`: the signature and body of `g` (root or sub-graph).
  void graph_def(Graph& g);

  void body(Scope& s, const std::vector<TensorType>& declared);

  // `variables { $N = "name" : type [trainable] [read] [write] -> %M ... }`
  void variables(Scope& s);

  // ---- nodes
  void statement(Scope& s);

  // `name("...")` and `loc("file":line:col)`, each optional, in either order.
  Metadata metadata();

  uint32_t line_or_column(std::string_view what);

  void apply(Node* n, Metadata m);

  Node* table_op(Scope& s, const Token& op, OpKind kind);

  Attrs attributes(const OpInfo& op);

  AttrValue attr_value(const OpInfo& op, const AttrSpec& spec);

  // `constant dense<v> : type` or `constant dense<[v, ...]> : type`.
  Node* constant(Scope& s);

  template <typename T>
  T element(const Token& e, DType dtype) const;

  // `assign $V, %value : type` (and assign_add, assign_sub).
  Node* assignment(Scope& s, NodeKind kind);

  // `cond(...) : types { then ... else ... }` / `while(...) : types { cond ... body ... }`.
  Node* control_flow(Scope& s, const Token& op, size_t num_results);

  // `fusion(...) : types kind("loop") @name [name(...)] [loc(...)] { body (...) -> (...) {...} }`
  Node* fusion(Scope& s, const Token& op, size_t num_results);

  // `graph_def` of a sub-graph of the node `op`, one nesting level deeper.
  void nested_graph_def(const Token& op, Graph& sub);

  Lexer lex_;
  Token tok_;
  int depth_ = 0;  // sub-graphs around the one being parsed
};

}  // namespace kiln::ir::parsing
