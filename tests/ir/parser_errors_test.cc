// Parse errors of the IR text format: "FILE:LINE:COL: error: WHAT" at the offending token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <string_view>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "tests/support/error_of.h"

namespace kiln::ir {
namespace {

using ::kiln::test::error_of;
using ::testing::HasSubstr;

std::string parse_error(std::string_view text) {
  return error_of([&] { parse_graph(text, "t.kir"); });
}

// A graph (%0: f32[3]) -> (f32[3]) whose line 2 is `line` and line 3 `return %1`.
std::string with_line(std::string_view line) {
  return "graph @g(%0: f32[3]) -> (f32[3]) {\n" + std::string(line) + "\n  return %1\n}\n";
}

TEST(ParserErrors, UnknownOp) {
  EXPECT_EQ(parse_error(with_line("  %1 = foo(%0) : f32[3]")),
            "t.kir:2:8: error: unknown op \"foo\"");
}

TEST(ParserErrors, BadDType) {
  EXPECT_EQ(parse_error("graph @g(%0: f16[3]) -> () {\n  return\n}\n"),
            "t.kir:1:14: error: unknown dtype \"f16\": expected one of float32 (f32), float64 "
            "(f64), int32 (i32), int64 (i64), bool, uint8 (u8), bfloat16 (bf16)");
}

TEST(ParserErrors, AttributeOfTheWrongKind) {
  EXPECT_EQ(parse_error(with_line("  %1 = sum(%0) {axes=0, keepdims=false} : f32[]")),
            "t.kir:2:22: error: attribute \"axes\" of sum must be ints, got '0'");
  EXPECT_EQ(parse_error(with_line("  %1 = sum(%0) {axes=[0, 1.5], keepdims=false} : f32[]")),
            "t.kir:2:26: error: attribute \"axes\" of sum must be ints, got '1.5'");
  EXPECT_EQ(parse_error(with_line("  %1 = softmax(%0) {axis=1.5} : f32[3]")),
            "t.kir:2:26: error: attribute \"axis\" of softmax must be an int, got '1.5'");
  EXPECT_EQ(parse_error(with_line("  %1 = leaky_relu(%0) {alpha=\"x\"} : f32[3]")),
            "t.kir:2:30: error: attribute \"alpha\" of leaky_relu must be a float, got '\"x\"'");
}

TEST(ParserErrors, UnknownAndDuplicateAttributes) {
  EXPECT_EQ(parse_error(with_line("  %1 = softmax(%0) {axes=1} : f32[3]")),
            "t.kir:2:21: error: unknown attribute \"axes\" of softmax (expected: axis)");
  EXPECT_EQ(parse_error(with_line("  %1 = neg(%0) {axis=1} : f32[3]")),
            "t.kir:2:17: error: unknown attribute \"axis\" of neg (expected: none)");
  EXPECT_EQ(parse_error(with_line("  %1 = softmax(%0) {axis=0, axis=0} : f32[3]")),
            "t.kir:2:29: error: duplicate attribute \"axis\"");
}

TEST(ParserErrors, MissingAttributeAndShapeRuleErrorsGetTheNodePosition) {
  EXPECT_EQ(parse_error(with_line("  %1 = sum(%0) {axes=[0]} : f32[]")),
            "t.kir:2:8: error: sum: missing attribute \"keepdims\"");
  EXPECT_EQ(parse_error("graph @g(%0: f32[2,3], %1: f32[4,5]) -> () {\n"
                        "  %2 = matmul(%0, %1) {transpose_a=false, transpose_b=false} : f32[2,5]\n"
                        "  return\n}\n"),
            "t.kir:2:8: error: matmul: inner dimensions differ: a is (2, 3), b is (4, 5)");
  EXPECT_EQ(parse_error(with_line("  %1 = add(%0) : f32[3]")),
            "t.kir:2:8: error: add: expected 2 inputs, got 1");
}

TEST(ParserErrors, DeclaredTypeMustMatchTheInferredType) {
  EXPECT_EQ(parse_error(with_line("  %1 = neg(%0) : f32[4]")),
            "t.kir:2:18: error: declared type f32[4] does not match the type neg infers: f32[3]");
}

TEST(ParserErrors, UnterminatedStringAndBadCharacters) {
  EXPECT_EQ(parse_error(with_line("  %1 = neg(%0) : f32[3] name(\"abc")),
            "t.kir:2:30: error: unterminated string (a string must end with '\"' on the same "
            "line)");
  EXPECT_EQ(parse_error(with_line("  %1 = neg(%0) : f32[3] name(\"a\\qb\")")),
            "t.kir:2:32: error: invalid escape '\\q' in string (use \\\", \\\\, \\n, \\t, \\r or "
            "\\xHH)");
  EXPECT_EQ(parse_error("graph @g() -> () & {\n"), "t.kir:1:18: error: unexpected character '&'");
}

TEST(ParserErrors, UnexpectedEndOfInput) {
  EXPECT_EQ(parse_error("graph @g(%0: f32[3]) -> (f32[3]) {\n  %1 = neg(%0)"),
            "t.kir:2:15: error: expected ':' and the result type, got end of input");
  EXPECT_EQ(parse_error(""), "t.kir:1:1: error: expected 'graph', got end of input");
}

TEST(ParserErrors, TrailingGarbage) {
  EXPECT_EQ(parse_error(with_line("  %1 = neg(%0) : f32[3]") + "# fine\nfoo\n"),
            "t.kir:6:1: error: expected end of input after the graph's closing '}', got 'foo'");
}

TEST(ParserErrors, UndefinedAndRedefinedValues) {
  EXPECT_EQ(parse_error(with_line("  %1 = neg(%7) : f32[3]")),
            "t.kir:2:12: error: undefined value %7");
  // Use before definition.
  EXPECT_EQ(parse_error(with_line("  %1 = add(%0, %1) : f32[3]")),
            "t.kir:2:16: error: undefined value %1");
  EXPECT_EQ(parse_error("graph @g(%0: f32[3]) -> (f32[3]) {\n"
                        "  %1 = neg(%0) : f32[3]\n"
                        "  %1 = neg(%1) : f32[3]\n"
                        "  return %1\n}\n"),
            "t.kir:3:3: error: value %1 is already defined");
  EXPECT_EQ(parse_error("graph @g(%0: f32[3], %0: f32[3]) -> () {\n  return\n}\n"),
            "t.kir:1:22: error: value %0 is already defined");
}

TEST(ParserErrors, SubGraphsDoNotSeeOuterValues) {
  EXPECT_EQ(parse_error("graph @g(%p: bool[], %x: f32[3]) -> (f32[3]) {\n"
                        "  %r = cond(%p, %x) : f32[3] {\n"
                        "    then (%0: f32[3]) -> (f32[3]) {\n"
                        "      %1 = neg(%x) : f32[3]\n"
                        "      return %1\n"
                        "    }\n"
                        "    else (%0: f32[3]) -> (f32[3]) {\n"
                        "      return %0\n"
                        "    }\n"
                        "  }\n"
                        "  return %r\n}\n"),
            "t.kir:4:16: error: undefined value %x");
  EXPECT_EQ(parse_error("graph @g(%p: bool[], %x: f32[3]) -> (f32[3]) {\n"
                        "  %r = cond(%p, %x) : f32[3] {\n"
                        "    then (%0: f32[3]) -> (f32[3]) {\n"
                        "      return %0\n"
                        "    }\n"
                        "  }\n"),
            "t.kir:6:3: error: expected 'else', got '}'");
}

TEST(ParserErrors, ConstantElements) {
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<[1.0, 2.0]> : f32[3]")),
            "t.kir:2:23: error: expected 3 elements for f32[3], got 2");
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<256> : u8[]")),
            "t.kir:2:23: error: value 256 is out of range of u8");
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<[1, -2147483649]> : i32[2]")),
            "t.kir:2:27: error: value -2147483649 is out of range of i32");
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<1e39> : f32[]")),
            "t.kir:2:23: error: value 1e39 is out of range of f32");
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<true> : f32[]")),
            "t.kir:2:23: error: expected a value of type f32, got 'true'");
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<1.5> : i64[]")),
            "t.kir:2:23: error: expected a value of type i64, got '1.5'");
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<1> : f32[?]")),
            "t.kir:2:28: error: a constant needs a fully known shape, got f32[?]");
}

