#include "kiln/keras/training/output_objectives.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"

namespace kiln::detail {

OutputObjectives::OutputObjectives(const CompileOptions& c, std::vector<std::string> names,
                                   const std::string& model)
    : model_(model), names_(std::move(names)) {
  losses_ = c.loss.for_outputs(names_, model);
  weights_ = c.loss_weights.for_outputs(names_, model);
  metrics_ = c.metrics.for_outputs(names_, losses_, model);
  weighted_metrics_ = c.weighted_metrics.for_outputs(names_, losses_, model);
  // Two metrics logging under one key would overwrite each other.
  std::vector<std::string> keys;
  for (size_t o = 0; o < size(); ++o)
    for (bool weighted : {false, true})
      for (const Metric& m : weighted ? weighted_metrics_[o] : metrics_[o]) {
        std::string key = metric_key(o, m, weighted);
        if (key == "loss" || key == loss_key(o) ||
            std::find(keys.begin(), keys.end(), key) != keys.end())
          throw Error(fmt::format(
              "compile (model \"{}\"): two metrics (or a metric and a loss) would both be logged "
              "as \"{}\"; give the metrics distinct names",
              model, key));
        keys.push_back(key);
      }
}

OutputObjectives::Values OutputObjectives::losses(const std::vector<Tensor>& y_true,
                                                  const std::vector<Tensor>& y_pred,
                                                  const std::vector<Tensor>& sample_weights,
                                                  const std::vector<Tensor>& extra) const {
  if (y_pred.size() != size())
    throw Error(fmt::format("model \"{}\" returned {} outputs, but it was compiled for {} ({})",
                            model_, y_pred.size(), size(), fmt::join(names_, ", ")));
  Values v;
  v.per_output.resize(size());
  for (size_t o = 0; o < size(); ++o) {
    if (!losses_[o].defined()) continue;
    Tensor w = sample_weights.empty() ? Tensor() : sample_weights[o];
    Tensor value = losses_[o](y_true[o], y_pred[o], w);
    if (weights_[o] != 1.0) value = value * weights_[o];
    v.per_output[o] = value;
    v.total = v.total.defined() ? v.total + cast(value, v.total.dtype()) : value;
  }
  for (const Tensor& e : extra) v.total = v.total + cast(e, v.total.dtype());
  return v;
}

void OutputObjectives::reset_metrics() {
  for (size_t o = 0; o < size(); ++o) {
    for (Metric& m : metrics_[o]) m->reset_state();
    for (Metric& m : weighted_metrics_[o]) m->reset_state();
  }
}

void OutputObjectives::update_metrics(const std::vector<Tensor>& y_true,
                                      const std::vector<Tensor>& y_pred_in,
                                      const std::vector<Tensor>& sample_weights) {
  // Keras' metrics compute in float32: bfloat16 outputs (mixed_bfloat16) are cast first.
  std::vector<Tensor> y_pred = y_pred_in;
  for (Tensor& p : y_pred)
    if (p.defined() && p.dtype() == DType::bf16)
      p = cast(p, DType::f32).with_keras_mask(p.keras_mask());
  for (size_t o = 0; o < size(); ++o) {
    for (Metric& m : metrics_[o]) m->update_state(y_true[o], y_pred[o]);
    Tensor w = sample_weights.empty() ? Tensor() : sample_weights[o];
    for (Metric& m : weighted_metrics_[o]) m->update_state(y_true[o], y_pred[o], w);
  }
}

std::string OutputObjectives::metric_key(size_t o, const Metric& m, bool weighted) const {
  std::string name = m->name();
  // A weighted metric named like an unweighted one of the same output: "weighted_<name>".
  if (weighted)
    for (const Metric& u : metrics_[o])
      if (u->name() == name) name = "weighted_" + name;
  return size() == 1 ? name : names_[o] + "_" + name;
}

std::string OutputObjectives::loss_key(size_t o) const {
  return size() == 1 ? std::string() : names_[o] + "_loss";
}

std::vector<std::string> OutputObjectives::log_keys() const {
  std::vector<std::string> keys = {"loss"};
  if (size() > 1)
    for (size_t o = 0; o < size(); ++o)
      if (has_loss(o)) keys.push_back(loss_key(o));
  for (size_t o = 0; o < size(); ++o)
    for (const Metric& m : metrics_[o]) keys.push_back(metric_key(o, m, false));
  for (size_t o = 0; o < size(); ++o)
    for (const Metric& m : weighted_metrics_[o]) keys.push_back(metric_key(o, m, true));
  return keys;
}

void OutputObjectives::write_metrics(Logs& logs, const std::string& prefix) const {
  for (size_t o = 0; o < size(); ++o) {
    for (const Metric& m : metrics_[o]) logs[prefix + metric_key(o, m, false)] = m->result();
    for (const Metric& m : weighted_metrics_[o])
      logs[prefix + metric_key(o, m, true)] = m->result();
  }
}

}  // namespace kiln::detail
