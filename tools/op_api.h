// The C++ op API generated from the op table (ir/ops.def): `kiln op-api header|source` writes
// kiln/frontend/ops_generated.h and ops_generated.cc (scripts/gen-op-api.sh; the ctest
// tools.op_api_is_current fails when they are stale). An op's wrapper is generated when its C++
// function is exactly its tensor inputs, then its schema attributes in schema order with the
// schema's defaults; the ops whose function differs (or that have none) are listed here, each
// with why (hand_written_ops()), and frontend/ops.h declares those by hand. An op that is
// neither is undecided: tests/ops/op_row_completeness_test.cc names it, so a new row forces the
// choice.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kiln/ir/op_table.h"

namespace kiln::tools {

struct HandWrittenOp {
  std::string_view op;   // the row's name
  bool in_ops_h;         // true: declared by hand in frontend/ops.h; false: no such function
  std::string_view why;  // how its C++ function differs from the row, or where it is emitted
};
// Every op whose C++ API is not generated from its row, in table order.
std::span<const HandWrittenOp> hand_written_ops();

enum class OpApiChoice { Generated, HandWritten, NoFunction, Undecided };
struct OpApiDecision {
  OpApiChoice choice;
  std::string why;  // HandWritten / NoFunction: the list's reason; Undecided: what is missing
};
OpApiDecision op_api_decision(const OpInfo& op);

// The C++ declaration of a generated op's function (without the trailing ';'), e.g.
// "Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false)".
std::string op_api_signature(const OpInfo& op, bool with_defaults);

// The two generated files, clang-format clean (.clang-format: Google, 100 columns).
std::string op_api_header();
std::string op_api_source();
// A Markdown table: every op, whether its C++ API is generated, hand-written or absent, and why.
std::string op_api_list();

}  // namespace kiln::tools
