// The loops behind fit / evaluate / predict, shared by the in-memory entry points (fit.cc)
// and the Dataset ones (fit_dataset.cc): they pull batches from a BatchSource, run the steps,
// keep the loss trackers and metrics, and drive the callbacks. Internal to training/.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/keras/training/callbacks.h"
#include "kiln/keras/training/model_steps.h"

namespace kiln::detail {

// The step lists of the next batch of an epoch, or std::nullopt at its end.
using NextBatch = std::function<std::optional<ModelSteps::Args>()>;

struct BatchSource {
  std::function<NextBatch(int epoch)> epoch;  // the batches of epoch `epoch`
  int steps = 0;                              // batches per epoch; 0 when unknown
};

// Class weights as per-sample weights that multiply the batch's sample weights; an entry per
// output (outputs without weights weigh 1). `class_weights` per output, empty: none.
ModelSteps::Args with_class_weights(ModelSteps::Args b,
                                    const std::vector<std::map<int64_t, double>>& class_weights,
                                    const std::string& caller);

// Keras' fit loop over `train` (epochs, callbacks, metrics); `validate` (optional) gives the
// validation logs at the end of each epoch (keys without "val_").
std::shared_ptr<History> fit_loop(ModelImpl& model, ModelSteps& steps, const BatchSource& train,
                                  const std::function<Logs()>& validate, const FitOptions& o);
Logs evaluate_loop(ModelImpl& model, ModelSteps& steps, const BatchSource& batches,
                   const EvaluateOptions& o);
// `next` gives the inputs of the next batch, or std::nullopt at the end.
std::vector<Tensor> predict_loop(ModelImpl& model,
                                 const std::function<std::optional<Arrays>()>& next, int steps,
                                 const PredictOptions& o);
// The validation logs of fit at each epoch end (empty function without validation data):
// evaluate on the tensors (with fit's batch_size; checked now) or on the Dataset
// (validation_steps batches, or a pass).
std::function<Logs()> validation(ModelImpl& model, ModelSteps& steps,
                                 const std::optional<ValidationData>& val, const FitOptions& o);

// The one output of predict (kiln::Error naming predict_outputs for several).
Tensor single_output(const ModelImpl& model, std::vector<Tensor> outputs);

}  // namespace kiln::detail
