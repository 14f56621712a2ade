// Memory planning: buffer reuse on elementwise chains, values alive together, what stays
// outside the arena, the unknown-shape error, a brute-force overlap check on random graphs,
// the arena against its lower bound on an MLP training step, and gradient buckets (regions of
// all_reduce results, their direct and packed members). Concat regions: concat_region_test.cc.
#include "kiln/codegen/memory_plan.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/codegen/arena_layout.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/value_numbering.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/passes/pipeline.h"
#include "tests/codegen/memory_plan_check.h"
#include "tests/passes/random_graph.h"
#include "tests/support/error_of.h"

namespace kiln::codegen {
namespace {

using ::testing::HasSubstr;

using plan_check::all_reshapes;
using plan_check::check_plan;
using plan_check::f32;
using plan_check::op;
using plan_check::splat;

TEST(MemoryPlanTest, ElementwiseChainRunsInOneBuffer) {
  ir::Graph g("chain");
  ir::Value* x = g.add_parameter(f32({256, 256}));
  ir::Value* a = op(g, OpKind::Exp, {x});
  ir::Value* b = op(g, OpKind::Neg, {a});
  ir::Value* c = op(g, OpKind::Tanh, {b});
  ir::Value* d = op(g, OpKind::Relu, {c});
  ir::Value* e = op(g, OpKind::Sum, {d}, {{"axes", std::vector<int64_t>{}}, {"keepdims", false}});
  g.set_outputs({e});
  ir::verify_graph(g);
  MemoryPlan plan = plan_memory(g);
  check_plan(g, plan);
  const size_t bytes = 256 * 256 * 4;
  EXPECT_EQ(plan.arena_bytes, bytes);
  EXPECT_EQ(plan.lower_bound_bytes, bytes);
  EXPECT_EQ(plan.of(a).reuses_buffer_of, nullptr);  // x is the caller's
  EXPECT_EQ(plan.of(b).reuses_buffer_of, a);
  EXPECT_EQ(plan.of(c).reuses_buffer_of, b);
  EXPECT_EQ(plan.of(d).reuses_buffer_of, c);
  EXPECT_EQ(plan.of(e).kind, BufferKind::kOutput);
  EXPECT_EQ(plan.of(x).kind, BufferKind::kParameter);
  EXPECT_EQ(plan.of(d).first_step, 3);
  EXPECT_EQ(plan.of(d).last_step, 4);
  EXPECT_EQ(plan.to_string(),
            "arena 256.0 KiB (lower bound 256.0 KiB, 1.00x), 4 buffers, 3 reusing an operand's");

  MemoryPlanOptions no_reuse;
  no_reuse.reuse_buffers = false;
  MemoryPlan plain = plan_memory(g, no_reuse);
  check_plan(g, plain);
  EXPECT_EQ(plain.reusing_values(), 0);
  EXPECT_EQ(plain.arena_bytes, 2 * bytes);  // ping-pong between two buffers
}

TEST(MemoryPlanTest, AReshapeViewKeepsItsOperandsBufferAlive) {
  ir::Graph g("view");
  ir::Value* x = g.add_parameter(f32({4, 8}));
  ir::Value* a = op(g, OpKind::Exp, {x});                                             // step 0
  ir::Value* r = op(g, OpKind::Reshape, {a}, {{"shape", std::vector<int64_t>{32}}});  // 1
  ir::Value* b = op(g, OpKind::Neg, {a});  // step 2: a's last use, but r still views it
  ir::Value* c = op(g, OpKind::Exp, {r});  // step 3
  ir::Value* d = op(g, OpKind::Reshape, {c}, {{"shape", std::vector<int64_t>{4, 8}}});
  ir::Value* e = op(g, OpKind::Add, {b, d});
  g.set_outputs({e});
  MemoryPlanOptions options;
  options.views = all_reshapes(g);
  MemoryPlan plan = plan_memory(g, options);
  check_plan(g, plan);
  EXPECT_EQ(plan.of(r).view_of, a);
  EXPECT_EQ(plan.of(r).offset, plan.of(a).offset);
  EXPECT_EQ(plan.of(b).reuses_buffer_of, nullptr) << "a's bytes are still read through r";
  EXPECT_NE(plan.of(b).offset, plan.of(a).offset);
  EXPECT_EQ(plan.of(d).view_of, c);
  EXPECT_EQ(plan.view_values(), 2);
  EXPECT_THAT(plan.to_table(g), HasSubstr("view of"));
  // Not listed: the reshape gets a buffer of its own.
  MemoryPlan plain = plan_memory(g);
  EXPECT_EQ(plain.view_values(), 0);
  EXPECT_EQ(plain.of(r).view_of, nullptr);
}

TEST(MemoryPlanTest, DiamondKeepsTwoValuesAlive) {
  ir::Graph g("diamond");
  ir::Value* x = g.add_parameter(f32({100}));  // 400 B, 448 aligned
  ir::Value* a = op(g, OpKind::Exp, {x});
  ir::Value* b = op(g, OpKind::Neg, {a});   // a still alive: no reuse
  ir::Value* c = op(g, OpKind::Tanh, {a});  // a dies here: c takes its buffer
  ir::Value* d = op(g, OpKind::Add, {b, c});
  ir::Value* e = op(g, OpKind::Exp, {d});
  g.set_outputs({e});
  ir::verify_graph(g);
  MemoryPlan plan = plan_memory(g);
  check_plan(g, plan);
  EXPECT_EQ(plan.of(b).reuses_buffer_of, nullptr);
  EXPECT_EQ(plan.of(c).reuses_buffer_of, a);
  EXPECT_EQ(plan.of(d).reuses_buffer_of, b);
  EXPECT_NE(plan.of(b).offset, plan.of(c).offset);
  EXPECT_EQ(plan.arena_bytes, 2 * 448u);
  EXPECT_EQ(plan.lower_bound_bytes, 2 * 448u);
  EXPECT_EQ(plan.of(e).kind, BufferKind::kOutput);
}

TEST(MemoryPlanTest, BroadcastOperandsBuffersAreNotReused) {
  ir::Graph g("broadcast");
  ir::Value* x = g.add_parameter(f32({8}));
  ir::Value* y = g.add_parameter(f32({4, 8}));
  ir::Value* a = op(g, OpKind::Exp, {x});         // f32[8]
  ir::Value* b = op(g, OpKind::Add, {a, y});      // f32[4,8]: a is too small
  ir::Value* c = op(g, OpKind::Greater, {b, y});  // bool: other element size
  ir::Value* d = op(g, OpKind::Cast, {c}, {{"dtype", DType::f32}});
  g.set_outputs({d});
  MemoryPlan plan = plan_memory(g);
  check_plan(g, plan);
  EXPECT_EQ(plan.reusing_values(), 0);
  EXPECT_EQ(plan.of(c).size, 32u);
}

TEST(MemoryPlanTest, ParametersVariablesConstantsAndOutputsStayOutside) {
  ir::Graph g("step");
  ir::Value* x = g.add_parameter(f32({16}));
  int v = g.add_variable("w", f32({16}), true);
  ir::Value* w = g.variable(0).entry;
  ir::Value* k = splat(g, {16}, 0.5f);
  ir::Value* m = op(g, OpKind::Mul, {x, w});
  ir::Value* d = op(g, OpKind::Mul, {m, k});
  ir::Node* assign = g.add_assignment(ir::NodeKind::kAssignSub, v, d);
  ir::Value* r = op(g, OpKind::Neg, {assign->output(0)});
  g.set_outputs({r, x});
  ir::verify_graph(g);
  MemoryPlan plan = plan_memory(g);
  check_plan(g, plan);
  EXPECT_EQ(plan.of(x).kind, BufferKind::kParameter);
  EXPECT_TRUE(plan.of(x).graph_output);
  EXPECT_EQ(plan.of(w).kind, BufferKind::kVariable);
  EXPECT_EQ(plan.of(w).variable, 0);
  EXPECT_EQ(plan.of(k).kind, BufferKind::kConstant);
  EXPECT_EQ(plan.of(assign->output(0)).kind, BufferKind::kVariable);
  EXPECT_EQ(plan.of(assign->output(0)).variable, 0);
  EXPECT_EQ(plan.of(r).kind, BufferKind::kOutput);
  EXPECT_EQ(plan.of(m).kind, BufferKind::kArena);
  EXPECT_EQ(plan.of(d).reuses_buffer_of, m);
  EXPECT_EQ(plan.arena_values(), 2);
  EXPECT_EQ(plan.arena_bytes, 64u);
  EXPECT_THAT(plan.to_table(g), HasSubstr("%3 arena [1, 2] 64 B @ 0"));
  EXPECT_THAT(plan.to_table(g), HasSubstr("%4 arena [2, 3] 64 B @ 0 reuses %3"));
  EXPECT_THAT(plan.to_table(g), HasSubstr("%5 variable [3, 4] 64 B $0"));
}

TEST(MemoryPlanTest, UnknownShapesAreAnErrorNamingTheValue) {
  auto g = ir::parse_graph(R"(graph @g(%x: f32[4], %y: f32[?,128]) -> (f32[4]) {
  %1 = neg(%x) : f32[4]
  return %1
}
)");
  EXPECT_EQ(test::error_of([&] { plan_memory(*g); }),
            "memory planning needs known shapes; %1 is f32[?,128]: specialise the signature");
}

TEST(MemoryPlanTest, CondOperandsAndResultsArePlannedAtTheNode) {
  auto g = ir::parse_graph(R"(graph @g(%p: bool[], %x: f32[32]) -> (f32[]) {
  %a = exp(%x) : f32[32]
  %c = cond(%p, %a) : f32[32] {
    then (%0: f32[32]) -> (f32[32]) {
      %1 = neg(%0) : f32[32]
      return %1
    }
    else (%0: f32[32]) -> (f32[32]) {
      return %0
    }
  }
  %s = sum(%c) {axes=[], keepdims=false} : f32[]
  return %s
}
)");
  MemoryPlan plan = plan_memory(*g);
  check_plan(*g, plan);
  EXPECT_EQ(plan.num_steps, 3);
  EXPECT_EQ(plan.arena_values(), 2);
  EXPECT_EQ(plan.reusing_values(), 0);  // cond is not elementwise
  EXPECT_EQ(plan.arena_bytes, 256u);
}

