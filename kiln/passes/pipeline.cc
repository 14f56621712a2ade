#include "kiln/passes/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <utility>

#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/passes.h"
#include "kiln/runtime/file_io.h"
#include "kiln/runtime/knobs.h"

namespace kiln::passes {

// ---- options

bool PipelineOptions::verify_by_default() {
#ifdef NDEBUG
  return false;
#else
  return true;
#endif
}

PipelineOptions PipelineOptions::from_environment() {
  PipelineOptions o;
  if (auto v = runtime::knobs::verify()) o.verify = *v;
  for (std::string& name : runtime::knobs::disabled_passes()) o.disabled.insert(std::move(name));
  if (auto dir = runtime::knobs::dump_ir_dir()) o.dump_dir = *dir;
  if (auto re = runtime::knobs::dump_passes_regex()) o.dump_filter = *re;
  return o;
}

// ---- pipeline

struct PassPipeline::Stage {
  std::string group;  // empty: a single pass
  std::vector<std::unique_ptr<Pass>> passes;
  int max_iterations = 1;
};

struct PassPipeline::RunState {
  ir::Graph& graph;
  std::optional<std::regex> dump_filter;
  int next_dump = 0;

  void dump(std::string_view stage, const std::string& dir) {
    std::string path = fmt::format("{}/{:03}.{}.kir", dir, next_dump++, stage);
    runtime::write_file_atomically(path, ir::print_graph(graph));
  }
};

PassPipeline::PassPipeline(PipelineOptions options) : options_(std::move(options)) {}
PassPipeline::PassPipeline(PassPipeline&&) noexcept = default;
PassPipeline& PassPipeline::operator=(PassPipeline&&) noexcept = default;
PassPipeline::~PassPipeline() = default;

PassPipeline& PassPipeline::add(std::unique_ptr<Pass> pass) {
  KILN_ASSERT(pass != nullptr, "PassPipeline::add: null pass");
  Stage s;
  s.passes.push_back(std::move(pass));
  stages_.push_back(std::move(s));
  return *this;
}

PassPipeline& PassPipeline::add_fixed_point(std::string group,
                                            std::vector<std::unique_ptr<Pass>> passes,
                                            int max_iterations) {
  KILN_ASSERT(!group.empty(), "add_fixed_point: the group needs a name");
  KILN_ASSERT(max_iterations >= 1, "add_fixed_point: max_iterations must be at least 1");
  for (const auto& p : passes) KILN_ASSERT(p != nullptr, "add_fixed_point: null pass");
  stages_.push_back(Stage{std::move(group), std::move(passes), max_iterations});
  return *this;
}

std::vector<std::string> PassPipeline::pass_names() const {
  std::vector<std::string> names;
  for (const Stage& s : stages_)
    for (const auto& p : s.passes)
      if (std::find(names.begin(), names.end(), p->name()) == names.end())
        names.emplace_back(p->name());
  return names;
}

void PassPipeline::check_disabled_names() const {
  std::vector<std::string> known;
  for (std::string_view n : registered_pass_names()) known.emplace_back(n);
  for (std::string& n : pass_names())
    if (std::find(known.begin(), known.end(), n) == known.end()) known.push_back(std::move(n));
  for (const std::string& name : options_.disabled)
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw Error(fmt::format(
          "cannot disable unknown pass \"{}\" (KILN_DISABLE_PASSES or PipelineOptions::disabled); "
          "known passes: {}",
          name, fmt::join(known, ", ")));
}

PassTiming& PassPipeline::timing_of(std::string_view name) {
  for (PassTiming& t : timings_)
    if (t.name == name) return t;
  timings_.emplace_back().name = std::string(name);
  return timings_.back();
}

bool PassPipeline::run(ir::Graph& g) {
  check_disabled_names();
  RunState state{g, std::nullopt, 0};
  if (!options_.dump_filter.empty()) {
    try {
      state.dump_filter.emplace(options_.dump_filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error(
          fmt::format("the pass dump filter \"{}\" (KILN_DUMP_PASSES) is not a valid "
                      "regular expression: {}",
                      options_.dump_filter, e.what()));
    }
  }
  if (options_.verify) {
    try {
      ir::verify_graph(g);
    } catch (const Error& e) {
      throw Error(fmt::format("the pipeline's input graph is invalid: {}", e.what()));
    }
  }
  if (!options_.dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.dump_dir, ec);
    if (ec)
      throw Error(fmt::format("cannot create the IR dump directory \"{}\" (KILN_DUMP_IR): {}",
                              options_.dump_dir, ec.message()));
    state.dump("input", options_.dump_dir);
  }
  bool changed = false;
  for (Stage& stage : stages_)
    changed |=
        stage.group.empty() ? run_pass(*stage.passes[0], state) : run_fixed_point(stage, state);
  return changed;
}

bool PassPipeline::run_pass(Pass& pass, RunState& state) {
  std::string_view name = pass.name();
  if (options_.disabled.contains(name)) return false;
  auto start = std::chrono::steady_clock::now();
  bool changed;
  pass.statistics().clear();
  try {
    changed = pass.run(state.graph);
  } catch (const Error& e) {
    throw Error(fmt::format("pass \"{}\" failed: {}", name, e.what()));
  }
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                  start);
  PassTiming& t = timing_of(name);
  t.runs += 1;
  t.changed += changed ? 1 : 0;
  t.total_us += us.count();
  t.statistics.merge(pass.statistics());
  pass.statistics().clear();
  if (!changed) return false;
  if (options_.verify) {
    try {
      ir::verify_graph(state.graph);
    } catch (const Error& e) {
      throw Error(fmt::format("pass \"{}\" produced an invalid graph: {}", name, e.what()));
    }
  }
  if (!options_.dump_dir.empty() &&
      (!state.dump_filter || std::regex_search(name.begin(), name.end(), *state.dump_filter)))
    state.dump(fmt::format("after.{}", name), options_.dump_dir);
  return true;
}

