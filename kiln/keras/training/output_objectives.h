// What compile resolved for each output of a model (Keras' CompileLoss and CompileMetrics):
// the output names, each output's loss and loss weight, and its metrics and weighted metrics.
// Resolved once per compile, when the outputs are known; used inside the (eager or traced)
// steps for the losses and on the host for the metrics.
#pragma once

#include <string>
#include <vector>

#include "kiln/keras/training/callback.h"
#include "kiln/keras/training/compile_options.h"

namespace kiln::detail {

class OutputObjectives {
 public:
  OutputObjectives(const CompileOptions& c, std::vector<std::string> names,
                   const std::string& model);
  size_t size() const { return names_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  bool has_loss(size_t output) const { return losses_[output].defined(); }

  struct Values {
    Tensor total;                    // the weighted sum plus `extra` (regularization)
    std::vector<Tensor> per_output;  // loss_weight * loss per output; undefined without loss
  };
  // The losses of one step (eager or traced). `sample_weights` is empty or one per output
  // (undefined entries: unweighted). `extra` terms (the layers' losses) are added to the
  // total. kiln::Error when the model produced another number of outputs.
  Values losses(const std::vector<Tensor>& y_true, const std::vector<Tensor>& y_pred,
                const std::vector<Tensor>& sample_weights, const std::vector<Tensor>& extra) const;

  // Metrics (host side, concrete tensors).
  void reset_metrics();
  void update_metrics(const std::vector<Tensor>& y_true, const std::vector<Tensor>& y_pred,
                      const std::vector<Tensor>& sample_weights);
  // "<metric>" (one output) or "<output>_<metric>", each with `prefix` ("val_").
  void write_metrics(Logs& logs, const std::string& prefix = "") const;
  // The log key of output `o`'s loss: "<output>_loss" (several outputs only; empty for one).
  std::string loss_key(size_t o) const;
  // Every log key in Keras' order (ModelImpl::log_keys).
  std::vector<std::string> log_keys() const;

 private:
  std::string metric_key(size_t o, const Metric& m, bool weighted) const;

  std::string model_;
  std::vector<std::string> names_;
  std::vector<Loss> losses_;
  std::vector<double> weights_;
  std::vector<std::vector<Metric>> metrics_, weighted_metrics_;
};

}  // namespace kiln::detail
