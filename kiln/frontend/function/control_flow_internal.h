// Internal pieces shared by kiln::cond and kiln::while_loop (control_flow.cc, while_loop.cc,
// while_gradient.cc): tracing a callable into a closed sub-graph of a cond/while node.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/frontend/function/control_flow.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/tape_recorder.h"
#include "kiln/frontend/variable.h"
#include "kiln/ir/graph.h"

namespace kiln::detail {

// The value of an eager bool scalar predicate (kiln::Error naming `what` otherwise).
bool predicate_value(const Tensor& pred, const char* what);

// kiln::Error unless `next` (what body_fn returned) has the loop variables' count and types.
void check_loop_types(const std::vector<Tensor>& loop_vars, const std::vector<Tensor>& next);

// One traced branch or loop part: its sub-graph, the outer tensors feeding its parameters
// (after the leading loop-variable and carried-variable parameters), its outputs and its
// variable writes and reads.
struct SubTrace {
  std::unique_ptr<ir::Graph> graph;
  std::vector<Tensor> captures;
  std::vector<ir::Value*> outputs;
  std::vector<Tensor> results;
  std::vector<TraceContext::PendingWrite> writes;
  std::vector<TraceContext::InheritedRead> reads;
};

// How to trace a sub-graph.
struct SubTraceOptions {
  std::vector<TensorType> leading;  // loop-variable parameters (passed to the callable)
  // Variables whose current value is a parameter (after `leading`): the loop variables a
  // while adds for variables its body assigns. With output_carried, their values after the
  // callable are appended to the outputs (not to `results`).
  std::vector<Variable> carried;
  bool output_carried = false;
  std::vector<Tensor> pre_captures;  // lifted first, so sibling parameter lists line up
  bool discard_writes = false;
  bool repeated = false;  // a while's body or cond (runs once per iteration)
};

// Traces fn(leading parameters) -> tensors in a child context of `parent`.
template <typename Fn>
SubTrace trace_sub(TraceContext& parent, const std::string& name, const SubTraceOptions& o,
                   Fn&& fn) {
  SubTrace st;
  st.graph = std::make_unique<ir::Graph>(name);
  TraceContext child(*st.graph, parent.owner(), &parent);
  child.set_discard_writes(o.discard_writes);
  child.set_repeated(o.repeated);
  std::vector<Tensor> params;
  for (const TensorType& t : o.leading) params.push_back(child.wrap(st.graph->add_parameter(t)));
  for (const Variable& v : o.carried)
    child.seed_variable(v, child.wrap(st.graph->add_parameter({v.dtype(), v.shape()})));
  for (const Tensor& c : o.pre_captures) child.value_of(c);
  st.results = fn(params);
  for (size_t i = 0; i < st.results.size(); ++i) {
    if (!st.results[i].defined())
      throw Error(fmt::format("{}: output {} is an undefined tensor", name, i));
    st.outputs.push_back(child.value_of(st.results[i]));
  }
  if (o.output_carried)
    for (const Variable& v : o.carried)
      st.outputs.push_back(child.value_of(child.read_variable(v)));
  st.captures = child.captured_outer();
  st.writes = child.pending_writes();
  st.reads = child.inherited_reads();
  return st;
}

// Appends parameters to `st` for the captures a sibling added after `st` was traced.
inline void align_captures(SubTrace& st, const std::vector<Tensor>& all) {
  for (size_t i = st.captures.size(); i < all.size(); ++i) {
    st.graph->add_parameter(all[i].type());
    st.captures.push_back(all[i]);
  }
}

// What a traced while loop is for: a loop of the user's program (differentiable: stacked
// when a tape may ask for its gradient) or the gradient loop of one (no gradient itself).
enum class WhileRole { kForward, kGradient };

// A traced while whose stacks the caller uses (kiln::scan, scan.cc): the node is stacked
// even without a tape, its stacks are typed [trips, ...] (the caller's loop runs exactly
// `trips` times by construction; the executors check it), the stacks of the loop variables
// are returned in `stacks`, and tapes record them as outputs of the loop (their gradients
// flow back through the gradient loop).
struct StacksRequest {
  int64_t trips = 0;
  std::vector<Tensor> stacks;  // filled: one per loop variable, [trips, shape...]
};

// kiln::while_loop inside a trace (while_loop.cc). With `sequences` (kiln::scan's xs; needs
// want_stacks), loop variable 0 is the step counter and body_fn receives the loop variables
// followed by row `counter` of each sequence; the gradient loop returns those rows' gradients
// as stacks instead of summing full-size gradients of the sequences.
std::vector<Tensor> traced_while(TraceContext& ctx, const LoopCondFn& cond_fn,
                                 const LoopBodyFn& body_fn, const std::vector<Tensor>& loop_vars,
                                 WhileRole role, StacksRequest* want_stacks = nullptr,
                                 const std::vector<Tensor>& sequences = {});

// Everything the gradient of a stacked while needs (while_gradient.cc).
struct StackedWhile {
  LoopBodyFn body_fn;
  size_t loop_vars = 0;           // m: the user's loop variables
  std::vector<Variable> carried;  // w: variables the body assigns (loop variables m..)
  std::vector<Tensor> inputs;     // the m + w initial values, then the captures
  std::vector<Tensor> outputs;    // the m + w final values
  std::vector<Tensor> stacks;     // per loop variable: its value at each iteration's start
  Tensor trips;                   // the trip count (i64[])
  std::vector<TraceContext::InheritedRead> reads;  // variables the body only reads
  // kiln::scan's xs: body_fn takes the loop variables, then row (loop variable 0) of each.
  std::vector<Tensor> sequences;
  std::vector<bool> read_only_by_row;  // per sequence: the body uses it through its row alone
  int64_t trips_known = -1;            // the trip count fixed by kiln::scan (with sequences)
  std::string random_op;               // a random op of the body (non-empty: no gradient)
};

// The backward function of a stacked while: a gradient while loop that runs the trip count
// down, re-runs body_fn on each iteration's stacked state under a tape and accumulates the
// vector-Jacobian products.
CustomGradient while_gradient(std::shared_ptr<const StackedWhile> fwd);

}  // namespace kiln::detail
