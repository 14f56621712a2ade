// Fusion's roles of nodes and the kind rules of its groups (passes/fusion.h, rules 3, 5, 5b and
// 8): what each op can be in a group, which reductions a group holds and how large its values
// are. Used by the planner in fusion.cc.
#pragma once

#include <cstdint>

#include "kiln/ir/graph.h"

namespace kiln::passes::fusion_detail {

using ir::Node;
using ir::Value;

enum class Role { kOther, kLoop, kReduction, kContraction, kOutput };

// The op's `fusion` column in ir/ops.def. A concat (rule 8) gathers its pieces' group only
// where they are strided windows of a result whose leading dimension exceeds 1, so that the
// kernel storing them runs by rows. One whose pieces are contiguous blocks of its result
// (every dimension before its axis is 1) stays a plain op: the memory plan computes such
// pieces in place in the result (codegen/memory_plan.h, concat regions), so it costs nothing.
// One of unknown shape, or of leading dimension 1 ([1, T, F] along F: its kernel would run
// serially), stays plain too: the runtime's copy is parallel.
Role role_of(const Node& n);

// A reshape: a view of its operand's buffer outside a group. One that its consumer's group
// refuses (an operand of a contraction: a Dense weight gradient's stacked rows) stays a plain
// op instead of starting a group of its own, which its producer would then join, storing a
// copy of the value and leaving the producer's group to a serial kernel (two leading
// dimensions); so does one that no group consumes (a result, an LSTM's input gradient read
// back as steps), whose producer then writes its bytes directly instead of a copying epilogue.
bool is_view(const Node& n);

// Cheap (passes/fusion.h): a loop op that is neither transcendental nor a window op.
bool is_cheap(const Node& n);

// Constants copied into the bodies that use them (instead of becoming operands).
bool inline_constant(const Node* p);

// The elements of v, or -1 if its shape is not fully known.
int64_t known_elements(const Value* v);

// A cheap node worth duplicating (rule 3): it reads at most one operand as large as its
// result, the others being broadcast (smaller) or inlined constants, so each copy reads no
// more memory than reading its materialized value would (XLA's "effectively at most unary").
// A copy of an add of two full-size tensors reads twice as much, and a chain of them (a
// residual stream) copied into every consumer grows with the chain.
bool duplicable(const Node& n);

// The one operand of a duplicable node as large as its result (the value each copy reads);
// null when every operand is smaller (a broadcast) or an inlined constant.
const ir::Value* full_operand(const Node& n);

// Which rows a reduction combines (rule 5b): along each row (axes exclude the leading one:
// softmax, layer-norm statistics) or across rows (the leading axis is reduced: a batch
// mean, a bias gradient).
enum class ReductionSpan { kNone, kAlongRows, kAcrossRows };

// The span of n's reduction (kNone: n is not a reduction, or reduces a scalar).
ReductionSpan span_of(const Node& n);

// A sum along rows that keeps the last axis too (axes strictly between the leading and the last
// one: a split column sum's per-row parts, passes/split_reductions.h): by rows it accumulates
// each row's part through memory, so it may finish a contraction's rows in its epilogue.
bool is_row_part_sum(const Node& n);

// The elements of n's largest output (unknown sizes count as none).
int64_t largest_output(const Node& n);

// What a group holds, for the kind rules (rule 5).
struct GroupKind {
  Node* contraction = nullptr;
  bool has_reduction = false;  // other than part sums, which may join a contraction's group
  bool has_part_sum = false;
  // The leading dimension the part sums share (-1: none yet, -2: they differ or are unknown).
  int64_t part_rows = -1;
  bool along_rows = false, across_rows = false;  // reductions of each span (rule 5b)
  int64_t largest = 0;  // elements of its members' largest output (rule 5d)

  void add(Node& n);
  void add(const GroupKind& o);
  void add_part_rows(int64_t rows);
};

}  // namespace kiln::passes::fusion_detail
