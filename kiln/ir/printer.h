// The kiln IR text format and its printer. ir/parser.h reads the same format back:
// parse_graph(print_graph(g)) rebuilds g, and print_graph of the result is byte-identical.
//
//   graph @train_step(%0: f32[?,784], %1: i32[?]) -> (f32[]) {
//     variables {
//       $0 = "dense/kernel" : f32[784,128] trainable read write -> %2
//     }
//     %3 = matmul(%0, %2) {transpose_a=false, transpose_b=false} : f32[?,128] name("mm")
//     %4 = constant dense<[1, 2, 3]> : i64[3] loc("x.cc":12:5)
//     %5 = assign_sub $0, %9 : f32[784,128]
//     %6, %7 = cond(%p, %a, %b) : f32[], f32[3] {
//       then (%0: f32[], %1: f32[3]) -> (f32[], f32[3]) {
//         return %0, %1
//       }
//       else (...) -> (...) { ... }
//     }
//     %8 = while(%x, %c) : f32[3] { cond (...) -> (bool[]) {...} body (...) -> (...) {...} }
//     %9, %10 = fusion(%3, %4) : f32[64,128], f32[64,128] kind("loop") @fused_add_relu_0 {
//       body (%0: f32[64,128], %1: f32[128]) -> (f32[64,128], f32[64,128]) {
//         %2 = add(%0, %1) : f32[64,128]
//         %3 = relu(%2) : f32[64,128]
//         return %2, %3
//       }
//     }
//     return %3
//   }
//
// Canonical form (what print_graph emits): two-space indentation per nesting level; values
// renumbered with ValueNumbering (parameters, variable entries, node outputs; each sub-graph
// from 0); types as TensorType::to_string (`?` = unknown dimension); attributes in stored order
// (`{}` omitted when there are none); the variables block only when there are variables, with
// the flags trainable/read/write (each when true, in that order); `name("...")` and
// `loc("file":line:col)` only when set (on a cond/while/fusion they come before its `{`). A
// fusion prints its kind attribute as `kind("...")` and its group name (its body's name) after
// `@`, bare when it is an identifier, quoted otherwise; its one sub-graph is labelled `body`.
// Strings are quoted with `"` and `\` escaped by a backslash (control characters as \n, \t, \r,
// \xHH). The graph name follows `@` bare when it is an identifier, quoted otherwise. Constants
// print as `dense<v>` when splat (every element equal, also for one element), `dense<[]>` when
// empty, `dense<[v0, v1, ...]>` (row-major) otherwise; floats as the shortest text that reads
// back to the same value of their dtype (always with '.' or 'e', or nan / inf / -inf). The
// output ends with a newline.
#pragma once

#include <string>
#include <string_view>

#include "kiln/ir/graph.h"

namespace kiln::ir {

// The canonical text of `g` (format above). Never throws for a well-formed graph; a value
// that belongs to no enclosing scope prints as `%<foreign>` (which the parser rejects).
std::string print_graph(const Graph& g);

// `"..."` with `"` and `\` escaped by a backslash and control characters as \n \t \r \xHH.
std::string quote_ir_string(std::string_view s);

// The `dense<...>` text of a constant (format above); shared with DOT export.
std::string literal_to_string(const Literal& literal);
// The shortest decimal (at most 9 significant digits) that the parser reads back (one rounding
// from the decimal) to exactly `v`; always has a "." or an "e"; nan, inf, -inf.
std::string format_bf16(bfloat16 v);

}  // namespace kiln::ir
