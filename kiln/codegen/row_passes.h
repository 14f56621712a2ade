// Row passes: how a kernel that runs by rows (codegen/kernel_plan.h, IterationMode::kRows)
// walks each row.
//
// Each materialized value is computed by a loop nest over its row; values whose loops cover
// the same row space (the dimensions after the leading one: an elementwise value's own, a
// reduction's input's when it reduces every dimension but the leading one, a concat's pieces'
// when they share one shape, each piece stored into its window at the index) share one pass,
// so a softmax cross-entropy row is read three times (max; exp and its sum; loss and
// gradient), not once per value. A value joins the earliest pass after every pass holding a
// value it reads, and may share a pass with an elementwise value it reads (read at the index
// being computed, that value is in a register; read elsewhere, it is recomputed there), never
// with a reduction or a concat it reads (complete only when the pass ends). Passes run in
// order; within a pass values are computed in order at each index, so every value is exactly
// the expression it was.
//
// Row buffers: an elementwise value with a vector-math op (exp, tanh, ...) that values in
// two passes or more read is stored by the first pass in a buffer of one row on the stack
// (at most kRowBufferBytes: it stays in L1) and loaded by the later passes, so the
// exponentials of a softmax are evaluated once per element.
//
// Kept alone in a pass of their own (their own loop nests): reductions that keep inner axes,
// arg reductions, outputs written over an input (codegen/overwrites.h: nothing may
// read the input after it is overwritten, which a shared pass could reorder), and outputs
// that are parameters or constants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/codegen/kernel_plan.h"
#include "kiln/ir/graph.h"

namespace kiln::codegen {

inline constexpr int64_t kRowBufferBytes = 16 * 1024;

struct RowPass {
  // Computed in this pass, in order (materialized values and row buffers).
  std::vector<const ir::Value*> values;
  // One loop nest over the row space shared by every value (else: one value, its own nests).
  bool shared = false;
};

struct RowPlan {
  std::vector<RowPass> passes;
  // Elementwise values kept in a row buffer (each in one pass's values).
  std::vector<const ir::Value*> row_buffers;
};

// `plan` must be a rows plan of `body`; `overwrites` are the honoured (output, input) pairs.
RowPlan plan_row_passes(const ir::Graph& body, const KernelPlan& plan,
                        const std::vector<std::pair<size_t, size_t>>& overwrites);

}  // namespace kiln::codegen
