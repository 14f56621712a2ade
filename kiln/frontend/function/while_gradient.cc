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
namespace {

// A sequence's gradient, [trips, ...] in forward order, from the gradient loop's stack of its
// row gradients (`stack`: row g = the value before gradient iteration g) and their final value
// (`last`): gradient iteration g handles forward iteration trips-1-g, so forward row 0's
// gradient is `last` and row i's is stack row trips-i.
Tensor rows_in_forward_order(const Tensor& stack, const Tensor& last, int64_t trips) {
  if (trips <= 1) return trips == 1 ? expand_dims(last, 0) : stack;
  Tensor later = gather(stack, arange(double(trips - 1), 0, -1, DType::i64), 0);
  return concat({expand_dims(last, 0), later}, 0);
}

}  // namespace

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
    // kiln::scan's sequences: row (counter) of each is a source of its own; the gradient
    // loop's stacks of those rows' gradients are the sequences' gradients, so a sequence read
    // only through its row is not summed at full size per iteration.
    const size_t n_seq = fwd->sequences.size();
    std::vector<size_t> seq_cap(n_seq, n_caps);  // the capture index of each sequence
    std::vector<size_t> fseq;                    // the sequences that get gradients
    for (size_t j = 0; j < n_seq; ++j) {
      for (size_t k = 0; k < n_caps; ++k)
        if (fwd->inputs[n_state + k].id() == fwd->sequences[j].id()) seq_cap[j] = k;
      if (seq_cap[j] == n_caps) continue;  // a constant of the body (while_loop.cc)
      if (needs[n_state + seq_cap[j]] && is_floating(fwd->sequences[j].dtype())) fseq.push_back(j);
    }
    auto row_only = [&](size_t k) {
      for (size_t j = 0; j < n_seq; ++j)
        if (seq_cap[j] == k && fwd->read_only_by_row[j]) return true;
      return false;
    };
    for (size_t k = 0; k < n_caps; ++k)
      if (needs[n_state + k] && is_floating(fwd->inputs[n_state + k].dtype()) && !row_only(k))
        fcaps.push_back(k);

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
    for (size_t j : fseq) {  // zeros shaped like one row
      Shape row;
      for (int d = 1; d < fwd->sequences[j].rank(); ++d)
        row.push_back(fwd->sequences[j].shape()[d]);
      init.push_back(row.is_fully_known()
                         ? zeros(row, fwd->sequences[j].dtype())
                         : zeros_like(gather(fwd->sequences[j], scalar(0, DType::i64), 0)));
    }

    // Outer tensors the re-traced body may use: what the forward body used.
    std::unordered_set<uint64_t> allowed;
    for (size_t k = 0; k < n_caps; ++k) allowed.insert(fwd->inputs[n_state + k].id());
    for (const Tensor& s : fwd->stacks) allowed.insert(s.id());
    for (const auto& r : fwd->reads) allowed.insert(r.value.id());
    for (const Tensor& g : stack_grads)
      if (g.defined()) allowed.insert(g.id());

    auto cond = [](const std::vector<Tensor>& v) { return greater(v[0], scalar(0, DType::i64)); };
    auto body = [fwd, &fstate, &fcaps, &fseq, &allowed, &stack_grads, m,
                 n_state](const std::vector<Tensor>& v) {
      TraceContext& here = *TraceContext::current();
      Tensor i = v[0] - scalar(1, DType::i64);
      std::vector<Tensor> state;
      for (const Tensor& s : fwd->stacks) state.push_back(gather(s, i, 0));
      for (size_t k = 0; k < fwd->carried.size(); ++k)
        here.seed_variable(fwd->carried[k], state[m + k]);
      for (const auto& r : fwd->reads) here.seed_variable(r.var, r.value);
      std::vector<Tensor> rows;  // the sequences' rows this iteration read
      for (const Tensor& xs : fwd->sequences) rows.push_back(gather(xs, state[0], 0));
      std::vector<Tensor> sources;
      for (size_t j : fstate) sources.push_back(state[j]);
      for (size_t k : fcaps) sources.push_back(fwd->inputs[n_state + k]);
      for (size_t j : fseq) sources.push_back(rows[j]);
      std::vector<Tensor> grads;
      {
        GradientTape tape;
        tape.watch(sources);
        std::vector<Tensor> args(state.begin(), state.begin() + long(m));
        args.insert(args.end(), rows.begin(), rows.end());
        std::vector<Tensor> outs = fwd->body_fn(args);
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
      for (size_t b = 0; b < fseq.size(); ++b)
        next.push_back(grads[fstate.size() + fcaps.size() + b]);
      return next;
    };
    StacksRequest row_grads{fwd->trips_known, {}};
    std::vector<Tensor> r = traced_while(*ctx, cond, body, init, WhileRole::kGradient,
                                         fseq.empty() ? nullptr : &row_grads);

    std::vector<Tensor> out(fwd->inputs.size());
    for (size_t a = 0; a < fstate.size(); ++a)
      if (needs[fstate[a]]) out[fstate[a]] = r[1 + a];
    for (size_t b = 0; b < fcaps.size(); ++b) out[n_state + fcaps[b]] = r[1 + fstate.size() + b];
    for (size_t b = 0; b < fseq.size(); ++b) {
      const size_t at = 1 + fstate.size() + fcaps.size() + b;
      Tensor d = rows_in_forward_order(row_grads.stacks[at], r[at], fwd->trips_known);
      Tensor& o = out[n_state + seq_cap[fseq[b]]];
      o = o.defined() ? o + d : d;
    }
    return out;
  };
}

}  // namespace kiln::detail