TEST(ParserErrors, SignatureMustMatchTheReturnedValues) {
  EXPECT_EQ(parse_error("graph @g(%0: f32[3]) -> (f32[4]) {\n  return %0\n}\n"),
            "t.kir:2:10: error: returned value %0 has type f32[3], but the signature declares "
            "f32[4]");
  EXPECT_EQ(parse_error("graph @g(%0: f32[3]) -> (f32[3], f32[3]) {\n  return %0\n}\n"),
            "t.kir:2:3: error: the graph returns 1 value but its signature declares 2 results");
}

TEST(ParserErrors, Punctuation) {
  EXPECT_EQ(parse_error(with_line("  %1 = add(%0 %0) : f32[3]")),
            "t.kir:2:15: error: expected ',' or ')', got '%0'");
  EXPECT_EQ(parse_error(with_line("  %1 neg(%0) : f32[3]")),
            "t.kir:2:6: error: expected '=', got 'neg'");
  EXPECT_EQ(parse_error("graph @g(%0: f32[3) -> () {\n  return\n}\n"),
            "t.kir:1:19: error: expected ',' or ']', got ')'");
  EXPECT_EQ(parse_error("graph @g(%0: f32[-1]) -> () {\n  return\n}\n"),
            "t.kir:1:18: error: expected a dimension (a non-negative integer or '?'), got '-1'");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  neg()\n}\n"),
            "t.kir:2:3: error: expected a node (%N = ...) or 'return', got 'neg'");
}

