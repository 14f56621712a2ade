// `kiln train --json FILE`: what the run printed, as JSON (tools/json_report.h writes it):
//   environment_json()'s keys, "command": "train",
//   "options":    the options the run used (learning_rate resolved),
//   "runs":       each training run (one; eager then compiled with --mode both): its mode,
//                 "history" (fit's History: every metric per epoch, "loss", "accuracy",
//                 "val_loss", ...), "epochs", final_loss, test_loss, test_accuracy, step times
//                 ("step_ms": median, p10, p90, steps), examples_per_second, compile_seconds,
//                 peak_bytes, total_seconds,
//   "comparison": --mode both only: "agree" (runs_agree), "speedup" (eager median step over
//                 compiled), "train_step" (compare_train_step's ModeComparison: step times,
//                 compile time, kernels, memory and every result's differences),
//   "result":     the final lines (test_loss, test_accuracy; or test_perplexity and
//                 unigram_perplexity for the language models).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "tools/train_comparison.h"
#include "tools/train_options.h"

namespace kiln::tools {

nlohmann::json train_run_json(const TrainRun& run);
nlohmann::json mode_comparison_json(const ModeComparison& c);

// Writes the report to options.json when it is set (nothing otherwise). `comparison` is null
// unless --mode both ran, and then `runs` are its runs.
void write_train_json(const TrainOptions& options, const std::vector<TrainRun>& runs,
                      const TrainComparison* comparison, const nlohmann::json& result);

}  // namespace kiln::tools
