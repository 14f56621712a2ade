// Fusion planning: the pass "fusion". Groups ops that should run as one kernel and replaces
// each group by a `fusion` node whose closed body holds the group's ops (ir/graph.h), named
// fused_<first three distinct op names>_<counter> (deterministic: counted in the final program
// order, sub-graphs of cond / while first, then the graph itself; unique per run).
//
// Roles of nodes (from the op table):
//   loop        elementwise ops (kElementwise), broadcast_to, broadcast_like, reshape,
//               one_hot, max_pool2d and max_pool2d_grad (kWindow: read at a window of their
//               input; expensive, so never duplicated);
//   reduction   kReduction ops (sum, mean, max, ...), softmax, log_softmax;
//   contraction matmul, conv2d and the conv2d backprops (kContraction);
//   output      concat where its pieces are not contiguous blocks of its result (an inner
//               axis; fusion column Output, rule 8);
//   other       everything else (transpose, gather, avg-pool, random, assignments, cond, ...)
//               never joins a group; constants are copied into the bodies that use them when
//               splat or at most 16 elements (else they are operands) and stay outside.
// Cheap = a loop op without kTranscendental or kWindow. Expensive = everything else that can be
// fused (exp, log, tanh, ..., reductions, softmax family, contractions).
//
// Rules. Nodes are visited consumers first (reverse program order); a node's consumer groups
// are the groups holding its users:
//   1. No consumer group: the node starts a group.
//   2. One consumer group: the node joins it (its other users, e.g. assignments or graph
//      outputs, then read it as an extra output of the fusion: multi-output fusion).
//   3. Several consumer groups, duplicable node (cheap, and reading at most one operand as
//      large as its result; the others broadcast or inlined constants): it is duplicated into
//      each of them (rematerialization); the original stays (and starts its own group) only
//      if some user is not covered by a copy.
//   3a. When the original stays (its value is stored for that user), a copy would read the
//      node's full-size operand instead of the stored value: no less memory, and the operand
//      would be stored too (a product's raw result beside its ReLU, read back only to
//      recompute the ReLU for its gradient). Then only a view, a node with no full-size
//      operand, or a group that reads that operand anyway takes a copy; the others read the
//      stored value.
//   4. Several consumer groups, any other node (expensive, or cheap but reading two full-size
//      operands, like a residual add: copies would read more memory than its value, and a
//      chain of them would be copied whole into every consumer): never duplicated. If each
//      of its users is an original (not a rematerialized copy), the groups and the node merge
//      into one multi-output group; otherwise it joins the first of them (by its first user)
//      that it may join alone, the others reading it as an output; otherwise it starts its
//      own group.
//   5. Contractions: a group holds at most one, as its root: the contraction joins only a
//      group of loop ops (its epilogue: bias add, activation, residual add); nothing that
//      feeds the contraction joins its group, except (5e) the cast to bf16 of a float32
//      value that a bf16 matmul or convolution (op-table trait kRoundsOperands) reads as an
//      operand: it
//      joins as the operand's prologue (ir/operand_prologue.h), is copied by rule 3 into
//      each product reading it, and the runtime rounds the float32 value as it packs it, so
//      the bf16 copy is never stored; what feeds the cast stays out. Reductions never join a
//      contraction group, but a sum along rows that keeps the last axis too (a split column
//      sum's per-row parts, passes/split_reductions.h) whose rows are the product's (the same
//      leading dimension): by rows it finishes each row's part in the epilogue, right after
//      the product's rows.
//   5b. Reductions along rows (the leading axis kept: softmax, layer-norm statistics) and
//      reductions across rows (the leading axis reduced: a batch mean, a bias gradient)
//      never share a group: the first kind runs row-parallel, the second reads every row,
//      and together the kernel would have to run serially (codegen/kernel_plan.h). The
//      small across-rows result (e.g. the per-example losses) goes through memory.
//   5f. A view (reshape) that its one consumer group refuses stays a plain op; one that
//      several refuse starts a group of its own (rule 3, the others reading copies) that no
//      producer joins: its producer keeps its own shape, the view reading it in place, rather
//      than storing a reshaped copy with values of two leading dimensions, which would make
//      its kernel serial (a layer norm whose rows feed three weight gradients).
//   6. No join, merge or copy may create a cycle between groups and the nodes left outside,
//      counting the order constraints of assignments (program order of stores, and every
//      read of a variable value before the store that supersedes it). Checked on the unit
//      graph of passes/fusion_units.h, whose topological order bounds each search.
//   7. A group of one node is dissolved (a lone op stays a plain node); constants are never
//      group members.
//   8. A concat along an axis whose pieces are strided windows of its result, of a leading
//      dimension above 1 (an LSTM step's four [32, 256] gate gradients joined into
//      [32, 1024]) starts a group and never joins or is copied into one: the ops computing its
//      pieces join it by the rules above (a product whose epilogue computes them too), and the
//      kernel stores each piece into its window of the result as it computes it
//      (codegen/kernel_plan.h), by rows, instead of storing the pieces and copying them. A
//      concat whose pieces are contiguous blocks (along the leading axis) stays a plain op: the
//      memory plan computes its pieces in place in its result (codegen/memory_plan.h, concat
//      regions); so does one whose result's leading dimension is 1 (its kernel would run
//      serially; the runtime's copy is parallel) or unknown.
// So an elementwise chain becomes one "loop" fusion (with the inner-axis concat of its results); a
// reduction with the elementwise ops that feed it and the elementwise consumers of its result one
// "reduction" fusion (softmax + cross-entropy, layer normalization: at most two); matmul/conv +
// epilogue one "contraction" fusion; after lower-assignments (passes/lower_assignments.h), one
// variable's optimizer update (and its slots', e.g. Adam's m and v) one fusion whose outputs feed
// the assign nodes. Kind: "contraction" if the group has a contraction, else "reduction" if it has
// a reduction, else "loop".
//
// Never: moves assignments into bodies (they stay outside, as stores, in program order);
// duplicates an expensive node; fuses inside fusion bodies; changes results (bodies run the
// same ops with the same operands in the same order, so the reference executor gives
// bitwise-equal outputs). Nodes are re-ordered topologically (keeping program order where
// possible) so each fusion sits after its operands and before its users.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_fusion();

}  // namespace kiln::passes
