// The reference executor: runs an IR graph node by node with the eager kernels. It is the
// test oracle for the compilers: whatever they do, their results must match this one.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/array.h"

namespace kiln::runtime {

// Runs `graph` node by node with the eager kernels (run_kernel), the test oracle for later
// compilers. The graph must be valid (ir::verify_graph; traced and parsed graphs are verified
// once when made), so the per-call cost is only the kernels.
//
// `args`: one Array per graph parameter, with the parameter's dtype and rank and its known
// dimensions (an unknown dimension matches any size). `variables`: one Array per graph variable
// (graph.variables()), checked the same way; they are the variables' entry values, and each
// assignment node replaces its variable's Array with the new value, in program order.
// Op node types are re-inferred from the concrete input shapes, so a graph with unknown
// dimensions runs at any size. Sub-graphs (cond / while / fusion
// bodies) run recursively.
// Returns the graph outputs (the same Array may appear more than once). Results are bitwise
// equal to calling runtime::run_op for each node in program order.
std::vector<Array> execute_reference(const ir::Graph& graph, std::span<const Array> args,
                                     std::vector<Array>& variables);

// How the reference executor evaluates: the float64 oracle of the error-bounded tests
// (tests/support/error_bound.h) runs the same graph with these.
struct ReferenceOptions {
  // Evaluate every float32 value in float64: f32 arguments, variables and constants are
  // widened exactly, ops whose attributes name f32 (cast, one_hot) produce f64 instead, and
  // random ops draw their float32 numbers as usual and widen them. Results and variables come
  // back as f64 arrays wherever the graph says f32. Integer and f64 values are unchanged.
  bool widen_f32 = false;
  // Evaluate every bfloat16 value in float32, never rounding to bf16: the float32 run of a bf16
  // graph (compare_modes reports bf16 results against it). bf16 arguments, variables and
  // constants are widened exactly, ops whose attributes name bf16 produce f32 (random ops: the
  // float32 numbers a bf16 draw rounds), and results and variables come back as f32 wherever
  // the graph says bf16. With widen_f32 as well, bf16 values are evaluated in float64.
  bool widen_bf16 = false;
  // Called after each op (and each assign_add / assign_sub, as add / sub) with the op, its
  // attributes, its input arrays and its result, which it may replace (not write into: a kernel may
  // return an input's storage). `declared` is the dtype the graph gives the result (f32
  // for a widened f64 result). Sub-graphs (fusion bodies, cond and while branches) call it too.
  std::function<void(OpKind op, const Attrs& attrs, std::span<const Array> inputs, Array& result,
                     DType declared)>
      after_op;
};

// execute_reference with options (the overload above uses the defaults: exact, unhooked,
// unless a ScopedReferenceHook is alive on the calling thread).
std::vector<Array> execute_reference(const ir::Graph& graph, std::span<const Array> args,
                                     std::vector<Array>& variables,
                                     const ReferenceOptions& options);

// Gives the three-argument execute_reference, on the calling thread, `after_op` as its hook
// until destroyed (nested scopes restore the previous hook). This is how a whole training run
// in reference mode (functions run by the reference executor) is evaluated under a rounding
// model: the compiled-training tests measure how far correct float32 roundings can move a
// trajectory with it.
class ScopedReferenceHook {
 public:
  explicit ScopedReferenceHook(decltype(ReferenceOptions::after_op) after_op);
  ~ScopedReferenceHook();
  ScopedReferenceHook(const ScopedReferenceHook&) = delete;
  ScopedReferenceHook& operator=(const ScopedReferenceHook&) = delete;

 private:
  ReferenceOptions options_;
  const ReferenceOptions* previous_;
};

}  // namespace kiln::runtime
