#include "kiln/ir/ir_lexer.h"

#include <fmt/format.h>

#include "kiln/ir/error.h"

namespace kiln::ir {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string printable_char(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f) return fmt::format("\\x{:02x}", u);
  return std::string(1, c);
}

}  // namespace

std::string describe_token(const Token& t) {
  if (t.kind == TokenKind::kEnd) return "end of input";
  return fmt::format("'{}'", t.text);
}

void throw_parse_error(std::string_view file, int line, int column, const std::string& message) {
  throw Error(fmt::format("{}:{}:{}: error: {}", file, line, column, message));
}

void Lexer::fail(int line, int column, const std::string& message) const {
  throw_parse_error(file_, line, column, message);
}

void Lexer::bump() {
  if (pos_ >= text_.size()) return;
  if (text_[pos_] == '\n') {
    ++line_;
    column_ = 1;
  } else {
    ++column_;
  }
  ++pos_;
}

void Lexer::skip_space_and_comments() {
  while (pos_ < text_.size()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      bump();
    } else if (c == '#') {
      while (pos_ < text_.size() && peek() != '\n') bump();
    } else {
      break;
    }
  }
}

Token Lexer::next() {
  skip_space_and_comments();
  Token t;
  t.line = line_;
  t.column = column_;
  size_t start = pos_;
  if (pos_ >= text_.size()) {
    t.kind = TokenKind::kEnd;
    t.text = text_.substr(text_.size());
    return t;
  }
  char c = peek();
  auto single = [&](TokenKind k) {
    t.kind = k;
    bump();
  };
  switch (c) {
    case '(':
      single(TokenKind::kLParen);
      break;
    case ')':
      single(TokenKind::kRParen);
      break;
    case '{':
      single(TokenKind::kLBrace);
      break;
    case '}':
      single(TokenKind::kRBrace);
      break;
    case '[':
      single(TokenKind::kLBracket);
      break;
    case ']':
      single(TokenKind::kRBracket);
      break;
    case '<':
      single(TokenKind::kLess);
      break;
    case '>':
      single(TokenKind::kGreater);
      break;
    case ',':
      single(TokenKind::kComma);
      break;
    case ':':
      single(TokenKind::kColon);
      break;
    case '=':
      single(TokenKind::kEqual);
      break;
    case '?':
      single(TokenKind::kQuestion);
      break;
    case '@':
      single(TokenKind::kAt);
      break;
    case '"':
      lex_string(t);
      break;
    case '%':
    case '$':
      lex_name(t, c);
      break;
    default:
      if (c == '-' && peek(1) == '>') {
        t.kind = TokenKind::kArrow;
        bump();
        bump();
      } else if (is_digit(c) || (c == '-' && (is_digit(peek(1)) || peek(1) == '.'))) {
        lex_number(t);
      } else if (is_ident_start(c) || (c == '-' && is_ident_start(peek(1)))) {
        t.kind = TokenKind::kIdent;
        bump();
        while (is_ident_char(peek())) bump();
      } else {
        fail(line_, column_, fmt::format("unexpected character '{}'", printable_char(c)));
      }
  }
  t.text = text_.substr(start, pos_ - start);
  return t;
}

void Lexer::lex_number(Token& t) {
  t.kind = TokenKind::kInt;
  size_t start = pos_;
  if (peek() == '-') bump();
  size_t digits = 0;
  for (; is_digit(peek()); ++digits) bump();
  if (peek() == '.') {
    t.kind = TokenKind::kFloat;
    bump();
    for (; is_digit(peek()); ++digits) bump();
  }
  if (digits == 0)  // "-." (found by ir_text_fuzzer: it reached the parser's float assertion)
    fail(t.line, t.column,
         fmt::format("malformed number: '{}' has no digits", text_.substr(start, pos_ - start)));
  if ((peek() == 'e' || peek() == 'E') &&
      (is_digit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && is_digit(peek(2))))) {
    t.kind = TokenKind::kFloat;
    bump();
    if (peek() == '+' || peek() == '-') bump();
    while (is_digit(peek())) bump();
  }
  if (is_ident_char(peek()) || peek() == '.')
    fail(t.line, t.column,
         fmt::format("malformed number: '{}' followed by '{}'", text_.substr(start, pos_ - start),
                     printable_char(peek())));
}

void Lexer::lex_string(Token& t) {
  t.kind = TokenKind::kString;
  int line = line_, column = column_;
  bump();  // opening quote
  for (;;) {
    if (pos_ >= text_.size() || peek() == '\n')
      fail(line, column, "unterminated string (a string must end with '\"' on the same line)");
    char c = peek();
    if (c == '"') {
      bump();
      return;
    }
    if (c != '\\') {
      t.str += c;
      bump();
      continue;
    }
    int esc_line = line_, esc_column = column_;
    bump();
    char e = peek();
    switch (e) {
      case '"':
      case '\\':
        t.str += e;
        bump();
        break;
      case 'n':
        t.str += '\n';
        bump();
        break;
      case 't':
        t.str += '\t';
        bump();
        break;
      case 'r':
        t.str += '\r';
        bump();
        break;
      case 'x': {
        int hi = hex_digit(peek(1)), lo = hex_digit(peek(2));
        if (hi < 0 || lo < 0)
          fail(esc_line, esc_column, "invalid escape in string: \\x needs two hex digits");
        t.str += static_cast<char>(hi * 16 + lo);
        bump();
        bump();
        bump();
        break;
      }
      default:
        if (pos_ >= text_.size() || e == '\n')
          fail(line, column, "unterminated string (a string must end with '\"' on the same line)");
        fail(esc_line, esc_column,
             fmt::format("invalid escape '\\{}' in string (use \\\", \\\\, \\n, \\t, \\r or "
                         "\\xHH)",
                         printable_char(e)));
    }
  }
}

void Lexer::lex_name(Token& t, char sigil) {
  t.kind = sigil == '%' ? TokenKind::kValue : TokenKind::kVariable;
  int line = line_, column = column_;
  bump();
  size_t start = pos_;
  while (is_ident_char(peek())) bump();
  std::string_view name = text_.substr(start, pos_ - start);
  if (name.empty())
    fail(line, column,
         fmt::format("expected a {} name after '{}' (like {}0)",
                     sigil == '%' ? "value" : "variable", sigil, sigil));
  bool all_digits = true;
  for (char c : name) all_digits = all_digits && is_digit(c);
  if (all_digits) {
    // %007 and %7 name the same value.
    size_t first = name.find_first_not_of('0');
    t.str = first == std::string_view::npos ? "0" : std::string(name.substr(first));
  } else {
    t.str = std::string(name);
  }
}

}  // namespace kiln::ir
