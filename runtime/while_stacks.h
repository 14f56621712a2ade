// WhileStacks: the accumulators of a stacked while node (ir/graph.h, NodeKind::kWhile).
//
// Both executors (the reference executor and the compiled Executable) push the loop
// variables' values at the start of every iteration; finish() returns one array per loop
// variable, [trip count, shape...] with row k = the value at the start of iteration k, and
// then the trip count as an i64[] scalar. Pushing keeps references (arrays are immutable);
// finish() copies them into one contiguous buffer per loop variable. A stack nothing reads
// (`kept` false: the compiled executable knows its graph's users) is neither kept nor copied;
// finish() returns it as a [0, shape...] placeholder.
#pragma once

#include <span>
#include <vector>

#include "kiln/runtime/array.h"

namespace kiln::runtime {

class WhileStacks {
 public:
  explicit WhileStacks(size_t loop_variables)
      : rows_(loop_variables), kept_(loop_variables, true) {}
  explicit WhileStacks(std::vector<bool> kept) : rows_(kept.size()), kept_(std::move(kept)) {}

  // The first loop_variables arrays of `state` (the loop variables; captures may follow).
  void push(std::span<const Array> state);
  // The stacks, then the trip count. `initial` (the loop variables' values before the loop)
  // gives each stack's dtype and row shape when the loop ran zero times.
  std::vector<Array> finish(std::span<const Array> initial) const;

 private:
  std::vector<std::vector<Array>> rows_;  // per loop variable, per iteration
  std::vector<bool> kept_;                // per loop variable: is its stack built
  int64_t trips_ = 0;
};

}  // namespace kiln::runtime
