// The while step of Executable::run: runs the cond and body executables until the cond says
// stop, stacking the loop variables at the start of every iteration where the while is
// stacked (runtime/while_stacks.h).
//
// - Stacks with a declared trip count come from the stack slots' pools (reused across calls).
// - The captures (operands after the loop variables) and the loop variables the body passes
//   through keep their buffers and values until the loop ends: products inside it pack such a B
//   once (runtime/loop_invariants.h).
// - The body computes each stacked loop variable's next value in the stack row the next push
//   fills (WhileStacks::next_row, Executable::run's `into`), so no iteration copies its state
//   into the stacks; a loop variable the body passes on to another, stacked one (output j is
//   parameter i) is computed in the row of j's stack it reaches a push later. Where a value is
//   computed elsewhere (a view, a parameter), the push copies it: correctness never depends on
//   the placement.
// - A loop whose declared stacks got another number of rows is an error naming the step.
#include <fmt/format.h>

#include "kiln/ir/error.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/loop_invariants.h"
#include "kiln/runtime/while_stacks.h"

namespace kiln::runtime {

void Executable::run_while(const ExecutableStep& s, std::vector<Array>& slots) const {
  const size_t n_loop = s.stacked ? (s.outputs.size() - 1) / 2 : s.outputs.size();
  std::vector<Array> state;
  for (int i : s.inputs) state.push_back(slots[size_t(i)]);
  std::vector<Array> no_vars;
  std::vector<bool> kept = s.stacks_kept.size() == n_loop && s.stacked
                               ? s.stacks_kept
                               : std::vector<bool>(s.stacked ? n_loop : 0, true);
  // Declared stacks: from the stack slots' pools.
  std::vector<Array> stack_buffers;
  if (s.stacked && s.stack_trips >= 0)
    for (size_t i = 0; i < n_loop; ++i) {
      const int slot = s.outputs[n_loop + i];
      stack_buffers.push_back(kept[i] && slot_storage_[size_t(slot)].type.shape.is_fully_known()
                                  ? acquire_pooled(size_t(slot), /*spare=*/false)
                                  : Array{});
    }
  WhileStacks stacks(std::move(kept), s.stack_trips, std::move(stack_buffers));
  const std::vector<Array> initial(state.begin(), state.begin() + long(n_loop));
  // Captures and passed-through loop variables: unchanged while the loop runs.
  std::vector<std::pair<const void*, size_t>> invariant;
  for (size_t i = 0; i < state.size(); ++i)
    if ((i >= n_loop || s.bodies[1]->passes_through(i)) && state[i].raw() != nullptr)
      invariant.emplace_back(state[i].raw(), state[i].nbytes());
  const LoopInvariantScope loop_invariants(std::move(invariant));
  for (;;) {
    std::vector<Array> c = s.bodies[0]->run(state, no_vars);
    if (!c[0].data<bool>()[0]) break;
    // Where the body computes its results: the stack rows the pushes will fill.
    std::vector<Array> rows;
    if (s.stacked) {
      stacks.push(state);
      for (size_t i = 0; i < n_loop; ++i) rows.push_back(stacks.next_row(i));
      for (size_t j = 0; j < n_loop; ++j) {
        const int i = s.bodies[1]->output_parameter(j);
        if (i >= 0 && size_t(i) < n_loop && size_t(i) != j && !rows[size_t(i)].storage)
          rows[size_t(i)] = stacks.next_row(j, 1);
      }
    }
    std::vector<Array> next = s.bodies[1]->run(state, no_vars, {}, rows);
    // A variable passed through keeps its array (the body returns its argument as it is).
    for (size_t i = 0; i < n_loop; ++i)
      if (!s.bodies[1]->passes_through(i)) state[i] = next[i];
  }
  for (size_t i = 0; i < n_loop; ++i) slots[size_t(s.outputs[i])] = detach(state[i]);
  if (s.stacked) {
    std::vector<Array> stacked = stacks.finish(initial);
    const int64_t trips = *stacked.back().data<int64_t>();
    if (s.stack_trips >= 0 && trips != s.stack_trips)
      throw Error(fmt::format(
          "executable {}: while step {} ran {} iteration(s) but its stacks are declared "
          "with {} rows; a loop whose stacks have a known length must run exactly that "
          "many times",
          name_, s.name, trips, s.stack_trips));
    for (size_t i = 0; i < stacked.size(); ++i)
      slots[size_t(s.outputs[n_loop + i])] = std::move(stacked[i]);
  }
}

}  // namespace kiln::runtime