bool PassPipeline::run_fixed_point(Stage& stage, RunState& state) {
  bool changed = false;
  std::vector<std::string_view> last_changed;
  for (int round = 0; round < stage.max_iterations; ++round) {
    last_changed.clear();
    for (auto& pass : stage.passes)
      if (run_pass(*pass, state)) last_changed.push_back(pass->name());
    if (last_changed.empty()) return changed;
    changed = true;
  }
  throw Error(fmt::format(
      "fixed-point group \"{}\" did not converge after {} iterations: {} still changed the "
      "graph in the last one (a pass that never stops changing the graph is a bug; "
      "KILN_DISABLE_PASSES={} works around it)",
      stage.group, stage.max_iterations, fmt::join(last_changed, ", "), last_changed.front()));
}

std::string PassPipeline::timings_table() const {
  size_t width = 5;  // "total"
  for (const PassTiming& t : timings_) width = std::max(width, t.name.size());
  std::string out =
      fmt::format("{:<{}}  {:>6}  {:>7}  {:>10}\n", "pass", width, "runs", "changed", "time (us)");
  PassTiming total;
  total.name = "total";
  for (const PassTiming& t : timings_) {
    out +=
        fmt::format("{:<{}}  {:>6}  {:>7}  {:>10}\n", t.name, width, t.runs, t.changed, t.total_us);
    total.runs += t.runs;
    total.changed += t.changed;
    total.total_us += t.total_us;
  }
  out += fmt::format("{:<{}}  {:>6}  {:>7}  {:>10}\n", total.name, width, total.runs, total.changed,
                     total.total_us);
  return out;
}

std::string PassPipeline::statistics_table() const { return passes::statistics_table(timings_); }

std::string statistics_table(const std::vector<PassTiming>& timings) {
  size_t width = 24;
  for (const PassTiming& t : timings)
    for (const auto& [name, value] : t.statistics.counters()) width = std::max(width, name.size());
  std::string out;
  for (const PassTiming& t : timings) {
    out += t.name + "\n";
    if (t.statistics.empty()) out += "  (nothing counted)\n";
    for (const auto& [name, value] : t.statistics.counters())
      out += fmt::format("  {:<{}}  {:>8}\n", name, width, value);
  }
  return out;
}

// ---- the default pipeline

PassPipeline default_pipeline(const PipelineOptions& options) {
  PassPipeline p(options);
  p.add_fixed_point("simplify", pass_list(make_algebraic_simplify(), make_constant_fold(),
                                          make_cse(), make_dce()));
  return p;
}

PassPipeline optimize_pipeline(const PipelineOptions& options) {
  PassPipeline p = default_pipeline(options);
  p.add(make_hoist_loop_transposes());
  p.add(make_split_reductions());
  p.add(make_lower_assignments());
  p.add(make_fusion());
  p.add(make_schedule_last_uses());
  p.add(make_schedule_collectives());
  return p;
}

}  // namespace kiln::passes
