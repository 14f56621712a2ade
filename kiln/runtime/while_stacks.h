// WhileStacks: the accumulators of a stacked while node (ir/graph.h, NodeKind::kWhile).
//
// Both executors (the reference executor and the compiled Executable) push the loop
// variables' values at the start of every iteration; finish() returns one array per loop
// variable, [trip count, shape...] with row k = the value at the start of iteration k, and
// then the trip count as an i64[] scalar. With an unknown trip count, pushing keeps references
// (arrays are immutable) and finish() copies them into one contiguous buffer per loop variable.
// With the trip count declared (kiln::scan's stacks), each stack is allocated at the first push
// and every push copies its row straight in, while the value is still in cache; a loop that
// runs another number of times leaves the extra rows out, and the executor refuses the result
// (it compares the trip count). A stack nothing reads (`kept` false: the compiled executable
// knows its graph's users) is neither kept nor copied; finish() returns it as a
// [0, shape...] placeholder. With a declared trip count the caller may hand in the stacks'
// buffers (the compiled executable reuses them across calls from its pools, so no call pays
// for fresh pages); a buffer of another type than [trips, row shape...] is not used. Rows
// computed where they are stacked: next_row(i) is a view of the row the next push fills, which the
// compiled executable hands its body to compute loop variable i's next value in (Executable::run's
// `into`); push then finds the value already there and copies nothing. A loop variable whose
// value the body passes on to another, stacked one (an RNN gradient's "previous dz") is
// computed two pushes ahead in that one's stack: next_row(j, 1).
#pragma once

#include <span>
#include <vector>

#include "kiln/runtime/array.h"

namespace kiln::runtime {

class WhileStacks {
 public:
  // `kept`: per loop variable, whether its stack is built; `declared_trips` >= 0: the row
  // count the stacks are declared with (-1: unknown).
  // `buffers`: per loop variable, the stack's buffer or an empty Array (allocate one); used
  // only with a declared trip count.
  explicit WhileStacks(std::vector<bool> kept, int64_t declared_trips = -1,
                       std::vector<Array> buffers = {});
  explicit WhileStacks(size_t loop_variables)
      : WhileStacks(std::vector<bool>(loop_variables, true)) {}

  // The first loop_variables arrays of `state` (the loop variables; captures may follow).
  void push(std::span<const Array> state);
  // A view of the row the next push fills for loop variable i (`ahead` > 0: the one that many
  // pushes later), its stack buffer kept alive by the view, or an empty Array: only with a
  // declared trip count, after the first push, for a kept stack with that row left whose rows
  // are a multiple of 64 bytes (kernels take aligned buffers). A push whose value for i
  // already lies in its row moves nothing.
  Array next_row(size_t i, int64_t ahead = 0) const;
  // The stacks, then the trip count. `initial` (the loop variables' values before the loop)
  // gives each stack's dtype and row shape when the loop ran zero times.
  std::vector<Array> finish(std::span<const Array> initial);

 private:
  std::vector<bool> kept_;                // per loop variable: is its stack built
  int64_t declared_ = -1;                 // the declared trip count (-1: unknown)
  std::vector<std::vector<Array>> rows_;  // unknown trip count: per loop variable, per iteration
  std::vector<Array> filled_;             // declared trip count: per loop variable, its stack
  std::vector<Array> buffers_;            // declared trip count: buffers handed in (may be empty)
  std::vector<TensorType> state_types_;   // declared trip count: the loop variables' types
  int64_t trips_ = 0;
};

}  // namespace kiln::runtime
