// The step report's entry points (report.h): measuring a compiled form's executable with the
// profiler, and writing the page (report_html.cc) atomically.
#include "kiln/frontend/function/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "kiln/runtime/file_io.h"
#include "kiln/runtime/machine_peak.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/threading.h"

namespace kiln {
namespace {

using runtime::ProfileEvent;

int64_t end_of(const ProfileEvent& e) { return e.start_ns + e.duration_ns; }

// The events directly inside `call` on its thread (not inside another of them), in order.
std::vector<const ProfileEvent*> children(const std::vector<ProfileEvent>& events,
                                          const ProfileEvent& call) {
  std::vector<const ProfileEvent*> out;
  int64_t last_end = call.start_ns;
  auto first =
      std::lower_bound(events.begin(), events.end(), call.start_ns,
                       [](const ProfileEvent& e, int64_t start) { return e.start_ns < start; });
  for (auto it = first; it != events.end(); ++it) {
    const ProfileEvent& e = *it;
    if (&e == &call || e.thread != call.thread) continue;
    if (e.start_ns > end_of(call)) break;
    if (end_of(e) > end_of(call)) continue;
    // Two events that start together: the longer holds the other (a step and its first
    // nested event).
    if (!out.empty() && e.start_ns == out.back()->start_ns && end_of(e) >= last_end) {
      out.back() = &e;
      last_end = end_of(e);
      continue;
    }
    if (e.start_ns < last_end) continue;
    out.push_back(&e);
    last_end = end_of(e);
  }
  return out;
}

// Adds the steps of the bodies a cond / while step event ran (the body executables' calls
// inside it, one level) to `into`, by name and category.
void add_nested(const std::vector<ProfileEvent>& events, const ProfileEvent& step,
                std::map<std::pair<std::string, std::string>, NestedStepTime>& into) {
  for (const ProfileEvent* body : children(events, step)) {
    if (body->category != "call") continue;
    for (const ProfileEvent* e : children(events, *body)) {
      NestedStepTime& n = into[{e->name, e->category}];
      n.name = e->name;
      n.category = e->category;
      n.runs += 1;
      n.ns += e->duration_ns;
      n.flops += e->flops;
      n.bytes += e->bytes;
    }
  }
}

Tensor snapshot_copy(const Tensor& t) {
  runtime::Array a = runtime::Array::empty(t.type());
  if (a.nbytes() > 0) std::memcpy(a.raw(), t.array().raw(), a.nbytes());
  return Tensor(std::move(a));
}

}  // namespace

StepTiming measure_step(const CompiledForm& form, const std::function<void()>& run_step,
                        int calls) {
  if (calls < 1) throw Error(fmt::format("measure_step: calls must be at least 1, got {}", calls));
  const runtime::Executable& exe = *form.executable();
  run_step();  // warm-up: first-call allocations, pools, caches
  const bool own = !runtime::profiling_enabled();
  auto top_calls = [&](const std::vector<ProfileEvent>& events) {
    // The executable's calls (a nested executable of the same name inside one is not a call).
    std::vector<const ProfileEvent*> runs;
    for (const ProfileEvent& e : events)
      if (e.category == "call" && e.name == exe.name() &&
          (runs.empty() || runs.back()->thread != e.thread || e.start_ns >= end_of(*runs.back())))
        runs.push_back(&e);
    return runs;
  };
  // A running profile's calls of this executable so far are not this measurement's.
  const size_t earlier = own ? 0 : top_calls(runtime::profile_events()).size();
  if (own) runtime::start_profiling();
  try {
    for (int i = 0; i < calls; ++i) run_step();
  } catch (...) {
    if (own) runtime::stop_profiling();
    throw;
  }
  std::vector<ProfileEvent> events = own ? runtime::stop_profiling() : runtime::profile_events();

  std::vector<const ProfileEvent*> runs = top_calls(events);
  runs.erase(runs.begin(), runs.begin() + std::min(earlier, runs.size()));
  // At most the last `calls` (the step may call the executable more than once).
  if (runs.size() > size_t(calls)) runs.erase(runs.begin(), runs.end() - calls);
  if (runs.empty())
    throw Error(
        fmt::format("measure_step: the step ran {} times but never called the "
                    "executable of {} (does it call this compiled form, with its "
                    "argument shapes?)",
                    calls, exe.name()));
  const auto& steps = exe.steps();
  StepTiming t;
  t.step_ns_of.assign(steps.size(), 0);
  t.nested_of.assign(steps.size(), {});
  std::vector<std::map<std::pair<std::string, std::string>, NestedStepTime>> nested(steps.size());
  int64_t total = 0;
  for (const ProfileEvent* run : runs) {
    std::vector<const ProfileEvent*> inside = children(events, *run);
    bool match = inside.size() == steps.size();
    for (size_t k = 0; match && k < steps.size(); ++k) match = inside[k]->name == steps[k].name;
    if (!match)
      throw Error(
          fmt::format("measure_step: a call of {} recorded {} step events for its {} "
                      "steps (was the profile full?)",
                      exe.name(), inside.size(), steps.size()));
    for (size_t k = 0; k < steps.size(); ++k) {
      t.step_ns_of[k] += inside[k]->duration_ns;
      if (inside[k]->category == "control") add_nested(events, *inside[k], nested[k]);
    }
    total += run->duration_ns;
  }
  t.calls = int(runs.size());
  int64_t sum = 0;
  for (int64_t& ns : t.step_ns_of) {
    ns /= t.calls;
    sum += ns;
  }
  t.step_ns = total / t.calls;
  for (size_t k = 0; k < steps.size(); ++k) {
    for (auto& [key, n] : nested[k]) {
      n.runs /= t.calls;
      n.ns /= t.calls;
      n.flops /= t.calls;
      n.bytes /= t.calls;
      t.nested_of[k].push_back(n);
    }
    std::stable_sort(t.nested_of[k].begin(), t.nested_of[k].end(),
                     [](const NestedStepTime& a, const NestedStepTime& b) { return a.ns > b.ns; });
  }
  t.overhead_ns = t.step_ns - sum;
  t.peak_gflops = runtime::measure_fma_peak(num_threads(), 0.02, 2).gflops;
  t.copy_gbs = runtime::measure_copy_bandwidth(num_threads(), 2).gbs;
  return t;
}

void write_report(const CompiledForm& form, const std::string& path, const ReportOptions& options) {
  runtime::write_file_atomically(path, report_html(form, options));
}

void CompiledForm::write_report(const std::string& path, const StepTiming* timing) const {
  kiln::write_report(*this, path, ReportOptions{.title = "", .timing = timing});
}

void write_report(const ConcreteFunction& cf, const std::vector<Tensor>& args,
                  const std::string& path, int calls) {
  CompiledForm form = cf.compiled_form(args);
  const std::vector<VariableUse> vars = cf.variables();
  std::vector<Tensor> snapshot;
  for (const VariableUse& v : vars) snapshot.push_back(snapshot_copy(v.variable.value()));
  auto restore = [&] {
    for (size_t i = 0; i < vars.size(); ++i)
      Variable(vars[i].variable).assign(snapshot_copy(snapshot[i]));
  };
  StepTiming timing;
  try {
    timing = measure_step(
        form, [&] { cf.run(args, ExecutionMode::kCompiled); }, calls);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  kiln::write_report(form, path, ReportOptions{.title = cf.name(), .timing = &timing});
}

}  // namespace kiln