TEST(ParserErrors, Variables) {
  const char* head =
      "graph @g(%0: f32[3]) -> () {\n"
      "  variables {\n"
      "    $0 = \"w\" : f32[3] trainable -> %1\n"
      "  }\n";
  EXPECT_EQ(parse_error(std::string(head) + "  %2 = assign $3, %0 : f32[3]\n  return\n}\n"),
            "t.kir:5:15: error: undefined variable $3");
  EXPECT_EQ(parse_error(std::string(head) + "  %2 = assign $0, %0 : f32[4]\n  return\n}\n"),
            "t.kir:5:24: error: declared type f32[4] does not match the type of variable $0 "
            "(\"w\"): f32[3]");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  variables {\n"
                        "    $0 = \"w\" : f32[3] read read -> %1\n  }\n  return\n}\n"),
            "t.kir:3:28: error: duplicate flag 'read'");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  variables {\n"
                        "    $0 = \"w\" : f32[3] %1\n  }\n  return\n}\n"),
            "t.kir:3:23: error: expected 'trainable', 'read', 'write' or '->', got '%1'");
}

TEST(ParserErrors, DefaultFileNameAndMissingFile) {
  EXPECT_EQ(error_of([] { parse_graph("graph g() -> () {}"); }),
            "<input>:1:7: error: expected '@', got 'g'");
  EXPECT_THAT(error_of([] { parse_graph_file("/nonexistent/dir/model.kir"); }),
              HasSubstr("cannot open IR file \"/nonexistent/dir/model.kir\""));
}

// ---- limits (ir/parser.h): hostile text is an error, not a crash or a huge allocation

// A graph whose cond nodes nest `depth` sub-graph levels deep (each then-branch holds the next).
std::string nested_conds(int depth) {
  const std::string leaf = "(%0: bool[]) -> (bool[]) {\n return %0\n}\n";
  std::string text = "graph @g";
  for (int i = 0; i < depth; ++i)
    text += "(%0: bool[]) -> (bool[]) {\n %1 = cond(%0, %0) : bool[] {\n then ";
  text += leaf;
  for (int i = 0; i < depth; ++i) text += " else " + leaf + " }\n return %1\n}\n";
  return text;
}

