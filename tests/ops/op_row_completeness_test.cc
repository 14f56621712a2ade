// The op row completeness test: every row of ir/ops.def has every piece that adding an op takes
// (ops.def's header, "Adding an op"), and a failure names, per op, what it still lacks:
//   eager kernel      runtime::kernel_for finds one (runtime/kernels/, register_*_kernels);
//   gradient rule     detail::gradient_rule finds one (frontend/grad_*.cc), or the row has the
//                     kNoGradient trait (and then no rule);
//   shape rule        the row's rule types the op's consistency case;
//   codegen           Generated: the one-op graph of its first consistency case has the op in
//                     a generated kernel (codegen::can_lower) and compiles (compile_graph);
//                     RuntimeKernel: its eager kernel is what runs, nothing more;
//   consistency row   tests/codegen/op_consistency_rows.h: op_rows() for Generated ops,
//                     kFallbackRows for the others;
//   rounding case     the rounding class is a column (a row without one does not compile);
//                     RoundingModel::models says the model has the op's own case where its
//                     class needs one (accumulation, normalization, decomposed);
//   random graphs     each random-graph generator the op is eligible for names it in its ops()
//                     or its left_out() (tests/codegen/random_fused_graph.h: Loop and
//                     Reduction ops codegen generates; tests/passes/random_graph.h: elementwise
//                     ops that are not internal). Each generator's own test checks that its
//                     graphs hold exactly its ops();
//   bf16 case         the bf16 column is a column (a row without one does not compile); a
//                     row that takes bfloat16 (bytes, via-f32, convert) has a consistency case
//                     with a float input or a float dtype attribute, which
//                     tests/ops/bf16_ops_test.cc turns into its bf16 case; a row saying no
//                     needs none (that test checks the refusal);
//   C++ API           tools/op_api.cc generates its wrapper from the row (frontend/
//                     ops_generated.h; tools.op_api_is_current checks the file is current), or
//                     lists it as written by hand (frontend/ops.h) or without a C++ function,
//                     with why. A row it can do neither for (variadic, unnamed inputs, a
//                     required attribute after a defaulted one) is undecided.
// Exemptions: max_pool2d_grad is differentiable but has no gradient rule (a second derivative
// of max pooling; tests/autodiff/op_gradients_shape_test.cc documents it). Internal ops
// (kInternal: gradient ops, bookkeeping) are out of the passes generator's reach by its
// eligibility; they need every other piece like any op.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kiln/codegen/compile_graph.h"
#include "kiln/codegen/lower_kernel.h"
#include "kiln/frontend/gradients.h"
#include "kiln/ir/parser.h"
#include "kiln/runtime/kernels.h"
#include "tests/codegen/codegen_test_util.h"
#include "tests/codegen/op_consistency_rows.h"
#include "tests/codegen/random_fused_graph.h"
#include "tests/passes/random_graph.h"
#include "tests/support/rounding_model.h"
#include "tools/op_api.h"

