// Scheduling collectives early: the pass "schedule-collectives".
//
// Moves every top-level all_reduce node as early as its input and the all_reduce nodes before
// it allow: right after the node that defines its input (the start of the graph for a parameter
// or a variable's entry value), but never before an all_reduce that came before it. In a
// training step the gradients of the last layers exist early in the backward pass; started
// there, their sums run on the communication thread while the rest of the backward pass
// computes (runtime/executable.h) instead of all waiting for its end (the data-parallel step
// creates its all_reduce nodes from the last variable to the first, the order in which the
// backward pass produces the gradients).
//
// The all_reduce nodes keep their relative order: it is the order every rank traced them in,
// so every rank starts the same sums in the same order even where the rest of its schedule
// differs (fusion choices that depend on the rank's share of the batch).
//
// Never moves any other node relative to the others, nor an all_reduce later than it was.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_schedule_collectives();

}  // namespace kiln::passes
