// Helpers of the memory-plan tests (tests/codegen/memory_plan_test.cc,
// concat_region_test.cc): graph builders and check_plan, a brute-force check of a plan's
// lifetimes, offsets and overlaps.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "kiln/codegen/memory_plan.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/value_numbering.h"

namespace kiln::codegen::plan_check {

inline TensorType f32(Shape s) { return {DType::f32, s}; }

inline ir::Value* op(ir::Graph& g, OpKind k, std::vector<ir::Value*> in, Attrs a = {}) {
  return g.add_op(k, std::move(in), std::move(a))->output(0);
}

inline ir::Value* splat(ir::Graph& g, const Shape& s, float x) {
  std::vector<float> data(size_t(s.num_elements()), x);
  return g.add_constant(ir::Literal::copy_of(f32(s), data.data()))->output(0);
}

// The value whose buffer `p` views, through chains of views (p itself when it views none).
inline const ir::Value* view_root(const MemoryPlan& plan, const ValuePlan& p) {
  const ir::Value* v = p.value;
  while (plan.of(v).view_of) v = plan.of(v).view_of;
  return v;
}

// Every reshape node of `g`: plan_memory may make their results views.
inline std::unordered_set<const ir::Node*> all_reshapes(const ir::Graph& g) {
  std::unordered_set<const ir::Node*> out;
  for (const auto& n : g.nodes())
    if (n->is_op(OpKind::Reshape)) out.insert(n.get());
  return out;
}

// Brute force: lifetimes cover every use, arena offsets are aligned and inside the arena, and
// two arena values alive at the same step never share bytes, except a value reusing the buffer
// over an operand that dies at that very step.
inline void check_plan(const ir::Graph& g, const MemoryPlan& plan) {
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

}  // namespace kiln::codegen::plan_check
