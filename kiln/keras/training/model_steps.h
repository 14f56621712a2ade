// The traced steps of a compiled model (Keras' make_train_function and friends) and the
// per-compile state they share: the resolved OutputObjectives. Internal to training/.
//
// The train and test steps take three lists: the inputs, the targets and the per-output sample
// weights (empty when there are none), and return [total loss, the weighted loss of each
// output with a loss (several outputs only), every prediction, the mask of every prediction
// that has one]. A Layout recorded whenever a step body runs says which entries are present.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/function/function.h"
#include "kiln/frontend/variable.h"
#include "kiln/keras/models/model.h"
#include "kiln/keras/training/output_objectives.h"

namespace kiln {

struct ModelSteps {
  using Lists = std::function<std::vector<Tensor>(
      const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&)>;
  using Inputs = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  struct Layout {
    std::vector<bool> has_loss, has_mask;  // per output
  };

  explicit ModelSteps(ModelImpl& m);
  // The model's steps, created on first use (they belong to one compile).
  static ModelSteps& of(ModelImpl& m);

  // The objectives for a model with `outputs` outputs (named by output_names(), else
  // "output_0", ...); resolved on first use. kiln::Error when `outputs` changes.
  detail::OutputObjectives& objectives(size_t outputs);
  // The names of `n` inputs / outputs as matched against Arrays given by name.
  std::vector<std::string> input_names(size_t n) const;
  std::vector<std::string> output_names(size_t n) const;

  // The lists of one step from Arrays; `w` is empty or gives weights per output (one tensor
  // serves every output). kiln::Error naming what was given and what was expected.
  struct Args {
    std::vector<Tensor> xs, ys, sws;
  };
  Args args(const Arrays& x, const Arrays& y, const Arrays& w, const std::string& caller) const;
  std::vector<Tensor> inputs(const Arrays& x, const std::string& caller) const;
  // Runs the train or test step (eagerly with run_eagerly, else traced). With
  // `data_parallel`, the train step scales the loss by gradient_scale before taking gradients
  // and sums every gradient over the ranks with all_reduce (training/data_parallel.h).
  ModelImpl::StepResult run(bool training, const Args& a, bool data_parallel = false);

  ModelImpl& model;
  // train_parallel: the data-parallel train step (its own traces: it has all_reduce nodes).
  Function<Lists> train, train_parallel, test;
  Function<Inputs> predict;
  // This rank's share of the global batch (rows here / rows of the global batch), a float64
  // scalar the data-parallel step reads like the learning rate (no retrace when it changes).
  Variable gradient_scale;
  Layout train_layout, test_layout;
  std::optional<detail::OutputObjectives> resolved;
};

}  // namespace kiln