namespace kiln {
namespace {

// Differentiable ops without a gradient rule, on purpose (documented where the autodiff suite
// checks gradient coverage).
bool documented_without_rule(OpKind k) { return k == OpKind::MaxPool2DGrad; }

bool fused_generator_eligible(const OpInfo& op) {
  return op.generated() && (op.fusion == FusionRole::Loop || op.fusion == FusionRole::Reduction);
}
bool passes_generator_eligible(const OpInfo& op) {
  return op.has(kElementwise) && !op.has(kInternal);
}

template <class List>
bool lists(const List& list, OpKind k) {
  return std::find(list.begin(), list.end(), k) != list.end();
}
template <class Pairs>
bool lists_left_out(const Pairs& pairs, OpKind k) {
  return std::any_of(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first == k; });
}

// What `op` lacks, in the order of ops.def's "Adding an op".
std::vector<std::string> missing_pieces(const OpInfo& op) {
  std::vector<std::string> lacks;
  const OpRow* row = nullptr;
  const std::vector<OpRow>& rows = op_rows();
  for (const OpRow& r : rows)
    if (r.op == op.kind) {
      row = &r;
      break;
    }
  bool fallback = false, fallback_has_float = false;
  auto floating = [](DType t) { return t == DType::f32 || t == DType::f64; };
  auto float_dtype_attr = [&](const Attrs& attrs) {
    for (const auto& [name, value] : attrs.items())
      if (const DType* d = std::get_if<DType>(&value); d != nullptr && floating(*d)) return true;
    return false;
  };
  for (const FallbackRow& f : kFallbackRows) {
    try {
      auto g = ir::parse_graph(f.ir, f.name);
      if (g->nodes().empty() || g->nodes().back()->op() != op.kind) continue;
      fallback = true;
      const ir::Node& n = *g->nodes().back();
      fallback_has_float = fallback_has_float || float_dtype_attr(n.attrs()) ||
                           std::any_of(n.inputs().begin(), n.inputs().end(),
                                       [&](const ir::Value* v) { return floating(v->dtype()); });
    } catch (const std::exception&) {
    }
  }

  // shape rule
  bool typed = op.rule != nullptr;
  if (typed && row) {
    const Case c = row->cases(false).front();
    try {
      infer_type(op.kind, operand_types(*row, row->dtypes.front(), c), c.attrs);
    } catch (const std::exception&) {
      typed = false;
    }
  }
  if (!typed) lacks.push_back("shape rule");

  // eager kernel
  try {
    runtime::kernel_for(op.kind);
  } catch (const std::exception&) {
    lacks.push_back("eager kernel");
  }

  // gradient rule
  const bool has_rule = detail::gradient_rule(op.kind) != nullptr;
  if (op.has(kNoGradient) && has_rule)
    lacks.push_back("no gradient rule (it is marked kNoGradient but has one)");
  if (!op.has(kNoGradient) && !has_rule && !documented_without_rule(op.kind))
    lacks.push_back("gradient rule (or the kNoGradient trait)");

  // codegen
  if (op.generated()) {
    bool lowered = false;
    if (row && typed) {
      const Case c = row->cases(false).front();
      auto g = alone_graph(*row, operand_types(*row, row->dtypes.front(), c), c.attrs);
      try {
        lowered = codegen::can_lower(*g->nodes().back()) && codegen::compile_graph(*g) != nullptr;
      } catch (const std::exception&) {
        lowered = false;
      }
    }
    if (!lowered)
      lacks.push_back(row ? "codegen (its one-op graph does not compile)"
                          : "codegen (unchecked: no consistency row to compile)");
  }

  // consistency row
  if (op.generated() ? row == nullptr : !fallback)
    lacks.push_back(op.generated() ? "consistency row (op_rows())"
                                   : "consistency row (kFallbackRows)");

  // rounding case
  if (!testing::RoundingModel::models(op.kind))
    lacks.push_back(std::string("rounding case (class ") +
                    std::string(rounding_class_word(op.rounding)) +
                    ", tests/support/rounding_model.h)");

  // random graphs
  if (fused_generator_eligible(op) && !lists(testing::RandomFusedGraphBuilder::ops(), op.kind) &&
      !lists_left_out(testing::RandomFusedGraphBuilder::left_out(), op.kind))
    lacks.push_back("random fused graph entry (tests/codegen/random_fused_graph.h)");
  if (passes_generator_eligible(op) && !lists(test::RandomGraphBuilder::ops(), op.kind) &&
      !lists_left_out(test::RandomGraphBuilder::left_out(), op.kind))
    lacks.push_back("random graph entry (tests/passes/random_graph.h)");

  // bf16 case
  if (op.bf16 != Bf16Rule::No) {
    bool has_float = fallback_has_float;
    if (row)
      has_float = std::any_of(row->dtypes.begin(), row->dtypes.end(), floating) ||
                  float_dtype_attr(row->cases(false).front().attrs);
    if (!has_float)
      lacks.push_back(std::string("bf16 case (its bf16 column says ") +
                      std::string(bf16_rule_word(op.bf16)) +
                      " but its consistency case has no float input or dtype attribute for "
                      "tests/ops/bf16_ops_test.cc to make bf16)");
  }

  // C++ API
  const tools::OpApiDecision api = tools::op_api_decision(op);
  if (api.choice == tools::OpApiChoice::Undecided)
    lacks.push_back("C++ API (tools/op_api.cc: " + api.why + ")");
  return lacks;
}

TEST(OpRowCompleteness, EveryOpHasEveryPiece) {
  testing::ScopedCacheDir cache;
  for (const OpInfo& op : all_ops()) {
    std::vector<std::string> lacks = missing_pieces(op);
    std::string list;
    for (const std::string& piece : lacks) list += (list.empty() ? "" : ", ") + piece;
    EXPECT_TRUE(lacks.empty()) << "op " << op.name << " lacks: " << list;
  }
}

// A generator lists an op at most once, in ops() or in left_out(), and only an eligible one.
TEST(OpRowCompleteness, GeneratorListsAreConsistent) {
  auto check = [](const std::vector<OpKind>& ops,
                  const std::vector<std::pair<OpKind, const char*>>& left_out,
                  bool (*eligible)(const OpInfo&), const char* generator) {
    for (const auto& [k, why] : left_out) {
      EXPECT_FALSE(lists(ops, k)) << op_name(k) << " is both made and left out by " << generator;
      EXPECT_TRUE(eligible(op_info(k)))
          << op_name(k) << " is left out by " << generator << " but not eligible for it";
      EXPECT_GT(std::string(why).size(), 0u) << op_name(k);
    }
  };
  check(testing::RandomFusedGraphBuilder::ops(), testing::RandomFusedGraphBuilder::left_out(),
        fused_generator_eligible, "random_fused_graph.h");
  check(test::RandomGraphBuilder::ops(), test::RandomGraphBuilder::left_out(),
        passes_generator_eligible, "random_graph.h");
}

// The list of ops whose C++ API is written by hand (tools/op_api.cc) names ops of the table,
// each once, in table order, each with why.
TEST(OpRowCompleteness, HandWrittenOpApiListIsConsistent) {
  size_t last = 0;
  for (const tools::HandWrittenOp& h : tools::hand_written_ops()) {
    std::optional<OpKind> k = find_op(h.op);
    ASSERT_TRUE(k.has_value()) << h.op << " is listed as hand-written but is not an op";
    EXPECT_GE(size_t(*k), last) << h.op << " is listed twice or out of table order";
    last = size_t(*k) + 1;
    EXPECT_GT(h.why.size(), 0u) << h.op;
  }
}

// Generated wrappers take the row's inputs and attributes in order, with its defaults: spot
// checks of the signatures the generator writes (the ctest tools.op_api_is_current checks the
// committed files are its output; the frontend tests call them).
TEST(OpRowCompleteness, GeneratedOpApiSignatures) {
  EXPECT_EQ(tools::op_api_signature(op_info(OpKind::Sum), true),
            "Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdims = false)");
  EXPECT_EQ(tools::op_api_signature(op_info(OpKind::OneHot), true),
            "Tensor one_hot(const Tensor& indices, int64_t depth, DType dtype = DType::f32)");
  EXPECT_EQ(tools::op_api_signature(op_info(OpKind::LeakyRelu), true),
            "Tensor leaky_relu(const Tensor& x, double alpha = 0.2)");
  EXPECT_EQ(tools::op_api_signature(op_info(OpKind::MatMul), false),
            "Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b)");
  EXPECT_EQ(tools::op_api_decision(op_info(OpKind::Add)).choice, tools::OpApiChoice::Generated);
  EXPECT_EQ(tools::op_api_decision(op_info(OpKind::Cast)).choice, tools::OpApiChoice::HandWritten);
  EXPECT_EQ(tools::op_api_decision(op_info(OpKind::AttentionGrad)).choice,
            tools::OpApiChoice::NoFunction);
}

}  // namespace
}  // namespace kiln
