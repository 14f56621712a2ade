// Lexer of the kiln IR text format (ir/printer.h documents the format; ir/parser.h parses it).
// Internal to ir/: the parser is its only user.
//
// Tokens: identifiers ([A-Za-z_][A-Za-z0-9_]*; also `-inf`), integers and floats
// (optional leading '-'), strings ("..." with escapes \" \\ \n \t \r \xHH), value names
// (%12, %x), variable names ($0), and the punctuation ( ) { } [ ] < > , : = ? @ ->.
// `#` starts a comment that runs to the end of the line. Errors are kiln::Error with the
// message "FILE:LINE:COL: error: ..." (1-based line and column of the offending character).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::ir {

enum class TokenKind : uint8_t {
  kEnd,       // end of input
  kIdent,     // matmul, f32, true, nan, -inf ...
  kInt,       // 12, -3
  kFloat,     // 0.5, -1e+20
  kString,    // "..." (Token::str holds the unescaped contents)
  kValue,     // %12 (Token::str holds the name after '%', digits normalised: %007 -> "7")
  kVariable,  // $0 (Token::str as for kValue)
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kLBracket,
  kRBracket,
  kLess,
  kGreater,
  kComma,
  kColon,
  kEqual,
  kQuestion,
  kAt,
  kArrow,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string_view text;  // the token's source text
  std::string str;        // decoded contents of strings, value and variable names
  int line = 1;
  int column = 1;

  bool is(TokenKind k) const { return kind == k; }
  bool is_ident(std::string_view word) const { return kind == TokenKind::kIdent && text == word; }
};

// How error messages name a token: 'matmul', '"a b"', or "end of input".
std::string describe_token(const Token& t);

// Throws kiln::Error("FILE:LINE:COL: error: MESSAGE").
[[noreturn]] void throw_parse_error(std::string_view file, int line, int column,
                                    const std::string& message);

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file_name) : text_(text), file_(file_name) {}

  // The next token (kEnd, repeatedly, at the end of the input). Throws on a lexical error.
  Token next();
  std::string_view file_name() const { return file_; }

 private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void bump();  // consumes one character, tracking line and column
  void skip_space_and_comments();
  void lex_number(Token& t);
  void lex_string(Token& t);
  void lex_name(Token& t, char sigil);
  [[noreturn]] void fail(int line, int column, const std::string& message) const;

  std::string_view text_;
  std::string_view file_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

}  // namespace kiln::ir
