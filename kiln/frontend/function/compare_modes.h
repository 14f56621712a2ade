// compare_modes: runs a user's function eagerly and compiled from the same starting state and
// reports speed, compile time, memory and how far the two modes' results are apart.
//
//   ModeComparison c = kiln::compare_modes(train_step, x, y);   // prints the report too
//
// Contract:
//   - The function is traced once (kiln::function, compiled mode) to learn every variable it
//     reads or writes (its registry; variables it creates on that trace included). Each
//     variable's value is copied then; before each mode runs, every variable gets a fresh copy
//     of that value back, and after both modes it gets it again: the function's variables end
//     as they started.
//   - Each mode: one first call (its results, and the new values of the variables the function
//     assigns, are what is compared), `warmup` untimed calls, then `steps` timed calls. The
//     compiled mode compiles before its first call (CompiledForm); compile time is reported
//     apart, with how many kernels came from the kernel caches.
//   - Differences, per output and per assigned variable (in the registry's order): the largest
//     |eager - compiled| and the largest |eager - compiled| / max(|eager|, |compiled|) over the
//     elements that are not both zero; elements finite in one mode and not in the other (or
//     NaN in one only) are counted apart; a different type is reported with infinite
//     differences. Random draws through a SeedGenerator (the layers') depend only on its state
//     variable, restored like the others, so they agree; bare random ops with an integer seed
//     draw other numbers when traced (tracing_random.h), so a function that uses them differs
//     for that reason.
//   - bfloat16 results (mixed_bfloat16 models): the same first step is also run in float32 (the
//     traced graph on the reference executor with every bf16 value evaluated in float32,
//     ReferenceOptions::widen_bf16, from the same variables), and each bf16 result reports the
//     largest relative difference of each mode from it: what bf16 costs in accuracy, beside
//     what compiling costs.
//   - Memory: the compiled executable's arena (CompiledForm::arena_bytes), and for both modes
//     the high-water mark of kiln's tensor storage (runtime::Storage::peak_bytes) above what
//     was live when the mode started, over all its calls: every tensor a step allocates
//     (eager: each op's result; compiled: arena, outputs, new variable values). It counts
//     tensor storage of the whole process, so other threads allocating meanwhile inflate it.
#pragma once

#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/frontend/function/function.h"

namespace kiln {

struct CompareOptions {
  std::string name = "compare_modes";   // the traced function's name (dumps, messages)
  int warmup = 2;                       // untimed calls per mode after the first
  int steps = 20;                       // timed calls per mode
  std::ostream* print_to = &std::cout;  // where the report goes; nullptr: nowhere
};

// Step times of one mode, in seconds.
struct ModeTimes {
  std::vector<double> step_seconds;
  double median() const;
  double p10() const;
  double p90() const;
};

// How far one result of the two modes is apart.
struct ResultDifference {
  std::string name;  // "output 0", "variable dense/kernel"
  TensorType type;   // the eager result's
  double max_abs = 0;
  double max_rel = 0;
  int64_t nonfinite_mismatches = 0;  // finite (or NaN) in one mode only
  std::string note;                  // e.g. a type mismatch
  // bf16 results: the largest relative difference of each mode's result from the float32 run
  // (elements not both zero, finite in both); -1 for other results.
  double eager_vs_float32 = -1, compiled_vs_float32 = -1;
};

struct ModeComparison {
  std::string name;
  ModeTimes eager, compiled;
  double compile_seconds = 0;
  int kernels = 0, kernels_from_caches = 0;
  size_t arena_bytes = 0;
  int64_t eager_peak_bytes = 0, compiled_peak_bytes = 0;
  std::vector<ResultDifference> differences;  // outputs, then assigned variables
  // The results of each mode's first call, in the order of `differences`.
  std::vector<Tensor> eager_results, compiled_results;

  double speedup() const;  // eager median / compiled median
  // The report: a table of both modes, then one line per result.
  std::string to_string() const;
};

namespace detail {

// The work of compare_modes once the function is traced: `cf` is its concrete function for
// `tensors`, `eager` / `compiled` call it once in each mode.
ModeComparison compare_concrete(const CompareOptions& options, const ConcreteFunction& cf,
                                const std::vector<Tensor>& tensors,
                                const std::function<std::vector<Tensor>()>& eager,
                                const std::function<std::vector<Tensor>()>& compiled);

}  // namespace detail

// Arguments as for kiln::function (tensors, vectors of tensors, other values).
template <typename F, typename... Args>
ModeComparison compare_modes(const CompareOptions& options, F fn, const Args&... args) {
  auto compiled =
      function(fn, FunctionOptions{.name = options.name, .mode = ExecutionMode::kCompiled});
  ConcreteFunction cf = compiled.concrete(args...);
  std::vector<Tensor> tensors;
  uint64_t hash = 0;
  (detail::collect_argument(args, tensors, hash), ...);
  using R = std::decay_t<std::invoke_result_t<F&, const Args&...>>;
  auto run = [](auto&& call) -> std::vector<Tensor> {
    if constexpr (std::is_void_v<R>) {
      call();
      return {};
    } else {
      return detail::flatten_result(call());
    }
  };
  return detail::compare_concrete(
      options, cf, tensors, [&] { return run([&] { return fn(args...); }); },
      [&] { return run([&] { return compiled(args...); }); });
}

template <typename F, typename... Args>
requires(!std::is_same_v<std::decay_t<F>, CompareOptions>) ModeComparison
    compare_modes(F fn, const Args&... args) {
  return compare_modes(CompareOptions{}, std::move(fn), args...);
}

}  // namespace kiln
