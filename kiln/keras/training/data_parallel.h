// fit's data-parallel train step (FitOptions::data_parallel; docs/distributed.md). Internal
// to training/.
//
// Every rank pulls the same global batches (the same data, shuffled with the same seed). For a
// global batch of B rows, rank r of N trains on its rows distributed::shard_of(B, r, N) with
// gradient_scale = rows / B; the step sums the scaled gradients over the ranks (all_reduce), so
// every rank applies the update of the global batch. A rank without rows (B < N) runs the step
// on one row with scale 0. The step's results are made those of the global batch: the losses
// summed with the same shares, the predictions (and masks) gathered in rank order, so losses,
// metrics and callbacks see the same values on every rank.
//
// At the first step: the ranks' descriptions (model variables, optimizer, data shapes,
// batches per epoch, a checksum of the first batch) are compared (kiln::Error naming both
// ranks when they differ), then rank 0's model weights and optimizer variables are broadcast.
#pragma once

#include <string>

#include "kiln/keras/training/model_steps.h"

namespace kiln::detail {

class DataParallel {
 public:
  // Joins kiln::distributed (distributed::initialize). `run_description` names what every rank
  // must agree on besides the model and the data (epochs, batches per epoch).
  DataParallel(ModelImpl& model, ModelSteps& steps, std::string run_description);
  // One training step (or, with !training, one test step: evaluate(data_parallel)) on this
  // rank's share of the global batch `global`; the results are those of the global batch. A
  // test step neither checks the ranks nor broadcasts weights: the ranks must hold the same
  // weights already (as after a data-parallel fit).
  ModelImpl::StepResult run(const ModelSteps::Args& global, bool training = true);

 private:
  void start(const ModelSteps::Args& global, const ModelSteps::Args& local);

  ModelImpl& model_;
  ModelSteps& steps_;
  std::string run_description_;
  bool started_ = false;
};

}  // namespace kiln::detail
