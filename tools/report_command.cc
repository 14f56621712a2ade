// `kiln report`: the HTML step report (kiln/frontend/function/report.h) of a model's training
// step: its optimized graph, memory plan and kernels, with the measured time of every step.
#include <fmt/format.h>

#include <iostream>

#include "kiln/kiln.h"
#include "tools/cli_conventions.h"
#include "tools/commands.h"
#include "tools/report_steps.h"
#include "tools/train_comparison.h"

namespace kiln::tools {
namespace {

struct ReportArgs {
  std::string model = "mlp", output = "report.html";
  int64_t batch_size = 64, seq_len = 32;
  int calls = 5;
  bool no_timing = false, compare = false;
};

void run_report(const ReportArgs& a) {
  ReportStep step = make_report_step(a.model, a.batch_size, a.seq_len);
  StepTiming timing;
  if (!a.no_timing)
    timing = measure_step(
        step.form, [&] { step.run(); }, a.calls);
  ModeComparison comparison;
  if (a.compare)  // the same model's step as a kiln::function, eager against compiled
    comparison = compare_train_step(
        std::cout, a.model,
        [&] { return make_report_step(a.model, a.batch_size, a.seq_len).model; }, "adam", 1e-3,
        /*seed=*/0, step.x, step.y);
  write_report(step.form, a.output,
               {.title = fmt::format("{} training step, batch {}", a.model, a.batch_size),
                .timing = a.no_timing ? nullptr : &timing,
                .comparison = a.compare ? &comparison : nullptr});
  std::cout << fmt::format("wrote {}: {} nodes, {} kernels, arena {}", a.output,
                           step.form.graph(Stage::kOptimized).total_node_count(),
                           step.form.kernels().size(),
                           codegen::format_bytes(step.form.arena_bytes()));
  if (!a.no_timing)
    std::cout << fmt::format(", step {:.3f} ms (mean of {} calls)", double(timing.step_ns) / 1e6,
                             timing.calls);
  std::cout << "\n";
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "write one self-contained HTML page of a model's compiled training step: the optimized "
      "graph by fusion group and layer, the memory plan as a timeline, the kernels, with the "
      "measured time of each step");
  cmd->add_option("--model", args->model,
                  "mlp or cnn (digits shapes), lstm or transformer (character models)")
      ->check(CLI::IsMember(report_step_kinds()));
  cmd->add_option("-o,--output", args->output, "the HTML file to write");
  cmd->add_option("--batch-size", args->batch_size, "the step's batch")->check(CLI::PositiveNumber);
  cmd->add_option("--seq-len", args->seq_len, "lstm, transformer: characters per example")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--calls", args->calls, "measured calls of the step (after one warm-up)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-timing", args->no_timing, "draw the step without running it");
  cmd->add_flag("--compare", args->compare,
                "also run the model's step eagerly and compiled (compare_modes, printed) and "
                "chart both modes' step times and the results' differences");
  cmd->callback([args] { run_report(*args); });
}

}  // namespace kiln::tools
