// PassPipeline: fixed points and their cap, disabled passes, verification naming the pass,
// IR dump numbering, timings, and the registry. (Pass rewrites are tested as lit + FileCheck
// files next to this one.)
#include "kiln/passes/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "tests/support/error_of.h"

namespace kiln::passes {
namespace {

using ::kiln::test::error_of;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kChain = R"(graph @chain(%x: f32[4]) -> (f32[4]) {
  %one = constant dense<1.0> : f32[4]
  %a = mul(%x, %one) : f32[4]
  %b = neg(%a) : f32[4]
  %c = neg(%b) : f32[4]
  %dead = exp(%c) : f32[4]
  %d = add(%c, %c) : f32[4]
  return %d
}
)";

std::unique_ptr<ir::Graph> parse(const char* text = kChain) { return ir::parse_graph(text); }

// Reports a change on its first `changes` runs, then none; counts its runs.
class CountdownPass : public Pass {
 public:
  CountdownPass(std::string name, int changes, int* runs)
      : name_(std::move(name)), changes_left_(changes), runs_(runs) {}
  std::string_view name() const override { return name_; }
  bool run(ir::Graph&) override {
    ++*runs_;
    if (changes_left_ == 0) return false;
    --changes_left_;
    return true;
  }

 private:
  std::string name_;
  int changes_left_;
  int* runs_;
};

// Deliberately broken: makes the second node use the last node's output (use before def).
class BreakGraphPass : public Pass {
 public:
  std::string_view name() const override { return "break-graph"; }
  bool run(ir::Graph& g) override {
    g.nodes()[1]->set_input(0, g.nodes().back()->output(0));
    return true;
  }
};

class ThrowingPass : public Pass {
 public:
  std::string_view name() const override { return "thrower"; }
  bool run(ir::Graph&) override { throw Error("something about the graph"); }
};

PipelineOptions quiet_options() {
  PipelineOptions o;
  o.verify = true;
  return o;
}

TEST(PassPipelineTest, FixedPointRepeatsUntilARoundChangesNothing) {
  int a_runs = 0, b_runs = 0;
  PassPipeline p(quiet_options());
  p.add_fixed_point("group", pass_list(std::make_unique<CountdownPass>("a", 3, &a_runs),
                                       std::make_unique<CountdownPass>("b", 1, &b_runs)));
  auto g = parse();
  EXPECT_TRUE(p.run(*g));
  // Rounds 1-3 change (a), round 4 changes nothing.
  EXPECT_EQ(a_runs, 4);
  EXPECT_EQ(b_runs, 4);
  ASSERT_EQ(p.timings().size(), 2u);
  EXPECT_EQ(p.timings()[0].name, "a");
  EXPECT_EQ(p.timings()[0].runs, 4);
  EXPECT_EQ(p.timings()[0].changed, 3);
  EXPECT_EQ(p.timings()[1].changed, 1);
}

TEST(PassPipelineTest, UnchangedPipelineReportsNoChange) {
  int runs = 0;
  PassPipeline p(quiet_options());
  p.add(std::make_unique<CountdownPass>("idle", 0, &runs));
  auto g = parse();
  EXPECT_FALSE(p.run(*g));
  EXPECT_EQ(runs, 1);
}

TEST(PassPipelineTest, FixedPointCapIsAnErrorNamingTheGroupAndThePass) {
  int runs = 0;
  PassPipeline p(quiet_options());
  p.add_fixed_point("simplify", pass_list(std::make_unique<CountdownPass>("forever", 1000, &runs)),
                    /*max_iterations=*/5);
  auto g = parse();
  std::string msg = error_of([&] { p.run(*g); });
  EXPECT_THAT(msg, HasSubstr("fixed-point group \"simplify\" did not converge after 5 iterations"));
  EXPECT_THAT(msg, HasSubstr("forever still changed the graph"));
  EXPECT_EQ(runs, 5);
}

TEST(PassPipelineTest, DisabledPassesAreSkipped) {
  int a_runs = 0, b_runs = 0;
  PipelineOptions o = quiet_options();
  o.disabled.insert("a");
  PassPipeline p(o);
  p.add(std::make_unique<CountdownPass>("a", 1, &a_runs));
  p.add(std::make_unique<CountdownPass>("b", 1, &b_runs));
  auto g = parse();
  p.run(*g);
  EXPECT_EQ(a_runs, 0);
  EXPECT_EQ(b_runs, 1);
  ASSERT_EQ(p.timings().size(), 1u);
  EXPECT_EQ(p.timings()[0].name, "b");
}

