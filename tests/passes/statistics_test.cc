// Per-pass statistics (Pass::statistics, PassTiming::statistics): each pass's counters on a
// hand-made graph whose rewrites are known, and the pipeline summing them over its runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kiln/ir/parser.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pipeline.h"

namespace kiln::passes {
namespace {

using ::testing::HasSubstr;

// Runs `pass` once on `text` and returns its counters.
PassStatistics statistics_of(std::unique_ptr<Pass> pass, const std::string& text) {
  auto g = ir::parse_graph(text);
  pass->run(*g);
  return pass->statistics();
}

TEST(PassStatisticsTest, AddsMergesAndPrintsCounters) {
  PassStatistics s;
  EXPECT_TRUE(s.empty());
  s.add("nodes merged");
  s.add("constants merged", 2);
  s.add("nodes merged");
  EXPECT_EQ(s.get("nodes merged"), 2);
  EXPECT_EQ(s.get("constants merged"), 2);
  EXPECT_EQ(s.get("never counted"), 0);
  PassStatistics t;
  t.add("constants merged");
  t.add("other");
  s.merge(t);
  EXPECT_EQ(s.to_string(), "nodes merged: 2, constants merged: 3, other: 1");
}

TEST(PassStatisticsTest, CseCountsMergedNodes) {
  PassStatistics s = statistics_of(make_cse(), R"(
graph @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %a = add(%x, %y) : f32[4]
  %b = add(%y, %x) : f32[4]
  %c = mul(%a, %b) : f32[4]
  return %c
}
)");
  EXPECT_EQ(s.to_string(), "nodes merged: 1");
}

TEST(PassStatisticsTest, DceCountsRemovedNodes) {
  PassStatistics s = statistics_of(make_dce(), R"(
graph @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %a = add(%x, %y) : f32[4]
  %d = neg(%x) : f32[4]
  %e = exp(%d) : f32[4]
  return %a
}
)");
  EXPECT_EQ(s.to_string(), "nodes removed: 2");
}

TEST(PassStatisticsTest, ConstantFoldCountsFoldedNodes) {
  PassStatistics s = statistics_of(make_constant_fold(), R"(
graph @f(%x: f32[]) -> (f32[]) {
  %two = constant dense<2.0> : f32[]
  %three = constant dense<3.0> : f32[]
  %m = mul(%two, %three) : f32[]
  %n = neg(%m) : f32[]
  %r = add(%x, %n) : f32[]
  return %r
}
)");
  EXPECT_EQ(s.to_string(), "nodes folded: 2");
}

TEST(PassStatisticsTest, AlgebraicSimplifyCountsRewritesByRule) {
  PassStatistics s = statistics_of(make_algebraic_simplify(), R"(
graph @f(%x: f32[4]) -> (f32[4], f32[4]) {
  %one = constant dense<1.0> : f32[4]
  %a = mul(%x, %one) : f32[4]
  %b = div(%a, %one) : f32[4]
  %n1 = neg(%x) : f32[4]
  %n2 = neg(%n1) : f32[4]
  return %b, %n2
}
)");
  EXPECT_EQ(s.get("x*1 -> x"), 1);
  EXPECT_EQ(s.get("x/1 -> x"), 1);
  EXPECT_EQ(s.get("neg(neg x) -> x"), 1);
  EXPECT_EQ(s.counters().size(), 3u) << s.to_string();
}

TEST(PassStatisticsTest, LowerAssignmentsCountsLoweredUpdates) {
  PassStatistics s = statistics_of(make_lower_assignments(), R"(
graph @f(%x: f32[4]) -> (f32[4]) {
  variables {
    $0 = "v" : f32[4] trainable read write -> %v
  }
  %k = assign_add $0, %x : f32[4]
  %l = assign_sub $0, %x : f32[4]
  return %l
}
)");
  EXPECT_EQ(s.get("assign_add lowered"), 1);
  EXPECT_EQ(s.get("assign_sub lowered"), 1);
}

