// The training steps `kiln report` draws: the digits MLP and CNN of the model zoo and the
// character LSTM and transformer of `kiln train --model lstm|transformer`, each compiled with
// Adam and sparse softmax cross-entropy on a synthetic, seeded batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace kiln::tools