TEST(PassPipelineTest, DisablingAnUnknownPassListsTheKnownOnes) {
  PipelineOptions o = quiet_options();
  o.disabled.insert("fold");
  PassPipeline p = default_pipeline(o);
  auto g = parse();
  EXPECT_EQ(
      error_of([&] { p.run(*g); }),
      "cannot disable unknown pass \"fold\" (KILN_DISABLE_PASSES or "
      "PipelineOptions::disabled); known passes: algebraic-simplify, constant-fold, cse, "
      "dce, fusion, hoist-loop-transposes, lower-assignments, refine-shapes, schedule-collectives, "
      "schedule-last-uses, split-reductions, transpose-folding");
}

TEST(PassPipelineTest, EnvironmentKnobsFillTheOptions) {
  ::setenv("KILN_DISABLE_PASSES", "cse, dce,", 1);
  ::setenv("KILN_VERIFY", "0", 1);
  ::setenv("KILN_DUMP_IR", "/tmp/somewhere", 1);
  ::setenv("KILN_DUMP_PASSES", "^c", 1);
  PipelineOptions o = PipelineOptions::from_environment();
  ::unsetenv("KILN_DISABLE_PASSES");
  ::unsetenv("KILN_VERIFY");
  ::unsetenv("KILN_DUMP_IR");
  ::unsetenv("KILN_DUMP_PASSES");
  EXPECT_THAT(o.disabled, ElementsAre("cse", "dce"));
  EXPECT_FALSE(o.verify);
  EXPECT_EQ(o.dump_dir, "/tmp/somewhere");
  EXPECT_EQ(o.dump_filter, "^c");
  ::setenv("KILN_VERIFY", "1", 1);
  EXPECT_TRUE(PipelineOptions::from_environment().verify);
  ::unsetenv("KILN_VERIFY");
  EXPECT_EQ(PipelineOptions::from_environment().verify, PipelineOptions::verify_by_default());
}

TEST(PassPipelineTest, VerifierFailureNamesThePass) {
  PassPipeline p(quiet_options());
  p.add(std::make_unique<BreakGraphPass>());
  auto g = parse();
  std::string msg = error_of([&] { p.run(*g); });
  EXPECT_THAT(msg,
              HasSubstr("pass \"break-graph\" produced an invalid graph: verifier: graph "
                        "@chain: node %2 = mul: input 0 (%6) is used before it is defined (by node "
                        "%6 = add, later in the graph)"));
}

TEST(PassPipelineTest, WithoutVerifyABrokenGraphGoesThrough) {
  PipelineOptions o;
  o.verify = false;
  PassPipeline p(o);
  p.add(std::make_unique<BreakGraphPass>());
  auto g = parse();
  EXPECT_TRUE(p.run(*g));
  EXPECT_THAT(error_of([&] { ir::verify_graph(*g); }), HasSubstr("used before it is defined"));
}

TEST(PassPipelineTest, InvalidInputIsNotBlamedOnAPass) {
  PipelineOptions o;
  o.verify = false;
  PassPipeline breaker(o);
  breaker.add(std::make_unique<BreakGraphPass>());
  auto g = parse();
  breaker.run(*g);
  PassPipeline p = default_pipeline(quiet_options());
  EXPECT_THAT(error_of([&] { p.run(*g); }),
              HasSubstr("the pipeline's input graph is invalid: verifier: graph @chain"));
}

TEST(PassPipelineTest, PassErrorsArePrefixedWithThePassName) {
  PassPipeline p(quiet_options());
  p.add(std::make_unique<ThrowingPass>());
  auto g = parse();
  EXPECT_EQ(error_of([&] { p.run(*g); }), "pass \"thrower\" failed: something about the graph");
}

class DumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_dump_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::filesystem::path dir_;
};

TEST_F(DumpTest, FilesAreNumberedInOrderAndOnlyForChanges) {
  PipelineOptions o = quiet_options();
  o.dump_dir = dir_.string();
  PassPipeline p = default_pipeline(o);
  auto g = parse();
  std::string input_text = ir::print_graph(*g);
  p.run(*g);
  // Round 1: simplify (x*1, neg neg) and dce change the graph; fold and cse find nothing.
  // Round 2 changes nothing, so writes nothing.
  EXPECT_THAT(files(), ElementsAre("000.input.kir", "001.after.algebraic-simplify.kir",
                                   "002.after.dce.kir"));
  EXPECT_EQ(read("000.input.kir"), input_text);
  EXPECT_EQ(read("002.after.dce.kir"), ir::print_graph(*g));
  // Every dump reads back to the same text.
  for (const std::string& f : files())
    EXPECT_EQ(ir::print_graph(*ir::parse_graph(read(f))), read(f)) << f;
}

