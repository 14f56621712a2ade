// The step report: one self-contained HTML file (inline SVG, CSS and script; nothing fetched
// from a network) that shows a compiled function as it runs: its optimized graph collapsed by
// fusion group and layer name scope (forward, gradient and update parts apart, laid out by
// kiln), the memory plan of its arena as a timeline, and a sortable table of its steps'
// kernels, with the measured time of each when a timing is given.
//
// Contract:
//  - Everything drawn comes from the one CompiledForm the executable runs from: its optimized
//    graph, its arena layout (codegen::ArenaLayout) and its executable's steps.
//  - Every fusion group is drawn as exactly one graph box (`data-group="<group name>"`) of the
//    group view, and every such box belongs to exactly one box of the layer view
//    (`data-layer`, `data-members`). Every buffer of the memory plan is drawn exactly once
//    (`data-buffer="%N"`, the IR dump's value number): a planned value with bytes of its own,
//    i.e. not a constant (its literal), not a view of its operand's bytes and not a variable's
//    new value (written into the variable's buffer), which are listed on the buffer they share.
//    Every scratch buffer once (`data-scratch="<i>"`), every executable step once as a table row
//    (`data-step="<i>"`).
//  - Times (with a StepTiming): each step's mean time over the measured calls and the runtime's
//    own time between steps add up exactly (in nanoseconds) to the mean time of the calls.
//  - With a ModeComparison: a section charts eager against compiled (each call's step time in
//    both modes, each result's largest relative difference), every result once
//    (`data-result="<name>"`).
//  - write_report writes through runtime::write_file_atomically: a kiln::Error naming the path
//    when it cannot be written; an existing file is replaced whole or left as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/frontend/function/compare_modes.h"
#include "kiln/frontend/function/compiled_form.h"
#include "kiln/frontend/function/concrete_function.h"

namespace kiln {

// The steps a cond / while step ran in its bodies, by name: per call of the executable.
struct NestedStepTime {
  std::string name;             // as in the IR dump (the body's fusion groups)
  std::string category;         // the profiler's: "kernel", "contraction", "op", ...
  double runs = 0;              // times it ran per call (a loop body's step: once per iteration)
  int64_t ns = 0;               // its time per call (inside the cond / while step's time)
  double flops = 0, bytes = 0;  // per call, 0 when unknown
};

// Measured times of one compiled form's executable, from the profiler (runtime/profiler.h).
struct StepTiming {
  int calls = 0;        // calls of the executable measured
  int64_t step_ns = 0;  // mean duration of a call
  // Per executable step (Executable::steps() order): mean duration per call.
  std::vector<int64_t> step_ns_of;
  // The runtime's own time in a call, between and around its steps: step_ns - sum(step_ns_of).
  int64_t overhead_ns = 0;
  // Per executable step: for a cond / while step, the steps of its bodies (one level), sorted
  // by time; empty for the others.
  std::vector<std::vector<NestedStepTime>> nested_of;
  // The machine's float32 FMA peak (runtime/machine_peak.h) at kiln's thread count; 0 unknown.
  double peak_gflops = 0;
  double copy_gbs = 0;  // the machine's copy bandwidth beyond its caches (measure_copy_bandwidth)
};

// Runs `run_step` (which must call `form`'s executable, e.g. a ConcreteFunction call with the
// form's argument shapes) once to warm up, then `calls` times with the profiler on, and returns
// the mean times of those calls' executable steps. A profile already running goes on (its
// events are read, not taken). kiln::Error when calls < 1 or when `run_step` did not run the
// executable.
StepTiming measure_step(const CompiledForm& form, const std::function<void()>& run_step,
                        int calls = 5);

struct ReportOptions {
  std::string title;                   // default: the graph's name
  const StepTiming* timing = nullptr;  // times, shares and colours; none when null
  // compare_modes' result for this step (eager against compiled): step times per call and the
  // per-result differences, charted; none when null.
  const ModeComparison* comparison = nullptr;
};

// The report as HTML text.
std::string report_html(const CompiledForm& form, const ReportOptions& options = {});
// report_html written to `path` (atomically); kiln::Error naming the path on failure.
void write_report(const CompiledForm& form, const std::string& path,
                  const ReportOptions& options = {});

// The report of `cf` for `args`: compiles (or reuses) the form for their shapes, measures
// `calls` calls (plus one warm-up) of the function on them, then puts every variable the
// function reads or writes back to the value it had before, and writes the report to `path`.
void write_report(const ConcreteFunction& cf, const std::vector<Tensor>& args,
                  const std::string& path, int calls = 5);

}  // namespace kiln
