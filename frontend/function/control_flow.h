// Data-dependent control flow that works in both modes:
//   kiln::cond(pred, true_fn, false_fn)        pred: a bool scalar tensor
//   kiln::while_loop(cond_fn, body_fn, vars)   cond_fn(vars) -> bool scalar, body_fn(vars) -> vars
// Eagerly they run as ordinary C++ control flow on the predicate's value (and gradient tapes
// see the ops that ran). Inside kiln::function they record `cond` / `while` nodes whose
// branches and bodies are sub-graphs traced from the callables; tensors the callables capture
// become operands of the node. Both branches of a cond must return the same number of tensors
// with the same types. Gradients flow through a traced cond (each branch differentiated in a
// gradient cond); a traced while_loop has no gradient (kiln::Error if one is requested).
// Variables assigned in a cond branch are assigned after the cond node; assigning variables
// inside a traced while_loop body is an error (carry the value as a loop variable).
#pragma once

#include <functional>
#include <type_traits>
#include <vector>

#include "frontend/tensor.h"

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

}  // namespace kiln
