// The options of `kiln train` (registered in tools/train_command.cc), shared by its two paths:
// the MLP or CNN on digits or MNIST (train_command.cc) and the character language models
// (char_lm_train.cc). An option both paths honour is one field here, one add_option there and
// one use in each path's train_once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::tools {

struct TrainOptions {
  // What is trained, on what, and how.
  std::string model = "mlp";
  std::string dataset;  // "": digits (mlp, cnn) or the default text (language models)
  std::string optimizer = "adam";
  std::optional<double> lr;  // "": the model's default (learning_rate())
  int epochs = 20;
  int64_t batch_size = 32;
  double validation_split = 0;  // mlp, cnn
  uint64_t seed = 0;
  std::string mode = "compiled";  // compiled (alias traced), eager, reference or both
  // The Keras dtype policy the model's layers are built under ("float32", "mixed_bfloat16",
  // "bfloat16", "float64"); a loaded model keeps the policies it was saved with.
  std::string dtype_policy = "float32";
  int verbose = 1;
  // Files: the weights the model starts from and is saved to; a whole saved model to resume
  // from (with the epochs it already did) and to save to (tools/train_model_files.h); the JSON
  // report; the HTML step report (kiln/frontend/function/report.h) of the compiled train step.
  std::string load_weights, save_weights;
  std::string load_model, save_model;
  int initial_epoch = 0;
  std::string json;
  std::string report;

  // lr, else 1e-3 (mlp, cnn) or 3e-3 (the language models).
  double learning_rate() const {
    return lr.value_or(model == "mlp" || model == "cnn" ? 1e-3 : 3e-3);
  }
  // The execution mode of a single run (--mode other than both): "traced" is "compiled".
  std::string run_mode() const { return mode == "traced" ? "compiled" : mode; }
};

}  // namespace kiln::tools
