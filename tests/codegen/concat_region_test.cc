// Concat regions (codegen/memory_plan.h): a concat's operands computed in their windows of its
// result, on hand-made graphs and on random concats against the rule written out independently.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kiln/codegen/memory_plan.h"
#include "kiln/ir/verifier.h"
#include "tests/codegen/memory_plan_check.h"

namespace kiln::codegen {
namespace {

using plan_check::check_plan;
using plan_check::f32;
using plan_check::op;
using ::testing::HasSubstr;

TEST(ConcatRegionTest, ConcatOperandsAreComputedInTheirPlace) {
  ir::Graph g("concat");
  ir::Value* x = g.add_parameter(f32({4, 8}));  // 128 B pieces: every window aligned
  ir::Value* a = op(g, OpKind::Exp, {x});
  ir::Value* b = op(g, OpKind::Neg, {x});
  ir::Value* shared = op(g, OpKind::Tanh, {x});  // also read below: keeps its own buffer
  ir::Value* c = op(g, OpKind::Concat, {a, x, b, shared}, {{"axis", int64_t{0}}});  // [16, 8]
  ir::Value* d = op(g, OpKind::Exp, {c});
  ir::Value* e = op(g, OpKind::Mul, {shared, shared});
  g.set_outputs({d, e});
  ir::verify_graph(g);
  MemoryPlan plan = plan_memory(g);
  check_plan(g, plan);
  EXPECT_EQ(plan.of(a).placed_in, c);
  EXPECT_EQ(plan.of(a).offset, plan.of(c).offset);
  EXPECT_EQ(plan.of(b).placed_in, c);
  EXPECT_EQ(plan.of(b).offset, plan.of(c).offset + 2 * 128) << "after a and the parameter x";
  EXPECT_EQ(plan.of(shared).placed_in, nullptr) << "read by another node too";
  EXPECT_EQ(plan.placed_values(), 2);
  EXPECT_THAT(plan.to_string(), HasSubstr("2 computed in a concat's result"));
  EXPECT_THAT(plan.to_table(g), HasSubstr(" in %"));
  // Turned off, or windows that are not whole blocks of the result (axis 1 of [4, 8] pieces):
  // every operand has a buffer of its own.
  MemoryPlanOptions off;
  off.concat_regions = false;
  EXPECT_EQ(plan_memory(g, off).placed_values(), 0);
  ir::Graph h("columns");
  ir::Value* y = h.add_parameter(f32({4, 8}));
  ir::Value* cols = op(h, OpKind::Concat, {op(h, OpKind::Exp, {y}), op(h, OpKind::Neg, {y})},
                       {{"axis", int64_t{1}}});
  h.set_outputs({op(h, OpKind::Exp, {cols})});
  EXPECT_EQ(plan_memory(h).placed_values(), 0);
  // Leading dimensions of 1 before the axis: whole blocks again. A window that would start at
  // an unaligned offset (after 3 floats) is copied; the first one is still computed in the result.
  ir::Graph k("blocks");
  ir::Value* z = k.add_parameter(f32({1, 3}));
  ir::Value* p0 = op(k, OpKind::Exp, {z});
  ir::Value* p1 = op(k, OpKind::Neg, {z});
  ir::Value* rows = op(k, OpKind::Concat, {p0, p1}, {{"axis", int64_t{1}}});  // [1, 6]
  k.set_outputs({op(k, OpKind::Exp, {rows})});
  MemoryPlan blocks = plan_memory(k);
  check_plan(k, blocks);
  EXPECT_EQ(blocks.of(p0).placed_in, rows);
  EXPECT_EQ(blocks.of(p1).placed_in, nullptr) << "its window starts 12 bytes in";
}

// Random concats of computed pieces, parameters and pieces read again, against the rule
// written out independently: a piece is computed in the concat's result exactly when it is an
// op's result, the concat is its one reader, the windows are whole blocks of the result
// (dimensions before the axis all 1) and its window starts at a multiple of the alignment.
TEST(ConcatRegionTest, RandomConcatsPlaceExactlyTheQualifyingPieces) {
  std::mt19937 rng(11);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int placed = 0, copied = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int rank = uniform(1, 3), axis = uniform(0, rank - 1);
    std::vector<int64_t> dims(static_cast<size_t>(rank), int64_t{1});
    for (int d = 0; d < rank; ++d)
      dims[size_t(d)] = d < axis && uniform(0, 2) > 0 ? 1 : uniform(1, 5);
    ir::Graph g("random_concat");
    std::vector<ir::Value*> pieces, again;
    std::vector<bool> computed;
    for (int i = uniform(2, 4); i > 0; --i) {
      std::vector<int64_t> d = dims;
      d[size_t(axis)] = uniform(1, 4);
      ir::Value* x = g.add_parameter(f32(Shape(d)));
      const int kind = uniform(0, 3);  // 0: the parameter itself, 3: computed and read again
      pieces.push_back(kind == 0 ? x : op(g, kind == 1 ? OpKind::Exp : OpKind::Neg, {x}));
      computed.push_back(kind != 0);
      if (kind == 3) again.push_back(pieces.back());
    }
    ir::Value* c = op(g, OpKind::Concat, pieces, {{"axis", int64_t{axis}}});
    std::vector<ir::Value*> outputs = {op(g, OpKind::Exp, {c})};
    for (ir::Value* v : again) outputs.push_back(op(g, OpKind::Tanh, {v}));
    g.set_outputs(outputs);
    ir::verify_graph(g);
    MemoryPlanOptions options;
    options.alignment = uniform(0, 1) ? 4 : 16;
    const MemoryPlan plan = plan_memory(g, options);
    check_plan(g, plan);
    bool whole_blocks = true;
    for (int d = 0; d < axis; ++d) whole_blocks = whole_blocks && dims[size_t(d)] == 1;
    size_t at = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const bool read_again = std::find(again.begin(), again.end(), pieces[i]) != again.end();
      const bool expect = whole_blocks && computed[i] && !read_again && at % options.alignment == 0;
      EXPECT_EQ(plan.of(pieces[i]).placed_in, expect ? c : nullptr) << "piece " << i;
      (expect ? placed : copied) += 1;
      at += size_t(pieces[i]->shape().num_elements()) * 4;
    }
  }
  EXPECT_GT(placed, 100);
  EXPECT_GT(copied, 100);
}

}  // namespace
}  // namespace kiln::codegen
