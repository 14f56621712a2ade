// Scheduling collectives early: the pass "schedule-collectives".
//
// Moves every top-level all_reduce node to right after the node that defines its input (or to
// the start of the graph when the input is a parameter or a variable's entry value), keeping
// the all_reduce nodes' relative order where their inputs come from one node. In a training
// step the gradients of the last layers exist early in the backward pass; started there, their
// sums run on the communication thread while the rest of the backward pass computes
// (runtime/executable.h) instead of all waiting for its end. Deterministic: every rank
// compiles the same graph to the same order, so the ranks start the same sums in the same
// order.
//
// Never moves any other node, nor an all_reduce later than it was; never reorders two
// all_reduce nodes whose inputs come in the opposite order (they follow their inputs).
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_schedule_collectives();

}  // namespace kiln::passes