TEST(MemoryPlanTest, NoOverlapOnRandomGraphs) {
  int arena_values = 0, reused = 0, views = 0, placed = 0;
  double worst = 1.0;
  size_t arena = 0, bound = 0;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    auto g = test::random_graph(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    MemoryPlan plan = plan_memory(*g);
    check_plan(*g, plan);
    arena_values += plan.arena_values();
    reused += plan.reusing_values();
    // Element-aligned offsets too: most random concat windows (a few floats each) then qualify
    // for computing their operands in the concat's result.
    MemoryPlanOptions packed;
    packed.alignment = 4;
    const MemoryPlan dense = plan_memory(*g, packed);
    check_plan(*g, dense);
    placed += dense.placed_values();
    arena += plan.arena_bytes;
    bound += plan.lower_bound_bytes;
    if (plan.lower_bound_bytes > 0)
      worst = std::max(worst, double(plan.arena_bytes) / double(plan.lower_bound_bytes));
    MemoryPlanOptions options;
    options.reuse_buffers = false;
    check_plan(*g, plan_memory(*g, options));
    // Reshapes as views, with and without buffer reuse around them.
    for (bool reuse : {false, true}) {
      MemoryPlanOptions with_views;
      with_views.reuse_buffers = reuse;
      with_views.views = all_reshapes(*g);
      MemoryPlan viewed = plan_memory(*g, with_views);
      check_plan(*g, viewed);
      views += viewed.view_values();
    }
    // And after the default pipeline (fewer, differently shaped nodes).
    passes::PipelineOptions pipeline_options;
    pipeline_options.verify = true;
    passes::default_pipeline(pipeline_options).run(*g);
    check_plan(*g, plan_memory(*g));
    if (::testing::Test::HasFailure()) break;
  }
  std::printf(
      "[ random plans ] %d arena values, %d reusing; arena / lower bound: %.3f overall, "
      "%.2f worst\n",
      arena_values, reused, double(arena) / double(bound), worst);
  EXPECT_GT(arena_values, 1000);
  EXPECT_GT(reused, 100);
  EXPECT_GT(views, 50) << "the random graphs should exercise reshape views";
  std::printf("[ random plans ] %d concat operands computed in the concat's result\n", placed);
}

