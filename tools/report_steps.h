// The training steps `kiln report` draws: the digits MLP and CNN of the model zoo and the
// character LSTM and transformer of `kiln train --model lstm|transformer`, each compiled with
// Adam and sparse softmax cross-entropy on a synthetic, seeded batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/frontend/function/compare_modes.h"
#include "kiln/keras/models/model.h"

namespace kiln::tools {

struct ReportStep {
  Model model;
  Tensor x, y;
  ConcreteFunction step;  // the model's traced train step for (x, y)
  CompiledForm form;      // its compiled form for x's and y's shapes
  void run() const;       // one training step on (x, y), compiled
};

// kind: "mlp", "cnn" (8x8 digits shapes), "lstm" or "transformer" (windows of `seq_len`
// characters of a 32-character vocabulary); kiln::Error for another kind.
ReportStep make_report_step(const std::string& kind, int64_t batch_size, int64_t seq_len = 32);

// The kinds make_report_step accepts.
std::vector<std::string> report_step_kinds();

// `kiln train --report FILE`: writes the HTML step report of `model`'s (compiled) train step on
// (x, y), the run's first batch, its steps timed; with `comparison` (--mode both) the eager
// against compiled step charted too. Prints "wrote FILE: step T ms (mean of N calls)".
void write_train_step_report(Model& model, const Tensor& x, const Tensor& y,
                             const std::string& path, const std::string& title,
                             const ModeComparison* comparison);

}  // namespace kiln::tools
