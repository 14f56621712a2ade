// Random ops inside kiln::function with a concrete seed (an integer: random_uniform(shape, 5),
// dropout(x, rate, 5), a host Generator): the seed becomes a graph value computed from a
// per-function state variable ("<function>/rng_state", int64) that every call advances, so
// repeated calls of one concrete function draw different numbers while staying reproducible
// from the global seed (kiln::set_random_seed). These numbers are not the eager ones; in a
// while_loop body the seed is the same in every iteration (fixed when the body is traced).
//   seed = rng_state + (trace-time seed mod 2^32);   each call: rng_state += 2^32
// A traced seed (SeedGenerator::next(), frontend/seed_generator.h: a read of its captured state
// variable) is not replaced: the op draws what the same seed draws eagerly.
#pragma once

#include "kiln/frontend/function/trace_context.h"

namespace kiln::detail {

// The traced seed replacing `trace_time_seed` (a concrete int64 scalar).
Tensor traced_random_seed(TraceContext& ctx, const Tensor& trace_time_seed);
// At the end of a root trace: advances the state when the trace drew random numbers.
void finish_random_state(TraceContext& root);

}  // namespace kiln::detail
