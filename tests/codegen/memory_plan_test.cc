// Memory planning: buffer reuse on elementwise chains, values alive together, what stays
// outside the arena, the unknown-shape error, a brute-force overlap check on random graphs,
// the arena against its lower bound on an MLP training step, gradient buckets (regions of
// all_reduce results, their direct and packed members) and concat operands computed in their
// place in the concat's result.
#include "kiln/codegen/memory_plan.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "kiln/ir/parser.h"
#include "kiln/ir/value_numbering.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pipeline.h"
#include "tests/passes/random_graph.h"
#include "tests/support/error_of.h"

namespace kiln::codegen {
namespace {

using ::testing::HasSubstr;

TensorType f32(Shape s) { return {DType::f32, s}; }

ir::Value* op(ir::Graph& g, OpKind k, std::vector<ir::Value*> in, Attrs a = {}) {
  return g.add_op(k, std::move(in), std::move(a))->output(0);
}

ir::Value* splat(ir::Graph& g, const Shape& s, float x) {
  std::vector<float> data(size_t(s.num_elements()), x);
  return g.add_constant(ir::Literal::copy_of(f32(s), data.data()))->output(0);
}

// The value whose buffer `p` views, through chains of views (p itself when it views none).
const ir::Value* view_root(const MemoryPlan& plan, const ValuePlan& p) {
  const ir::Value* v = p.value;
  while (plan.of(v).view_of) v = plan.of(v).view_of;
  return v;
}

// Every reshape node of `g`: plan_memory may make their results views.
std::unordered_set<const ir::Node*> all_reshapes(const ir::Graph& g) {
  std::unordered_set<const ir::Node*> out;
  for (const auto& n : g.nodes())
    if (n->is_op(OpKind::Reshape)) out.insert(n.get());
  return out;
}

// Brute force: lifetimes cover every use, arena offsets are aligned and inside the arena, and
// two arena values alive at the same step never share bytes, except a value reusing the buffer
// over an operand that dies at that very step.
void check_plan(const ir::Graph& g, const MemoryPlan& plan) {
  ir::ValueNumbering numbering(g);
  auto name = [&](const ValuePlan& p) { return numbering.ref(p.value); };
  for (size_t s = 0; s < g.nodes().size(); ++s) {
    for (const ir::Value* in : g.nodes()[s]->inputs()) {
      const ValuePlan& p = plan.of(in);
      EXPECT_LT(p.first_step, int(s)) << name(p);
      EXPECT_GE(p.last_step, int(s)) << name(p);
    }
    for (size_t o = 0; o < g.nodes()[s]->num_outputs(); ++o)
      EXPECT_EQ(plan.of(g.nodes()[s]->output(o)).first_step, int(s));
  }
  for (const ir::Value* out : g.outputs()) {
    EXPECT_EQ(plan.of(out).last_step, plan.num_steps);
    EXPECT_FALSE(plan.of(out).in_arena()) << "graph outputs stay out of the arena";
  }
  for (const ValuePlan& p : plan.values) {
    if (!p.in_arena()) {
      EXPECT_EQ(p.reuses_buffer_of, nullptr) << name(p);
      continue;
    }
    EXPECT_EQ(p.offset % plan.alignment, 0u) << name(p);
    EXPECT_LE(p.offset + p.size, plan.arena_bytes) << name(p);
    if (p.reuses_buffer_of) {
      const ValuePlan& q = plan.of(p.reuses_buffer_of);
      EXPECT_TRUE(q.in_arena()) << name(p);
      EXPECT_EQ(q.offset, p.offset) << name(p);
      EXPECT_EQ(q.last_step, p.first_step) << name(p) << " reuses a value that is still alive";
      const auto& inputs = p.value->producer()->inputs();
      EXPECT_NE(std::find(inputs.begin(), inputs.end(), p.reuses_buffer_of), inputs.end())
          << name(p);
    }
    if (p.placed_in) {
      // Computed in its place in a concat's result: its bytes are the window the concat would
      // copy it to, and the concat is its only reader.
      const ir::Node* concat = p.placed_in->producer();
      ASSERT_TRUE(concat != nullptr && concat->is_op(OpKind::Concat)) << name(p);
      const ValuePlan& r = plan.of(p.placed_in);
      EXPECT_TRUE(r.in_arena()) << name(p);
      size_t at = 0;
      for (const ir::Value* in : concat->inputs()) {
        if (in == p.value) break;
        at += plan.of(in).size;
      }
      EXPECT_EQ(p.offset, r.offset + at) << name(p);
      EXPECT_LE(at + p.size, r.size) << name(p);
      EXPECT_EQ(p.last_step, r.first_step) << name(p) << " is read after the concat";
      EXPECT_EQ(p.reuses_buffer_of, nullptr) << name(p);
    }
    if (p.view_of) {
      const ValuePlan& q = plan.of(p.view_of);
      EXPECT_TRUE(q.in_arena()) << name(p);
      EXPECT_EQ(q.offset, p.offset) << name(p);
      EXPECT_EQ(q.size, p.size) << name(p);
      EXPECT_TRUE(p.value->producer()->is_op(OpKind::Reshape)) << name(p);
      EXPECT_EQ(p.value->producer()->input(0), p.view_of) << name(p);
    }
  }
  for (size_t i = 0; i < plan.values.size(); ++i)
    for (size_t j = i + 1; j < plan.values.size(); ++j) {
      const ValuePlan& a = plan.values[i];
      const ValuePlan& b = plan.values[j];
      if (!a.in_arena() || !b.in_arena() || a.size == 0 || b.size == 0) continue;
      bool in_time = a.first_step <= b.last_step && b.first_step <= a.last_step;
      bool in_memory = a.offset < b.offset + b.size && b.offset < a.offset + a.size;
      if (!in_time || !in_memory) continue;
      bool reused = (b.reuses_buffer_of == a.value && a.last_step == b.first_step) ||
                    (a.reuses_buffer_of == b.value && b.last_step == a.first_step);
      // Views of one buffer (a reshape's result and its operand, chains of them) share it.
      bool views = view_root(plan, a) == view_root(plan, b);
      // A direct bucket member: the all_reduce's operand and result share their bytes.
      const auto* pa = a.value->producer();
      const auto* pb = b.value->producer();
      bool bucket_member = a.bucket >= 0 && a.bucket == b.bucket && a.offset == b.offset &&
                           ((pb && pb->is_op(OpKind::AllReduce) && pb->input(0) == a.value) ||
                            (pa && pa->is_op(OpKind::AllReduce) && pa->input(0) == b.value));
      // A concat's operand computed in its result, and that result (or a view of it).
      bool in_concat = (a.placed_in && view_root(plan, b) == a.placed_in) ||
                       (b.placed_in && view_root(plan, a) == b.placed_in);
      EXPECT_TRUE(reused || views || bucket_member || in_concat)
          << name(a) << " [" << a.first_step << ", " << a.last_step << "] @ " << a.offset << " and "
          << name(b) << " [" << b.first_step << ", " << b.last_step << "] @ " << b.offset
          << " overlap";
    }
  EXPECT_GE(plan.arena_bytes, plan.lower_bound_bytes);
  // Buckets: the members lie in their region in all_reduce order, each aligned, and no arena
  // value outside the bucket shares the region's bytes while the region lives.
  for (size_t k = 0; k < plan.buckets.size(); ++k) {
    const CollectiveBucket& b = plan.buckets[k];
    EXPECT_EQ(b.offset % plan.alignment, 0u);
    EXPECT_LE(b.offset + b.bytes, plan.arena_bytes);
    size_t expected = 0;
    for (const BucketMember& m : b.members) {
      EXPECT_EQ(m.offset, expected) << "bucket " << k << ": members are not contiguous";
      expected += (m.size + plan.alignment - 1) / plan.alignment * plan.alignment;
      EXPECT_EQ(plan.of(m.sum).offset, b.offset + m.offset);
      EXPECT_EQ(plan.of(m.sum).bucket, int(k));
      if (m.packed.empty()) {
        EXPECT_EQ(plan.of(m.gradient).offset, b.offset + m.offset);
        EXPECT_GE(plan.of(m.gradient).first_step, b.first_step);
      }
      EXPECT_LE(plan.of(m.sum).last_step, b.last_step);
    }
    EXPECT_EQ(b.bytes, expected);
    for (const ValuePlan& p : plan.values) {
      if (!p.in_arena() || p.size == 0 || p.bucket == int(k)) continue;
      bool in_time = p.first_step <= b.last_step && b.first_step <= p.last_step;
      bool in_memory = p.offset < b.offset + b.bytes && b.offset < p.offset + p.size;
      EXPECT_FALSE(in_time && in_memory) << name(p) << " overlaps bucket " << k;
    }
  }
}

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

TEST(MemoryPlanTest, ConcatOperandsAreComputedInTheirPlace) {
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
TEST(MemoryPlanTest, RandomConcatsPlaceExactlyTheQualifyingPieces) {
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
