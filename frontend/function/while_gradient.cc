// The gradient of a stacked while (see while_loop.cc), TensorFlow while_v2-style: a gradient
// while loop runs the forward trip count down to zero. Iteration i reads row i of every
// loop variable's stack (its value when forward iteration i started), re-runs body_fn on it
// under a GradientTape and pulls the incoming gradients back through it:
//   loop variables of the gradient loop: i, d/d(state) (floating state), sum over iterations of
//   d/d(capture) (floating captures that need a gradient)
// When the stacks themselves are used (kiln::scan), row i of a stack's incoming gradient adds
// to d/d(state) of iteration i: one row per iteration, nothing accumulated at full size.
// The stacks are the accumulators; the body's other intermediates are recomputed from them
// (kiln's gradient rules are written in frontend ops and traced, and sub-graphs are closed,
// so re-tracing body_fn in the gradient loop is how the backward pass gets them, as the
// gradient of a traced cond re-traces its branches).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/control_flow_internal.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/ops.h"

namespace kiln::detail {

CustomGradient while_gradient(std::shared_ptr<const StackedWhile> fwd) {
  return [fwd](const std::vector<Tensor>& out_grads,
               const std::vector<bool>& needs) -> std::vector<Tensor> {
    if (!fwd->random_op.empty())
      throw Error(fmt::format(
          "GradientTape::gradient: the body of a kiln::while_loop traced inside kiln::function "
          "draws random numbers ({}); its gradient re-runs the body for every iteration and "
          "cannot draw the same numbers again; draw them before the loop (e.g. one tensor for "
          "all iterations, sliced with the loop counter) and capture that",
          fwd->random_op));
    TraceContext* ctx = TraceContext::current();
    KILN_ASSERT(ctx != nullptr, "while_loop gradient outside a trace");
    const size_t m = fwd->loop_vars;
    const size_t n_state = fwd->outputs.size();
    const size_t n_caps = fwd->inputs.size() - n_state;
    std::vector<size_t> fstate, fcaps;  // which state / captures get gradients
    for (size_t j = 0; j < n_state; ++j)
      if (is_floating(fwd->outputs[j].dtype())) fstate.push_back(j);
    for (size_t k = 0; k < n_caps; ++k)
      if (needs[n_state + k] && is_floating(fwd->inputs[n_state + k].dtype())) fcaps.push_back(k);

    // Gradients of the stacks (kiln::scan uses them): row i is the state when forward
    // iteration i started, so it adds to the gradient of that state.
    std::vector<Tensor> stack_grads(n_state);
    for (size_t j = 0; j < n_state; ++j)
      if (n_state + j < out_grads.size()) stack_grads[j] = out_grads[n_state + j];

    std::vector<Tensor> init{fwd->trips};
    for (size_t j : fstate)
      init.push_back(j < out_grads.size() && out_grads[j].defined() ? out_grads[j]
                                                                    : zeros_like(fwd->outputs[j]));
    for (size_t k : fcaps) init.push_back(zeros_like(fwd->inputs[n_state + k]));

    // Outer tensors the re-traced body may use: what the forward body used.
    std::unordered_set<uint64_t> allowed;
    for (size_t k = 0; k < n_caps; ++k) allowed.insert(fwd->inputs[n_state + k].id());
    for (const Tensor& s : fwd->stacks) allowed.insert(s.id());
    for (const auto& r : fwd->reads) allowed.insert(r.value.id());
    for (const Tensor& g : stack_grads)
      if (g.defined()) allowed.insert(g.id());

    auto cond = [](const std::vector<Tensor>& v) { return greater(v[0], scalar(0, DType::i64)); };
    auto body = [fwd, &fstate, &fcaps, &allowed, &stack_grads, m,
                 n_state](const std::vector<Tensor>& v) {
      TraceContext& here = *TraceContext::current();
      Tensor i = v[0] - scalar(1, DType::i64);
      std::vector<Tensor> state;
      for (const Tensor& s : fwd->stacks) state.push_back(gather(s, i, 0));
      for (size_t k = 0; k < fwd->carried.size(); ++k)
        here.seed_variable(fwd->carried[k], state[m + k]);
      for (const auto& r : fwd->reads) here.seed_variable(r.var, r.value);
      std::vector<Tensor> sources;
      for (size_t j : fstate) sources.push_back(state[j]);
      for (size_t k : fcaps) sources.push_back(fwd->inputs[n_state + k]);
      std::vector<Tensor> grads;
      {
        GradientTape tape;
        tape.watch(sources);
        std::vector<Tensor> outs =
            fwd->body_fn(std::vector<Tensor>(state.begin(), state.begin() + long(m)));
        check_loop_types(std::vector<Tensor>(state.begin(), state.begin() + long(m)), outs);
        for (const Variable& var : fwd->carried) outs.push_back(here.read_variable(var));
        Tensor target;
        for (size_t a = 0; a < fstate.size(); ++a) {
          Tensor term = sum(outs[fstate[a]] * v[1 + a]);
          target = target.defined() ? target + term : term;
        }
        if (target.defined()) {
          grads = tape.gradient(target, sources, UnconnectedGradients::kZero);
        } else {
          for (const Tensor& s : sources) grads.push_back(zeros_like(s));
        }
      }
      for (const Tensor& c : here.captured_outer())
        if (!allowed.count(c.id()))
          throw Error(fmt::format(
              "while_loop gradient: re-running body_fn to differentiate it used a tensor ({}) "
              "the forward loop did not use; body_fn must compute the same thing when re-run "
              "(capture tensors by value, and do not reassign captured tensors between the "
              "loop and GradientTape::gradient)",
              c.type().to_string()));
      std::vector<Tensor> next{i};
      for (size_t a = 0; a < fstate.size(); ++a) {
        const Tensor& d_stack = stack_grads[fstate[a]];
        next.push_back(d_stack.defined() ? grads[a] + gather(d_stack, i, 0) : grads[a]);
      }
      for (size_t b = 0; b < fcaps.size(); ++b)
        next.push_back(v[1 + fstate.size() + b] + grads[fstate.size() + b]);
      return next;
    };
    std::vector<Tensor> r = traced_while(*ctx, cond, body, init, WhileRole::kGradient);

    std::vector<Tensor> out(fwd->inputs.size());
    for (size_t a = 0; a < fstate.size(); ++a)
      if (needs[fstate[a]]) out[fstate[a]] = r[1 + a];
    for (size_t b = 0; b < fcaps.size(); ++b) out[n_state + fcaps[b]] = r[1 + fstate.size() + b];
    return out;
  };
}

}  // namespace kiln::detail