TEST_F(DumpTest, FilterSelectsPassesByRegex) {
  PipelineOptions o = quiet_options();
  o.dump_dir = dir_.string();
  o.dump_filter = "^d";
  PassPipeline p = default_pipeline(o);
  auto g = parse();
  p.run(*g);
  EXPECT_THAT(files(), ElementsAre("000.input.kir", "001.after.dce.kir"));
}

TEST_F(DumpTest, BadFilterIsAnError) {
  PipelineOptions o = quiet_options();
  o.dump_dir = dir_.string();
  o.dump_filter = "(";
  PassPipeline p = default_pipeline(o);
  auto g = parse();
  EXPECT_THAT(error_of([&] { p.run(*g); }),
              HasSubstr("the pass dump filter \"(\" (KILN_DUMP_PASSES) is not a valid regular "
                        "expression"));
}

TEST(PassPipelineTest, DefaultPipelineReachesAFixedPoint) {
  PassPipeline p = default_pipeline(quiet_options());
  auto g = parse();
  EXPECT_TRUE(p.run(*g));
  EXPECT_EQ(ir::print_graph(*g),
            "graph @chain(%0: f32[4]) -> (f32[4]) {\n"
            "  %1 = add(%0, %0) : f32[4]\n"
            "  return %1\n"
            "}\n");
  // Running it again changes nothing.
  EXPECT_FALSE(p.run(*g));
  EXPECT_THAT(p.pass_names(), ElementsAre("algebraic-simplify", "constant-fold", "cse", "dce"));
}

TEST(PassPipelineTest, TimingsTableHasOneRowPerPassAndATotal) {
  PassPipeline p = default_pipeline(quiet_options());
  auto g = parse();
  p.run(*g);
  std::string table = p.timings_table();
  EXPECT_THAT(table, HasSubstr("pass"));
  EXPECT_THAT(table, HasSubstr("time (us)"));
  for (const char* name : {"algebraic-simplify", "constant-fold", "cse", "dce", "total"})
    EXPECT_THAT(table, HasSubstr(name));
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 6);
}

TEST(PassRegistryTest, CreatesPassesByNameAndListsThemOnError) {
  for (std::string_view name : registered_pass_names()) EXPECT_EQ(create_pass(name)->name(), name);
  EXPECT_EQ(
      error_of([] { create_pass("cse2"); }),
      "unknown pass \"cse2\" (known passes: algebraic-simplify, constant-fold, cse, dce, "
      "fusion, hoist-loop-transposes, lower-assignments, refine-shapes, schedule-collectives, "
      "schedule-last-uses, split-reductions, transpose-folding)");
}

TEST(ConstantFoldTest, ElementLimitIsAnOption) {
  auto g = ir::parse_graph(R"(graph @f() -> (f32[8]) {
    %one = constant dense<1.0> : f32[]
    %b = broadcast_to(%one) {shape=[8]} : f32[8]
    return %b
  })");
  EXPECT_FALSE(make_constant_fold(/*max_elements=*/4)->run(*g));
  EXPECT_TRUE(make_constant_fold(/*max_elements=*/8)->run(*g));
  EXPECT_THAT(ir::print_graph(*g), HasSubstr("constant dense<1.0> : f32[8]"));
}

TEST(GraphEditingTest, MoveBeforeKeepsTheOtherNodesInOrder) {
  auto g = parse();
  ir::Node* c = g->add_constant(g->nodes()[0]->literal());
  g->move_before(c, g->nodes()[2].get());
  ASSERT_EQ(g->nodes().size(), 7u);
  EXPECT_EQ(g->nodes()[2].get(), c);
  EXPECT_TRUE(g->nodes()[3]->is_op(OpKind::Neg));
  g->move_before(c, g->nodes()[6].get());
  EXPECT_EQ(g->nodes()[5].get(), c);
  EXPECT_TRUE(g->nodes()[6]->is_op(OpKind::Add));
  ir::verify_graph(*g);
}

}  // namespace
}  // namespace kiln::passes
