// Parser of the kiln IR text format documented in ir/printer.h.
//
// Accepts the printer's canonical form and more: whitespace and newlines anywhere between
// tokens, `#` comments to the end of a line, any value names (%7, %42, %x; unique per graph
// scope, defined before use; sub-graphs are closed and see only their own values), any
// unique `$N` variable numbers, graph names `@ident` or `@"any string"`, attribute values
// converted with the op's schema (an integer for a float attribute, `[]` for an int list),
// `dense<[v]>` or `dense<v>` for any constant shape, name(...) and loc(...) in either order.
//
// Op nodes are built with Graph::add_op, so their types are inferred by the op table; a
// declared type that differs from the inferred one is an error. Constants, assignments and
// control flow use the declared types. The read/write flags of variables are taken from the
// text. Sub-graphs are named after their role: "then", "else", "cond", "body".
//
// Errors are kiln::Error with the message "FILE:LINE:COL: error: WHAT" (1-based position of
// the offending token), e.g. `<input>:3:8: error: expected ')', got ','`.
//
// Limits (text beyond them is such an error, raised before anything of that size is
// allocated and before the parser's recursion gets deep; docs/fuzzing.md):
//   - kMaxIrNestingDepth levels of sub-graphs inside sub-graphs (cond, while, fusion bodies);
//   - kMaxIrTypeElements elements in any type (the product of its known non-zero dimensions,
//     so that an empty tensor's strides fit too; one that overflows int64 is over the limit);
//   - kMaxIrConstantBytes bytes of data in one constant (`dense<0> : f32[N]` is small text
//     for a large tensor).
// Everything else grows linearly with the text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/ir/graph.h"

namespace kiln::ir {

inline constexpr int kMaxIrNestingDepth = 64;
inline constexpr int64_t kMaxIrTypeElements = int64_t(1) << 40;
inline constexpr int64_t kMaxIrConstantBytes = int64_t(1) << 28;  // 256 MiB

// Parses one graph (the whole text; anything after its closing `}` other than whitespace
// and comments is an error). `file_name` only prefixes error messages.
std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view file_name = "<input>");

// Reads `path` and parses it (errors name `path`); an unreadable file is a kiln::Error that
// names the path.
std::unique_ptr<Graph> parse_graph_file(const std::string& path);

}  // namespace kiln::ir
