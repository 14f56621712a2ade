// Data-dependent control flow that works in both modes:
//   kiln::cond(pred, true_fn, false_fn)        pred: a bool scalar tensor
//   kiln::while_loop(cond_fn, body_fn, vars)   cond_fn(vars) -> bool scalar, body_fn(vars) -> vars
//   kiln::scan(steps, body_fn, init)           body_fn(step, state) -> state; every step's state
//   kiln::scan(steps, body_fn, init, xs)       body_fn(step, state, rows of xs) -> state
// Eagerly they run as ordinary C++ control flow on the predicate's value (and gradient tapes
// see the ops that ran). Inside kiln::function they record `cond` / `while` nodes whose
// branches and bodies are sub-graphs traced from the callables; tensors the callables capture
// become operands of the node. Both branches of a cond must return the same number of tensors
// with the same types; loop variables keep their types.
// Gradients (equal to the eager, unrolled ones): a traced cond differentiates each branch in a
// gradient cond; a traced while_loop watched by a tape keeps every iteration's loop state on
// stacks (a stacked while node) and a gradient while loop re-runs body_fn on them in reverse
// (docs/ir.md, "Gradients through control flow"). Both re-run the callables when the gradient
// is taken, so they must compute the same thing again (capture tensors by value). Captured
// tensors and variables read in the body get gradients summed over iterations.
// Variables assigned in a cond branch are assigned after the cond node (the gradient's re-run
// of a branch reads them at their values before the cond, so a SeedGenerator draw gives the
// forward numbers again); variables assigned in a while_loop body are carried as loop
// variables (reads see the current iteration's value; a SeedGenerator draw in the body uses the
// iteration's state, as the eager loop does) and assigned after the loop. kiln::Error (never a
// silent difference) for: cond_fn assigning variables, the gradient of a loop whose body draws
// random numbers, and second-order gradients through a traced while_loop.
#pragma once

#include <functional>
#include <type_traits>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

using BranchFn = std::function<std::vector<Tensor>()>;
using LoopCondFn = std::function<Tensor(const std::vector<Tensor>&)>;
using LoopBodyFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> cond(const Tensor& pred, const BranchFn& true_fn, const BranchFn& false_fn);

// Single-tensor form: the callables return one Tensor each.
template <typename T, typename F>
requires std::is_same_v<std::invoke_result_t<T&>, Tensor> &&
    std::is_same_v<std::invoke_result_t<F&>, Tensor>
        Tensor cond(const Tensor& pred, T true_fn, F false_fn) {
  return cond(pred, BranchFn([true_fn]() mutable { return std::vector<Tensor>{true_fn()}; }),
              BranchFn([false_fn]() mutable { return std::vector<Tensor>{false_fn()}; }))[0];
}

std::vector<Tensor> while_loop(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                               const std::vector<Tensor>& loop_vars);

// A loop of a fixed number of steps that also returns every step's state, like jax.lax.scan:
// body_fn(step, state) -> next state (step: an i64 scalar, 0 .. steps-1; the state keeps its
// types). Returns the final state and, per state tensor, its value after each step stacked
// along a new leading axis ([steps, shape...]). Eagerly it is a C++ loop; traced, one stacked
// `while` node whose stacks are the per-step values (TensorFlow's TensorArray), so no loop
// variable accumulates a [steps, ...] tensor and the gradient adds each stack row's gradient
// in its own iteration: memory and time linear in `steps`. Same rules as while_loop for
// captures, variables and gradients.
struct ScanResult {
  std::vector<Tensor> final_state;
  std::vector<Tensor> stacked;  // stacked[i][k] = state i after step k
};
using ScanBodyFn = std::function<std::vector<Tensor>(const Tensor&, const std::vector<Tensor>&)>;
ScanResult scan(int64_t steps, const ScanBodyFn& body_fn, const std::vector<Tensor>& init);

// scan over sequences too (jax.lax.scan's xs): every xs[j] is [steps, ...] and step k also
// receives row k of each, body_fn(step, state, rows) -> next state. Traced, the rows are read
// inside the loop and their gradients leave the gradient loop as one [steps, ...] stack per
// sequence (no full-size accumulation per iteration), so a product of all steps' inputs can
// be computed by one GEMM before the loop and its gradient by one GEMM after it. The body
// should read a sequence through its row only: any other use of xs[j] inside the body is
// differentiated as an ordinary capture (one full-size gradient sum per iteration).
using ScanRowsBodyFn = std::function<std::vector<Tensor>(const Tensor&, const std::vector<Tensor>&,
                                                         const std::vector<Tensor>&)>;
ScanResult scan(int64_t steps, const ScanRowsBodyFn& body_fn, const std::vector<Tensor>& init,
                const std::vector<Tensor>& xs);

}  // namespace kiln
