// `kiln train --load-model DIR` / `--save-model DIR`: whole saved models (keras/saving/
// saving.h) in the training command. A loaded model keeps its architecture, weights, optimizer
// state and compile configuration; training resumes with fit's initial_epoch (--initial-epoch,
// Keras' meaning: the epochs already done), so `train --epochs 2 --save-model M` then
// `train --load-model M --initial-epoch 2 --epochs 4` ends with the weights of `--epochs 4`.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/kiln.h"

namespace kiln::tools {

// The saved model at `dir`, compiled to run its steps in `mode` ("eager", "compiled" or
// "reference") with the optimizer state it was saved with.
Model load_model_for_training(const std::string& dir, const std::string& mode);

// Writes the trained model to `dir` (replacing a saved model there), then its training step
// for the first batch (batch_size rows) of (x, y) beside it: the traced graph DIR/train_step.kir
// (`kiln run DIR/train_step.kir --model DIR --input 0=x.npy --input 1=y.npy` runs one step from the
// saved state) and the optimized one DIR/train_step.optimized.kir (what the compiled mode runs);
// and says so on stdout.
void save_trained_model(const Model& model, const std::string& dir, const Tensor& x,
                        const Tensor& y, int64_t batch_size);

// The variables a saved model holds, by variable name (the names its traced steps capture):
// its weights, and its optimizer's iterations and slots when it has optimizer state.
std::map<std::string, Tensor> saved_model_variables(const std::string& dir);

}  // namespace kiln::tools