// A traced-style MLP training step: dense + relu layers of `widths` (input first, classes
// last), softmax cross-entropy, backward, SGD updates (assign_sub) of every kernel and bias.
// With `all_reduce`, every gradient is summed over the ranks first (the data-parallel step).
std::unique_ptr<ir::Graph> mlp_training_step(int64_t batch, const std::vector<int64_t>& widths,
                                             bool all_reduce = false) {
  auto g = std::make_unique<ir::Graph>("mlp_step");
  auto mm = [&](ir::Value* a, ir::Value* b, bool ta, bool tb) {
    return op(*g, OpKind::MatMul, {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
  };
  auto sum = [&](ir::Value* a, std::vector<int64_t> axes) {
    return op(*g, OpKind::Sum, {a}, {{"axes", axes}, {"keepdims", false}});
  };
  const size_t layers = widths.size() - 1;
  ir::Value* x = g->add_parameter(f32({batch, widths[0]}));
  ir::Value* labels = g->add_parameter(f32({batch, widths.back()}));
  std::vector<int> kernels, biases;
  for (size_t l = 0; l < layers; ++l) {
    kernels.push_back(
        g->add_variable(fmt::format("dense_{}/kernel", l), f32({widths[l], widths[l + 1]}), true));
    biases.push_back(g->add_variable(fmt::format("dense_{}/bias", l), f32({widths[l + 1]}), true));
  }
  auto var = [&](int i) { return g->variable(size_t(i)).entry; };
  // forward: inputs[l] feeds layer l; pre[l] is its pre-activation.
  std::vector<ir::Value*> inputs = {x}, pre;
  for (size_t l = 0; l < layers; ++l) {
    pre.push_back(
        op(*g, OpKind::Add, {mm(inputs[l], var(kernels[l]), false, false), var(biases[l])}));
    if (l + 1 < layers) inputs.push_back(op(*g, OpKind::Relu, {pre[l]}));
  }
  ir::Value* ls = op(*g, OpKind::LogSoftmax, {pre.back()}, {{"axis", int64_t{-1}}});
  ir::Value* nll = sum(op(*g, OpKind::Mul, {ls, labels}), {});
  ir::Value* loss = op(*g, OpKind::Mul, {nll, splat(*g, {}, -1.0f / float(batch))});
  // backward
  ir::Value* d = op(*g, OpKind::Mul,
                    {op(*g, OpKind::Sub, {op(*g, OpKind::Exp, {ls}), labels}),
                     splat(*g, {}, 1.0f / float(batch))});
  std::vector<std::pair<int, ir::Value*>> grads;
  for (size_t l = layers; l-- > 0;) {
    grads.emplace_back(kernels[l], mm(inputs[l], d, true, false));
    grads.emplace_back(biases[l], sum(d, {0}));
    if (l == 0) break;
    ir::Value* da = mm(d, var(kernels[l]), false, true);
    ir::Value* mask = op(*g, OpKind::Greater, {pre[l - 1], splat(*g, {}, 0.0f)});
    d = op(*g, OpKind::Select, {mask, da, splat(*g, {}, 0.0f)});
  }
  if (all_reduce)
    for (auto& [v, grad] : grads) grad = op(*g, OpKind::AllReduce, {grad});
  // SGD
  ir::Value* lr = splat(*g, {}, 0.01f);
  for (auto [v, grad] : grads)
    g->add_assignment(ir::NodeKind::kAssignSub, v, op(*g, OpKind::Mul, {grad, lr}));
  g->set_outputs({loss});
  ir::verify_graph(*g);
  return g;
}

// schedule-last-uses (passes/schedule_last_uses.h) never raises the lower bound of the arena
// codegen plans (plan_arena_values: no buffer reuse, reshapes as views, concat regions, cond /
// while results outside): no step's live bytes grow. Random graphs, before and after the pass.
TEST(MemoryPlanTest, SchedulingLastUsesNeverRaisesTheLowerBound) {
  constexpr uint64_t kSeeds = 3000;
  int moved = 0, lowered = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    auto before = test::random_graph(seed);
    auto after = test::random_graph(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    if (!passes::create_pass("schedule-last-uses")->run(*after)) continue;
    ir::verify_graph(*after);
    ++moved;
    const MemoryPlan a = plan_arena_values(*before);
    const MemoryPlan b = plan_arena_values(*after);
    check_plan(*after, b);
    EXPECT_LE(b.lower_bound_bytes, a.lower_bound_bytes) << ir::print_graph(*before);
    lowered += b.lower_bound_bytes < a.lower_bound_bytes;
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("[ last uses ] nodes moved in %d of %llu random graphs, lower bound lowered in %d\n",
              moved, (unsigned long long)kSeeds, lowered);
  EXPECT_GT(moved, 10);
  EXPECT_GT(lowered, 0);
}

TEST(MemoryPlanTest, MlpTrainingStepsAreCloseToTheLowerBound) {
  struct Case {
    int64_t batch;
    std::vector<int64_t> widths;
  };
  const Case cases[] = {{128, {784, 256, 10}},
                        {64, {784, 512, 256, 128, 10}},
                        {256, {32, 1024, 1024, 1024, 10}},
                        {32, {3072, 100, 4000, 50, 10}}};
  for (const Case& c : cases) {
    auto g = mlp_training_step(c.batch, c.widths);
    MemoryPlan plan = plan_memory(*g);
    check_plan(*g, plan);
    MemoryPlanOptions no_reuse;
    no_reuse.reuse_buffers = false;
    MemoryPlan plain = plan_memory(*g, no_reuse);
    check_plan(*g, plain);
    std::printf("[ mlp plan ] batch %lld, widths [%s]: %s; without buffer reuse: %s\n",
                (long long)c.batch, fmt::format("{}", fmt::join(c.widths, ", ")).c_str(),
                plan.to_string().c_str(), plain.to_string().c_str());
    double ratio = double(plan.arena_bytes) / double(plan.lower_bound_bytes);
    std::printf("[ mlp plan ]   arena %zu B / lower bound %zu B = %.4f\n", plan.arena_bytes,
                plan.lower_bound_bytes, ratio);
    EXPECT_LE(ratio, 1.1) << plan.to_table(*g);
    EXPECT_GT(plan.reusing_values(), 0);
    EXPECT_LT(plan.arena_bytes, plain.arena_bytes);
  }
}

// The traced MLP training step of tests/passes/fusion_mlp_train_step.kir, optimized as for
// compilation (fusion included): its plan stays within 1.1x of its lower bound.
TEST(MemoryPlanTest, FusedMlpTrainingStepIsCloseToTheLowerBound) {
  auto g = ir::parse_graph_file(KILN_SOURCE_DIR "/tests/passes/fusion_mlp_train_step.kir");
  passes::PipelineOptions options;
  options.verify = true;
  passes::optimize_pipeline(options).run(*g);
  MemoryPlan plan = plan_memory(*g);
  check_plan(*g, plan);
  EXPECT_LE(double(plan.arena_bytes), 1.1 * double(plan.lower_bound_bytes)) << plan.to_string();
  EXPECT_GT(plan.lower_bound_bytes, 0u);
}

// Gradient buckets on a data-parallel MLP step: every gradient is an arena result whose one
// use is its all_reduce, so every bucket is direct (no packing copy), with and without buffer
// reuse; the buckets follow the all_reduce order and the byte cap.
TEST(MemoryPlanTest, DataParallelMlpGradientsAreComputedInTheirBuckets) {
  auto g = mlp_training_step(64, {784, 512, 256, 10}, /*all_reduce=*/true);
  for (bool reuse : {true, false}) {
    MemoryPlanOptions options;
    options.reuse_buffers = reuse;
    options.bucket_bytes = 1 << 20;
    MemoryPlan plan = plan_memory(*g, options);
    check_plan(*g, plan);
    std::printf("[ buckets ] %s\n", plan.to_string().c_str());
    std::vector<const ir::Value*> all_reduces;
    for (const auto& n : g->nodes())
      if (n->is_op(OpKind::AllReduce)) all_reduces.push_back(n->output());
    // In all_reduce order (last layer first): [kernel 2, bias 2, kernel 1, bias 1] (523 KiB),
    // [kernel 0] (1568 KiB: over the cap, alone), [bias 0].
    std::vector<const ir::Value*> in_buckets;
    for (const CollectiveBucket& b : plan.buckets) {
      EXPECT_TRUE(b.direct()) << plan.to_table(*g);
      EXPECT_TRUE(b.members.size() == 1 || b.bytes <= options.bucket_bytes);
      for (const BucketMember& m : b.members) in_buckets.push_back(m.sum);
    }
    EXPECT_EQ(in_buckets.size(), all_reduces.size());
    EXPECT_EQ(in_buckets, all_reduces) << "buckets keep the all_reduce order";
    EXPECT_EQ(plan.buckets.size(), 3u) << plan.to_table(*g);
  }
  MemoryPlanOptions none;
  none.bucket_bytes = 0;
  EXPECT_TRUE(plan_memory(*g, none).buckets.empty());
}

// Which members are packed, and why; the cap and the dtype end a bucket; the dump names each
// bucket's region and path.
TEST(MemoryPlanTest, GradientBucketsPackOnlyWhatCannotBeComputedInPlace) {
  auto g = ir::parse_graph(
      R"(graph @step(%x: f32[5,6], %y: f32[7], %p: f32[3], %d: f64[2]) -> (f32[5,6], f32[7], f32[3], f32[7], f64[2]) {
  %g1 = tanh(%x) : f32[5,6]
  %s1 = all_reduce(%g1) : f32[5,6]
  %g2 = exp(%y) : f32[7]
  %s2 = all_reduce(%g2) : f32[7]
  %s3 = all_reduce(%p) : f32[3]
  %g4 = neg(%y) : f32[7]
  %s4 = all_reduce(%g4) : f32[7]
  %e4 = exp(%g4) : f32[7]
  %gd = neg(%d) : f64[2]
  %sd = all_reduce(%gd) : f64[2]
  %u1 = mul(%s1, %s1) : f32[5,6]
  %u2 = neg(%s2) : f32[7]
  %u3 = neg(%s3) : f32[3]
  %u4 = add(%s4, %e4) : f32[7]
  %ud = neg(%sd) : f64[2]
  return %u1, %u2, %u3, %u4, %ud
})",
      "buckets.kir");
  ir::verify_graph(*g);
  // (node positions: g1 0, s1 1, g2 2, s2 3, s3 4, g4 5, s4 6)
  auto value = [&](size_t node) {
    return static_cast<const ir::Value*>(g->nodes()[node]->output());
  };
  MemoryPlanOptions options;
  options.bucket_bytes = 1 << 20;
  MemoryPlan plan = plan_memory(*g, options);
  check_plan(*g, plan);
  const std::string table = plan.to_table(*g);
  ASSERT_EQ(plan.buckets.size(), 2u) << table;  // f32 (4 members), then f64
  const CollectiveBucket& b = plan.buckets[0];
  ASSERT_EQ(b.members.size(), 4u) << table;
  EXPECT_EQ(b.members[0].packed, "");
  EXPECT_EQ(b.members[1].packed, "");
  EXPECT_EQ(b.members[2].packed, "parameter");
  EXPECT_EQ(b.members[3].packed, "read by another node");
  EXPECT_FALSE(b.direct());
  EXPECT_TRUE(plan.buckets[1].direct());
  EXPECT_EQ(plan.buckets[1].dtype, DType::f64);
  // 120 B, 28 B, 12 B, 28 B at offsets 0, 128, 192, 256: 320 B with 132 B of padding.
  EXPECT_EQ(b.bytes, 320u);
  EXPECT_EQ(b.padding(), 132u);
  EXPECT_EQ(plan.of(value(0)).offset, plan.of(value(1)).offset);
  EXPECT_EQ(plan.of(value(3)).offset, b.offset + 128);
  EXPECT_NE(plan.of(value(5)).bucket, 0) << "read by exp too: not summed where computed";
  EXPECT_THAT(table, HasSubstr("2 gradient bucket(s) (1 direct, 1 packed)"));
  EXPECT_THAT(table, HasSubstr(fmt::format("bucket 0 f32 @ {} 320 B (padding 132 B)", b.offset)));
  EXPECT_THAT(table, HasSubstr("packed (parameter) from %2"));
  EXPECT_THAT(table, HasSubstr(", direct:"));

  // A cap of 192 B: s1 + s2 fill the first bucket, s3 + s4 the next.
  options.bucket_bytes = 192;
  MemoryPlan small = plan_memory(*g, options);
  check_plan(*g, small);
  ASSERT_EQ(small.buckets.size(), 3u) << small.to_table(*g);
  EXPECT_EQ(small.buckets[0].members.size(), 2u);
  EXPECT_EQ(small.buckets[1].members.size(), 2u);
  EXPECT_TRUE(small.buckets[0].direct());
}

}  // namespace
}  // namespace kiln::codegen
