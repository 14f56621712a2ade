// Random ops inside kiln::function: a random op's seed becomes a graph value computed from a
// per-function state variable ("<function>/rng_state", int64) that every call advances, so
// repeated calls of one concrete function draw different numbers (dropout masks differ per
// step) while staying reproducible from the global seed (kiln::set_random_seed).
//   seed = rng_state + (trace-time seed mod 2^32);   each call: rng_state += 2^32
#pragma once

#include "frontend/function/trace_context.h"

namespace kiln::detail {

// The traced seed replacing `trace_time_seed` (a concrete int64 scalar).
Tensor traced_random_seed(TraceContext& ctx, const Tensor& trace_time_seed);
// At the end of a root trace: advances the state when the trace drew random numbers.
void finish_random_state(TraceContext& root);

}  // namespace kiln::detail
