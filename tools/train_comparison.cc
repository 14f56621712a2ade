#include "tools/train_comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kiln/frontend/function/compare_modes.h"
#include "tools/data_parallel_report.h"
#include "tools/model_zoo.h"

namespace kiln::tools {
namespace {

std::string mib(int64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / (1 << 20)); }

}  // namespace

void StepTimer::on_train_batch_begin(int, const Logs&) {
  start_ = std::chrono::steady_clock::now();
}

void StepTimer::on_train_batch_end(int, const Logs&) {
  seconds_.push_back(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

bool runs_agree(const TrainRun& a, const TrainRun& b) {
  double loss_scale = std::max({std::abs(a.final_loss), std::abs(b.final_loss), 1e-12});
  return std::abs(a.test_accuracy - b.test_accuracy) <= 0.02 &&
         std::abs(a.final_loss - b.final_loss) / loss_scale <= 0.05;
}

void print_comparison(std::ostream& os, const std::vector<TrainRun>& runs) {
  if (runs.empty()) return;
  const double base = ModeTimes{runs.front().step_seconds}.median();
  std::vector<std::vector<std::string>> rows = {
      {""},          {"step time (median)"}, {"step time (p10 - p90)"}, {"examples / s"},
      {"speedup"},   {"compile time"},       {"peak tensor memory"},    {"final training loss"},
      {"test loss"}, {"test accuracy"}};
  for (const TrainRun& r : runs) {
    const ModeTimes times{r.step_seconds};
    const double med = times.median();
    rows[0].push_back(r.mode);
    rows[1].push_back(fmt::format("{:.3f} ms", med * 1e3));
    rows[2].push_back(fmt::format("{:.3f} - {:.3f} ms", times.p10() * 1e3, times.p90() * 1e3));
    rows[3].push_back(fmt::format("{:.0f}", med > 0 ? double(r.batch_size) / med : 0.0));
    rows[4].push_back(fmt::format("{:.2f}x", med > 0 ? base / med : 0.0));
    rows[5].push_back(r.mode == "eager" ? "-" : fmt::format("{:.0f} ms", r.compile_seconds * 1e3));
    rows[6].push_back(mib(r.peak_bytes));
    rows[7].push_back(fmt::format("{:.4f}", r.final_loss));
    rows[8].push_back(fmt::format("{:.4f}", r.test_loss));
    rows[9].push_back(fmt::format("{:.4f}", r.test_accuracy));
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line = fmt::format("{:<{}}", row[0], width[0]);
    for (size_t c = 1; c < row.size(); ++c) line += fmt::format("  {:>{}}", row[c], width[c]);
    os << line << "\n";
  }
  for (size_t i = 1; i < runs.size(); ++i)
    os << fmt::format("{} vs {}: {}\n", runs[i].mode, runs[0].mode,
                      runs_agree(runs[0], runs[i])
                          ? "results agree (test accuracy within 0.02, final loss within 5%)"
                          : "RESULTS DIFFER beyond tolerance (test accuracy 0.02, loss 5%)");
}

ModeComparison compare_train_step(std::ostream& os, const std::string& name,
                                  const std::function<Model()>& build, const std::string& optimizer,
                                  double learning_rate, uint64_t seed, const Tensor& x,
                                  const Tensor& y) {
  clear_session();
  set_random_seed(seed);
  Model model = build();
  Optimizer opt = optimizer == "sgd" ? SGD({.learning_rate = learning_rate})
                                     : Adam({.learning_rate = learning_rate});
  Loss loss_fn = losses::sparse_categorical_crossentropy(/*from_logits=*/true);
  auto step = [&](const Tensor& xb, const Tensor& yb) {
    GradientTape tape;
    Tensor loss = loss_fn(yb, model(xb, /*training=*/true));
    std::vector<Variable> vars = model->trainable_weights();
    opt->apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  return compare_modes(
      CompareOptions{.name = name + "_train_step", .warmup = 3, .steps = 30, .print_to = &os}, step,
      x, y);
}

TrainRun fit_and_evaluate(ModelImpl& model, const std::string& mode, const Tensor& x,
                          const Tensor& y, FitOptions options, const Tensor& x_test,
                          const Tensor& y_test) {
  ScopedExecutionMode execution(mode == "reference" ? ExecutionMode::kReference
                                                    : ExecutionMode::kCompiled);
  auto timer = std::make_shared<StepTimer>();
  options.callbacks.push_back(timer);
  // Under mpirun every rank trains its share of each global batch (docs/distributed.md).
  options.callbacks.push_back(std::make_shared<CollectivesAfterFirstStep>());
  options.data_parallel = distributed::launched_by_mpi();
  const int64_t live_before = runtime::Storage::live_bytes();
  runtime::Storage::reset_peak_bytes();
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<History> history = model.fit(x, y, options);
  TrainRun run;
  run.mode = mode;
  run.history = history->history;
  run.total_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.peak_bytes = runtime::Storage::peak_bytes() - live_before;
  run.step_seconds = timer->seconds();
  run.batch_size = options.batch_size;
  if (auto it = run.history.find("loss"); it != run.history.end() && !it->second.empty())
    run.final_loss = it->second.back();
  if (mode != "eager")
    run.compile_seconds = train_step_compile_seconds(model, x, y, options.batch_size);
  Logs result = model.evaluate(
      x_test, y_test, {.batch_size = 256, .verbose = 0, .data_parallel = options.data_parallel});
  run.test_loss = result["loss"];
  run.test_accuracy = result["accuracy"];
  return run;
}

double train_step_compile_seconds(ModelImpl& model, const Tensor& x, const Tensor& y,
                                  int64_t batch_size) {
  double seconds = 0;
  const int64_t n = x.shape()[0];
  for (int64_t b : {std::min(batch_size, n), n % batch_size}) {
    if (b == 0) continue;
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < b; ++i) rows.push_back(i);
    seconds += model.train_step_function(data::take_rows(x, rows), data::take_rows(y, rows))
                   .compile_stats()
                   .compile_seconds;
  }
  return seconds;
}

TrainComparison train_both_ways(std::ostream& os,
                                const std::function<TrainRun(const std::string&)>& train,
                                const std::string& name, const std::function<Model()>& build,
                                const std::string& optimizer, double learning_rate, uint64_t seed,
                                const Tensor& x, const Tensor& y) {
  TrainComparison c;
  for (const char* mode : {"eager", "compiled"}) {
    os << fmt::format("training {} ...\n", mode) << std::flush;
    c.runs.push_back(train(mode));
  }
  os << "\n";
  print_comparison(os, c.runs);
  // One step of the same training, both ways from the same weights, with the differences.
  os << "\n";
  c.step = compare_train_step(os, name, build, optimizer, learning_rate, seed, x, y);
  return c;
}

void TrainComparison::check_agreement() const {
  if (!agree())
    throw Error("kiln train --mode both: eager and compiled training disagree beyond tolerance");
}

}  // namespace kiln::tools
