// A concrete function called while a GradientTape records (TensorFlow's function-call
// gradient): the call runs the traced graph in the function's mode (compiled by default) and
// is recorded on the tapes as one op whose gradient is the function's gradient graph. The
// user's callable is not run again.
//
// How: the traced graph is replayed (GraphReplay) into a new trace under a tape, followed by
// the gradient of sum_i <y_i, u_i> with respect to the floating arguments and the trainable
// variables the graph reads (u_i: upstream gradients, extra parameters). That combined graph is
// split where the upstream gradients enter:
//   forward variant: the nodes that do not depend on u (the function's outputs, its
//     assignments, and as extra outputs the "residuals": the forward values the gradient uses);
//   backward graph:  the rest, from (u, residuals) to the gradients; it reads no variables.
// A forward call under a tape runs the forward variant; the tape's backward pass runs the
// backward graph (itself recorded, through this same path, when a tape records then). The
// pair is built once per concrete function and cached.
//
// Higher order: the tapes record the residuals as outputs of the call too. When a gradient
// flows into them (a tape differentiating the call's gradient), the backward runs the
// vector-Jacobian product of the whole forward variant instead, a pure graph of (arguments,
// the variables' values at the call, upstream gradients) traced once (recomputing the forward:
// the rare case pays, the first-order case does not), itself recorded the same way.
//
// Limit (a kiln::Error, never a silent difference): graphs with while nodes are not replayed
// yet (cond nodes are).
#pragma once

#include <vector>

#include "kiln/frontend/function/concrete_function.h"

namespace kiln::detail {

// Runs `f` on `args` and records the call on the recording tapes that watch an argument or a
// trainable variable `f` reads; a plain call when none does.
std::vector<Tensor> call_recorded(const ConcreteFunction& f, const std::vector<Tensor>& args);

// Counters for tests: calls that ran the forward variant, and of those, how many ran compiled.
struct RecordedCallCounts {
  int forward_calls = 0;
  int compiled = 0;
  int backward_calls = 0;
};
RecordedCallCounts recorded_call_counts();

}  // namespace kiln::detail
