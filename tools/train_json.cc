#include "tools/train_json.h"

#include "tools/json_report.h"

namespace kiln::tools {
namespace {

nlohmann::json times_json(const ModeTimes& t) {
  return {{"median_ms", t.median() * 1e3},
          {"p10_ms", t.p10() * 1e3},
          {"p90_ms", t.p90() * 1e3},
          {"steps", t.step_seconds.size()}};
}

nlohmann::json options_json(const TrainOptions& o) {
  return {{"model", o.model},
          {"dataset", o.dataset},
          {"optimizer", o.optimizer},
          {"learning_rate", o.learning_rate()},
          {"epochs", o.epochs},
          {"batch_size", o.batch_size},
          {"validation_split", o.validation_split},
          {"seed", o.seed},
          {"mode", o.mode},
          {"dtype_policy", o.dtype_policy},
          {"load_weights", o.load_weights},
          {"save_weights", o.save_weights}};
}

}  // namespace

nlohmann::json train_run_json(const TrainRun& r) {
  const ModeTimes times{r.step_seconds};
  const double median = times.median();
  nlohmann::json history = nlohmann::json::object();
  for (const auto& [metric, values] : r.history) history[metric] = values;
  const size_t epochs = r.history.count("loss") ? r.history.at("loss").size() : 0;
  return {{"mode", r.mode},
          {"epochs", epochs},
          {"history", history},
          {"final_loss", r.final_loss},
          {"test_loss", r.test_loss},
          {"test_accuracy", r.test_accuracy},
          {"batch_size", r.batch_size},
          {"step_ms", times_json(times)},
          {"examples_per_second", median > 0 ? double(r.batch_size) / median : 0.0},
          {"compile_seconds", r.compile_seconds},
          {"peak_bytes", r.peak_bytes},
          {"total_seconds", r.total_seconds}};
}

nlohmann::json mode_comparison_json(const ModeComparison& c) {
  nlohmann::json differences = nlohmann::json::array();
  for (const ResultDifference& d : c.differences)
    differences.push_back({{"name", d.name},
                           {"type", d.type.to_string()},
                           {"max_abs", d.max_abs},
                           {"max_rel", d.max_rel},
                           {"nonfinite_mismatches", d.nonfinite_mismatches},
                           {"note", d.note}});
  return {{"name", c.name},
          {"eager", times_json(c.eager)},
          {"compiled", times_json(c.compiled)},
          {"speedup", c.speedup()},
          {"compile_seconds", c.compile_seconds},
          {"kernels", c.kernels},
          {"kernels_from_caches", c.kernels_from_caches},
          {"arena_bytes", c.arena_bytes},
          {"eager_peak_bytes", c.eager_peak_bytes},
          {"compiled_peak_bytes", c.compiled_peak_bytes},
          {"differences", differences}};
}

void write_train_json(const TrainOptions& options, const std::vector<TrainRun>& runs,
                      const TrainComparison* comparison, const nlohmann::json& result) {
  if (!distributed::is_output_rank()) return;  // under mpirun, rank 0 writes the report
  if (options.json.empty()) return;
  nlohmann::json report = environment_json();
  report["command"] = "train";
  report["options"] = options_json(options);
  report["runs"] = nlohmann::json::array();
  for (const TrainRun& r : runs) report["runs"].push_back(train_run_json(r));
  if (comparison) {
    const double eager = ModeTimes{comparison->runs.at(0).step_seconds}.median();
    const double compiled = ModeTimes{comparison->runs.at(1).step_seconds}.median();
    report["comparison"] = {{"baseline", comparison->runs.at(0).mode},
                            {"agree", comparison->agree()},
                            {"speedup", compiled > 0 ? eager / compiled : 0.0},
                            {"train_step", mode_comparison_json(comparison->step)}};
  }
  report["result"] = result;
  write_json_report(options.json, report);
}

}  // namespace kiln::tools