TEST(ParserLimits, SubGraphNestingDepth) {
  std::unique_ptr<Graph> g = parse_graph(nested_conds(kMaxIrNestingDepth));
  verify_graph(*g);
  EXPECT_EQ(print_graph(*parse_graph(print_graph(*g))), print_graph(*g));
  std::string one_more =
      error_of([] { parse_graph(nested_conds(kMaxIrNestingDepth + 1), "t.kir"); });
  EXPECT_THAT(one_more,
              HasSubstr("error: sub-graphs nest deeper than 64 levels (kMaxIrNestingDepth)"));
  EXPECT_THAT(one_more, HasSubstr(fmt::format("t.kir:{}:7:", 2 * kMaxIrNestingDepth + 2)));
  // Without the limit this recursed 100,000 levels deep and overflowed the stack.
  EXPECT_THAT(error_of([] { parse_graph(nested_conds(100'000)); }),
              HasSubstr("sub-graphs nest deeper than 64 levels"));
}

TEST(ParserLimits, HugeTextIsParsedWithoutDeepRecursion) {
  // A chain of 100,000 nodes: the parser, verifier and printer walk it without recursing
  // once per node.
  const int n = 100'000;
  std::string text = "graph @chain(%0: f32[2]) -> (f32[2]) {\n";
  for (int i = 1; i <= n; ++i) text += fmt::format("  %{} = neg(%{}) : f32[2]\n", i, i - 1);
  text += fmt::format("  return %{}\n}}\n", n);
  std::unique_ptr<Graph> g = parse_graph(text);
  verify_graph(*g);
  EXPECT_EQ(print_graph(*g).size(), print_graph(*parse_graph(print_graph(*g))).size());
}

TEST(ParserLimits, TypeElementCount) {
  EXPECT_EQ(parse_error("graph @g(%0: f32[4294967296,4294967296]) -> () {\n  return\n}\n"),
            "t.kir:1:14: error: type f32[4294967296,4294967296] has more than 1099511627776 "
            "elements (2^40, kMaxIrTypeElements)");
  // Overflowing int64 is over the limit too (without the check: signed overflow).
  EXPECT_THAT(parse_error("graph @g(%0: u8[?,9223372036854775807,3]) -> () {\n  return\n}\n"),
              HasSubstr("has more than 1099511627776 elements"));
  EXPECT_NO_THROW(parse_graph("graph @g(%0: u8[1099511627776,?]) -> () {\n  return\n}\n"));
  // Empty, but the other dimensions multiply past int64 (its strides would overflow).
  EXPECT_THAT(parse_error("graph @g(%0: f32[0,4294967296,4294967296]) -> () {\n  return\n}\n"),
              HasSubstr("type f32[0,4294967296,4294967296] has more than 1099511627776 elements"));
  EXPECT_NO_THROW(parse_graph("graph @g(%0: f32[0,1048576,1048576]) -> () {\n  return\n}\n"));
}

TEST(ParserLimits, ConstantBytes) {
  // Small text, 256 MiB + 8 bytes of data: refused before it is allocated.
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<0> : f64[33554433]")),
            "t.kir:2:28: error: constant of type f64[33554433] has 268435464 bytes of data, more "
            "than the limit of 268435456 (kMaxIrConstantBytes)");
  EXPECT_THAT(parse_error(with_line("  %1 = constant dense<0> : f32[1048576,1048576]")),
              HasSubstr("more than the limit of 268435456"));
}

TEST(ParserErrors, NumberWithoutDigits) {
  // Found by ir_text_fuzzer: "-." lexed as a float and failed an internal assertion.
  EXPECT_EQ(parse_error(with_line("  %1 = constant dense<[1.0, -., 2.0]> : f32[3]")),
            "t.kir:2:29: error: malformed number: '-.' has no digits");
  EXPECT_NO_THROW(parse_graph(
      "graph @g() -> (f32[2]) {\n  %0 = constant dense<[-.5, 5.]> : f32[2]\n  return %0\n}\n"));
}

TEST(ParserLimits, ShapeRuleArithmeticDoesNotOverflow) {
  // Attribute values near int64's limits: a clear error (or a correct type), never signed
  // overflow in the shape rules (UBSan found each of these).
  EXPECT_THAT(
      parse_error(with_line("  %1 = reshape(%0) {shape=[4611686018427387904, 4, -1]} : f32[3]")),
      HasSubstr("reshape: target shape [4611686018427387904, 4, -1] has more elements "
                "than int64 can count"));
  EXPECT_THAT(parse_error(with_line(
                  "  %1 = pad(%0) {low=[9223372036854775807], high=[1], interior=[0]} : f32[3]")),
              HasSubstr("pad: padding (3,) by low [9223372036854775807], high [1], interior [0] "
                        "gives a dimension larger than int64 holds"));
  EXPECT_THAT(parse_error(with_line(
                  "  %1 = pad(%0) {low=[0], high=[0], interior=[4611686018427387904]} : f32[3]")),
              HasSubstr("larger than int64 holds"));
  EXPECT_NO_THROW(
      parse_graph("graph @g(%0: f32[3]) -> (f32[1]) {\n"
                  "  %1 = slice(%0) {start=[0], stop=[3], step=[9223372036854775807]} : f32[1]\n"
                  "  return %1\n}\n"));
  EXPECT_THAT(
      parse_error("graph @g(%0: f32[1,8,8,1], %1: f32[3,3,1,1]) -> () {\n"
                  "  %2 = conv2d(%0, %1) {strides=[1, 1], dilations=[4611686018427387904, 1], "
                  "padding=\"same\"} : f32[1,8,8,1]\n  return\n}\n"),
      HasSubstr("conv2d: window of size 3 with dilation 4611686018427387904 is larger than "
                "int64 holds"));
  EXPECT_NO_THROW(
      parse_graph("graph @g(%0: f32[1,8,8,1]) -> () {\n"
                  "  %1 = max_pool2d(%0) {pool_size=[2, 2], strides=[9223372036854775807, 1], "
                  "padding=\"same\"} : f32[1,1,8,1]\n  return\n}\n"));
}

TEST(ParserLimits, UnknownDimensionsStayUnknown) {
  // pad and slice of a symbolic dimension: the result's dimension is unknown too (it was
  // low + high - 1, and slice clamped to [0, -1]).
  EXPECT_NO_THROW(
      parse_graph("graph @g(%0: f32[?,3]) -> () {\n"
                  "  %1 = pad(%0) {low=[1, 1], high=[2, 0], interior=[0, 0]} : f32[?,4]\n"
                  "  %2 = slice(%0) {start=[1, 0], stop=[4, 3], step=[1, 2]} : f32[?,2]\n"
                  "  return\n}\n"));
}

}  // namespace
}  // namespace kiln::ir
