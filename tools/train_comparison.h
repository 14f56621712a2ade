// `kiln train --mode both`: the eager-vs-compiled comparison. Each run trains the same model
// from the same initial weights and seed; StepTimer measures every training step as fit sees
// it, and the comparison table reports step time (median and p10-p90 spread), examples per
// second, speedup, compile time, peak tensor memory, final loss and test accuracy, and whether
// the two runs agree within tolerance.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::tools {

// Times each training batch (on_train_batch_begin .. on_train_batch_end).
class StepTimer : public Callback {
 public:
  void on_train_batch_begin(int batch, const Logs& logs) override;
  void on_train_batch_end(int batch, const Logs& logs) override;
  const std::vector<double>& seconds() const { return seconds_; }

 private:
  std::chrono::steady_clock::time_point start_;
  std::vector<double> seconds_;
};

struct TrainRun {
  std::string mode;                                    // "eager", "compiled", "reference"
  std::map<std::string, std::vector<double>> history;  // fit's History: per metric, per epoch
  std::vector<double> step_seconds;
  int64_t batch_size = 0;
  double total_seconds = 0;
  double compile_seconds = 0;  // train-step specialisations (0 for eager)
  int64_t peak_bytes = 0;      // tensor storage high-water mark above the start of training
  double final_loss = 0, test_loss = 0, test_accuracy = 0;
};

// One training run of `model` (compiled with run_eagerly for mode "eager") by fit on (x, y) in
// `mode` ("eager", "compiled" or "reference": ScopedExecutionMode), each step timed by a
// StepTimer added to `options.callbacks`, tensor memory measured, the train step's compile time
// taken (train_step_compile_seconds), then evaluated on (x_test, y_test).
TrainRun fit_and_evaluate(ModelImpl& model, const std::string& mode, const Tensor& x,
                          const Tensor& y, FitOptions options, const Tensor& x_test,
                          const Tensor& y_test);

// Seconds spent compiling `model`'s train step for the batch shapes fit used on (x, y) with
// `batch_size`: the full batch and the last partial one (0 for an eager model's steps).
double train_step_compile_seconds(ModelImpl& model, const Tensor& x, const Tensor& y,
                                  int64_t batch_size);

// Runs agree when the test accuracies differ by at most 0.02 and the final training losses by
// at most 5% (float rounding differs between modes and compounds over epochs).
bool runs_agree(const TrainRun& a, const TrainRun& b);

// The comparison table of `runs` (the first is the baseline of the speedup column).
void print_comparison(std::ostream& os, const std::vector<TrainRun>& runs);

// One training step of a fresh model from `build` (called after seeding with `seed`; adam or
// sgd at `learning_rate`; sparse softmax cross-entropy from logits) on the batch (x, y), written
// as a user would (GradientTape, loss, apply_gradients), compared eagerly and compiled by
// kiln::compare_modes (printed to `os`, named after `name`): step times, compile time, memory
// and the loss's and every updated variable's differences.
ModeComparison compare_train_step(std::ostream& os, const std::string& name,
                                  const std::function<Model()>& build, const std::string& optimizer,
                                  double learning_rate, uint64_t seed, const Tensor& x,
                                  const Tensor& y);

// What `kiln train --mode both` measured: the two training runs and one step compared.
struct TrainComparison {
  std::vector<TrainRun> runs;  // eager, compiled
  ModeComparison step;         // compare_train_step
  bool agree() const { return runs_agree(runs.at(0), runs.at(1)); }
  // kiln::Error when the runs disagree (after the caller has reported them).
  void check_agreement() const;
};

// `kiln train --mode both`: runs `train("eager")` then `train("compiled")` (announced on `os`),
// prints their comparison table and one step of a fresh `build()` model compared by
// compare_train_step on (x, y).
TrainComparison train_both_ways(std::ostream& os,
                                const std::function<TrainRun(const std::string&)>& train,
                                const std::string& name, const std::function<Model()>& build,
                                const std::string& optimizer, double learning_rate, uint64_t seed,
                                const Tensor& x, const Tensor& y);

}  // namespace kiln::tools
