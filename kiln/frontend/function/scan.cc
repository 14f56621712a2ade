// kiln::scan: a fixed number of steps with every step's state returned (control_flow.h).
// Eagerly a C++ loop whose states are stacked at the end; traced, a while loop over a step
// counter whose stacks (the state at the start of each iteration, typed [steps, ...] since
// the counter fixes the trip count) give the per-step states: rows 1.. of each stack and the
// final state. With sequences (xs), the loop also reads row `counter` of each.
#include <fmt/format.h>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/control_flow.h"
#include "kiln/frontend/function/control_flow_internal.h"
#include "kiln/frontend/ops.h"

namespace kiln {
namespace {

Tensor step_index(int64_t k) { return scalar(double(k), DType::i64); }

// [steps, shape...] from the states at the start of every iteration (`starts`, row 0 = the
// initial state) and the final state: the states after every step.
Tensor after_each_step(const Tensor& starts, const Tensor& final, int64_t steps) {
  if (steps == 0) return starts;  // no step: [0, shape...]
  Tensor last = expand_dims(final, 0);
  if (steps == 1) return last;
  Tensor later = gather(starts, arange(1, double(steps), 1, DType::i64), 0);
  return concat({later, last}, 0);
}

}  // namespace

ScanResult scan(int64_t steps, const ScanBodyFn& body_fn, const std::vector<Tensor>& init) {
  return scan(steps,
              [body_fn](const Tensor& k, const std::vector<Tensor>& state,
                        const std::vector<Tensor>&) { return body_fn(k, state); },
              init, {});
}

ScanResult scan(int64_t steps, const ScanRowsBodyFn& body_fn, const std::vector<Tensor>& init,
                const std::vector<Tensor>& xs) {
  if (steps < 0) throw Error(fmt::format("scan: steps must be >= 0, got {}", steps));
  for (const Tensor& v : init)
    if (!v.defined()) throw Error("scan: a state tensor is undefined");
  for (size_t j = 0; j < xs.size(); ++j)
    if (!xs[j].defined() || xs[j].rank() == 0 || xs[j].shape()[0] != steps)
      throw Error(fmt::format(
          "scan: sequence {} must be [steps, ...] = [{}, ...] (row k feeds step k), got {}", j,
          steps, xs[j].defined() ? xs[j].type().to_string() : std::string("undefined")));
  ScanResult r;
  if (detail::TraceContext* ctx = detail::TraceContext::current()) {
    std::vector<Tensor> vars{step_index(0)};
    vars.insert(vars.end(), init.begin(), init.end());
    const size_t n = init.size();
    auto cond = [steps](const std::vector<Tensor>& v) { return less(v[0], step_index(steps)); };
    // v: the counter, the state, then the rows of xs (traced_while gathers them).
    auto body = [body_fn, n](const std::vector<Tensor>& v) {
      std::vector<Tensor> state(v.begin() + 1, v.begin() + std::ptrdiff_t(1 + n));
      std::vector<Tensor> rows(v.begin() + std::ptrdiff_t(1 + n), v.end());
      std::vector<Tensor> next = body_fn(v[0], state, rows);
      detail::check_loop_types(state, next);
      std::vector<Tensor> out{v[0] + step_index(1)};
      out.insert(out.end(), next.begin(), next.end());
      return out;
    };
    detail::StacksRequest stacks{steps, {}};
    std::vector<Tensor> out =
        detail::traced_while(*ctx, cond, body, vars, detail::WhileRole::kForward, &stacks, xs);
    r.final_state.assign(out.begin() + 1, out.end());
    for (size_t i = 0; i < init.size(); ++i)
      r.stacked.push_back(after_each_step(stacks.stacks[i + 1], r.final_state[i], steps));
    return r;
  }
  std::vector<Tensor> state = init;
  std::vector<std::vector<Tensor>> rows(init.size());
  for (int64_t k = 0; k < steps; ++k) {
    std::vector<Tensor> x_rows;
    for (const Tensor& x : xs) x_rows.push_back(gather(x, step_index(k), 0));
    std::vector<Tensor> next = body_fn(step_index(k), state, x_rows);
    detail::check_loop_types(state, next);
    state = std::move(next);
    for (size_t i = 0; i < state.size(); ++i) rows[i].push_back(state[i]);
  }
  r.final_state = state;
  for (size_t i = 0; i < init.size(); ++i) {
    if (steps == 0) {
      Shape s{0};
      for (int64_t d : init[i].shape()) s.push_back(d);
      r.stacked.push_back(zeros(s, init[i].dtype()));
    } else {
      r.stacked.push_back(stack(rows[i], 0));
    }
  }
  return r;
}

}  // namespace kiln