TEST(PassStatisticsTest, TransposeFoldingCountsFoldedTransposes) {
  PassStatistics s = statistics_of(make_transpose_folding(), R"(
graph @f(%a: f32[8,4], %b: f32[8,4]) -> (f32[4,4]) {
  %t = transpose(%a) {perm=[1, 0]} : f32[4,8]
  %m = matmul(%t, %b) {transpose_a=false, transpose_b=false} : f32[4,4]
  return %m
}
)");
  EXPECT_EQ(s.to_string(), "transposes folded into transpose_a: 1");
}

// The matmul's consumer group reduces: rule 5 keeps the contraction out of it, and the
// matmul alone is no group (rule 7).
TEST(PassStatisticsTest, FusionCountsGroupsOpsAndRefusalsByRule) {
  PassStatistics s = statistics_of(make_fusion(), R"(
graph @f(%x: f32[8,16], %w: f32[16,32]) -> (f32[8]) {
  %mm = matmul(%x, %w) {transpose_a=false, transpose_b=false} : f32[8,32]
  %t = tanh(%mm) : f32[8,32]
  %s = sum(%t) {axes=[-1], keepdims=false} : f32[8]
  return %s
}
)");
  EXPECT_EQ(s.get("reduction groups formed"), 1) << s.to_string();
  EXPECT_EQ(s.get("ops fused"), 2) << s.to_string();
  EXPECT_EQ(s.get("refused by rule 5: a contraction and a reduction"), 1) << s.to_string();
  EXPECT_EQ(s.get("groups of one op left plain (rule 7)"), 1) << s.to_string();
}

TEST(PassStatisticsTest, FusionCountsContractionAndLoopGroups) {
  PassStatistics s = statistics_of(make_fusion(), R"(
graph @f(%x: f32[8,16], %w: f32[16,32], %b: f32[32]) -> (f32[8,32]) {
  %mm = matmul(%x, %w) {transpose_a=false, transpose_b=false} : f32[8,32]
  %a = add(%mm, %b) : f32[8,32]
  %r = tanh(%a) : f32[8,32]
  return %r
}
)");
  EXPECT_EQ(s.to_string(), "contraction groups formed: 1, ops fused: 3");
}

TEST(PassStatisticsTest, APassThatChangesNothingCountsNothing) {
  EXPECT_TRUE(statistics_of(make_cse(), R"(
graph @f(%x: f32[4]) -> (f32[4]) {
  %a = neg(%x) : f32[4]
  return %a
}
)")
                  .empty());
}

// The pipeline adds each run's counters to the pass's total (cse runs in every round of the
// fixed point) and clears the pass's own; statistics_table prints every pass that ran.
TEST(PassStatisticsTest, PipelineSumsCountersOverRuns) {
  auto g = ir::parse_graph(R"(
graph @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %a = add(%x, %y) : f32[4]
  %b = add(%x, %y) : f32[4]
  %c = mul(%a, %b) : f32[4]
  %d = neg(%x) : f32[4]
  return %c
}
)");
  PipelineOptions options;
  options.verify = true;
  PassPipeline p = default_pipeline(options);
  p.run(*g);
  const PassTiming* cse = nullptr;
  const PassTiming* dce = nullptr;
  for (const PassTiming& t : p.timings()) {
    if (t.name == "cse") cse = &t;
    if (t.name == "dce") dce = &t;
  }
  ASSERT_NE(cse, nullptr);
  ASSERT_NE(dce, nullptr);
  EXPECT_EQ(cse->statistics.to_string(), "nodes merged: 1");
  EXPECT_EQ(dce->statistics.to_string(), "nodes removed: 1");
  const std::string table = p.statistics_table();
  EXPECT_THAT(table, HasSubstr("cse\n  nodes merged"));
  EXPECT_THAT(table, HasSubstr("constant-fold\n  (nothing counted)\n"));
  // A second run of the same pipeline adds to the totals.
  auto again = ir::parse_graph(R"(
graph @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %a = add(%x, %y) : f32[4]
  %b = add(%x, %y) : f32[4]
  %c = mul(%a, %b) : f32[4]
  return %c
}
)");
  p.run(*again);
  for (const PassTiming& t : p.timings()) {
    if (t.name == "cse") {
      EXPECT_EQ(t.statistics.get("nodes merged"), 2);
    }
  }
}

}  // namespace
}  // namespace kiln::passes
