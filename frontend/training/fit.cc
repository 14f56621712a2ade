// ModelImpl::fit / evaluate / predict / train_on_batch / test_on_batch: Keras' training loop.
// Per batch: the train step (forward under a GradientTape, the per-output losses, gradients of
// the trainable weights, one optimizer step) runs as a traced kiln::function (or eagerly with
// run_eagerly; training/model_steps.cc); metrics and callbacks run on the host with its
// results. Inputs, targets and sample weights are lists in the model's input/output order
// from here on; class weights become sample weights per batch.
#include <fmt/format.h>

#include <cmath>

#include "frontend/creation.h"
#include "frontend/data/dataset.h"
#include "frontend/models/model.h"
#include "frontend/ops.h"
#include "frontend/training/callbacks.h"
#include "frontend/training/model_steps.h"
#include "frontend/training/sample_weights.h"

namespace kiln {
namespace {

// Batch-size-weighted running mean (Keras' loss trackers).
struct RunningMean {
  double total = 0, count = 0;
  void add(double v, double n) { total += v * n, count += n; }
  double result() const { return count > 0 ? total / count : 0; }
};

// "loss" and "<output>_loss" over the batches of one loop.
struct LossTrackers {
  RunningMean total;
  std::vector<RunningMean> per_output;
  void add(const ModelImpl::StepResult& r, double batch) {
    total.add(r.loss.item<double>(), batch);
    per_output.resize(r.output_losses.size());
    for (size_t o = 0; o < r.output_losses.size(); ++o)
      if (r.output_losses[o].defined()) per_output[o].add(r.output_losses[o].item<double>(), batch);
  }
};

// The logs of a loop so far: losses, then metrics, each with `prefix`.
Logs loop_logs(const LossTrackers& losses, const detail::OutputObjectives& objectives,
               const std::string& prefix = "") {
  Logs logs{{prefix + "loss", losses.total.result()}};
  for (size_t o = 0; o < objectives.size(); ++o)
    if (objectives.size() > 1 && objectives.has_loss(o))
      logs[prefix + objectives.loss_key(o)] = losses.per_output[o].result();
  objectives.write_metrics(logs, prefix);
  return logs;
}

struct CallbackList {
  std::vector<CallbackPtr> all;
  CallbackList(ModelImpl* model, std::vector<CallbackPtr> user, int verbose,
               std::map<std::string, int> params) {
    all = std::move(user);
    if (verbose) all.insert(all.begin(), std::make_shared<ProgbarLogger>());
    params["verbose"] = verbose;
    for (auto& cb : all) {
      cb->set_model(model);
      cb->set_params(params);
    }
  }
  template <typename F>
  void each(F&& f) {
    for (auto& cb : all) f(*cb);
  }
};

// All examples of a loop as lists in the model's order, with the class weights to apply.
struct LoopData {
  ModelSteps::Args lists;
  std::vector<std::map<int64_t, double>> class_weights;  // per output; empty: none
  int64_t size = 0;

  LoopData(ModelSteps& s, const Arrays& x, const Arrays& y, const Arrays& w, const ClassWeight& cw,
           const std::string& caller) {
    lists = s.args(x, y, w, caller);
    size = Arrays(lists.xs).num_examples(caller + ": x");
    int64_t ny = Arrays(lists.ys).num_examples(caller + ": y");
    if (ny != size)
      throw Error(
          fmt::format("{}: x ({}) and y ({}) must have the same number of examples "
                      "(axis 0)",
                      caller, x.describe(), y.describe()));
    for (size_t o = 0; o < lists.sws.size(); ++o) {
      const Tensor& t = lists.sws[o];
      if (t.rank() == 0 || t.shape()[0] != size)
        throw Error(fmt::format("{}: sample_weight {} must have one weight per example ({})",
                                caller, t.shape().to_string(), size));
      for (double v : t.to_vector<double>())
        if (!(std::isfinite(v) && v >= 0))
          throw Error(fmt::format("{}: sample_weight holds {}; weights must be finite and >= 0",
                                  caller, v));
    }
    if (!cw.empty()) class_weights = cw.for_outputs(s.output_names(lists.ys.size()), caller);
  }

  // The step lists of examples `rows`; class weights multiply the sample weights.
  ModelSteps::Args batch(const std::vector<int64_t>& rows, const std::string& caller) const {
    ModelSteps::Args b;
    Tensor index = tensor<int64_t>(rows);
    for (const Tensor& t : lists.xs) b.xs.push_back(gather(t, index, 0));
    for (const Tensor& t : lists.ys) b.ys.push_back(gather(t, index, 0));
    for (const Tensor& t : lists.sws) b.sws.push_back(gather(t, index, 0));
    return with_class_weights(std::move(b), caller);
  }

  ModelSteps::Args with_class_weights(ModelSteps::Args b, const std::string& caller) const {
    if (class_weights.empty()) return b;
    if (b.sws.empty()) b.sws.resize(b.ys.size());
    for (size_t o = 0; o < b.ys.size(); ++o) {
      Tensor w = b.sws[o];
      if (!class_weights[o].empty()) {
        Tensor c = detail::class_sample_weights(b.ys[o], class_weights[o], caller);
        if (w.defined() && w.rank() < c.rank())
          w = detail::aligned_sample_weights(caller, w, c);
        else if (w.defined() && c.rank() < w.rank())
          c = detail::aligned_sample_weights(caller, c, w);
        w = w.defined() ? cast(w, DType::f32) * c : c;
      }
      // Outputs without weights weigh 1 (a list of weights needs an entry per output).
      b.sws[o] = w.defined() ? w : ones({b.ys[o].shape()[0]}, DType::f32);
    }
    return b;
  }
};

}  // namespace

Logs ModelImpl::train_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight,
                               const ClassWeight& class_weight) {
  ModelSteps& s = ModelSteps::of(*this);
  LoopData data(s, x, y, sample_weight, class_weight, "train_on_batch");
  ModelSteps::Args a = data.with_class_weights(data.lists, "train_on_batch");
  StepResult r = s.run(true, a);
  auto& objectives = s.objectives(r.y_pred.size());
  objectives.reset_metrics();
  objectives.update_metrics(a.ys, r.y_pred, a.sws);
  LossTrackers losses;
  losses.add(r, 1);
  return loop_logs(losses, objectives);
}

Logs ModelImpl::test_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight) {
  ModelSteps& s = ModelSteps::of(*this);
  LoopData data(s, x, y, sample_weight, {}, "test_on_batch");
  StepResult r = s.run(false, data.lists);
  auto& objectives = s.objectives(r.y_pred.size());
  objectives.reset_metrics();
  objectives.update_metrics(data.lists.ys, r.y_pred, data.lists.sws);
  LossTrackers losses;
  losses.add(r, 1);
  return loop_logs(losses, objectives);
}

std::shared_ptr<History> ModelImpl::fit(const Arrays& x_all, const Arrays& y_all, FitOptions o) {
  ModelSteps& s = ModelSteps::of(*this);
  if (o.epochs < 1 || o.batch_size < 1)
    throw Error(fmt::format("fit: epochs ({}) and batch_size ({}) must be at least 1", o.epochs,
                            o.batch_size));
  Arrays x = x_all, y = y_all, w = o.sample_weight;
  std::optional<ValidationData> val = o.validation_data;
  if (o.validation_split > 0) {
    if (o.validation_split >= 1 || val)
      throw Error(
          fmt::format("fit: validation_split must be in [0, 1) and cannot be combined "
                      "with validation_data (got {})",
                      o.validation_split));
    int64_t n = x_all.num_examples("fit: x");
    auto n_val = int64_t(double(n) * o.validation_split);
    if (n_val < 1 || n_val >= n)
      throw Error(fmt::format("fit: validation_split {} of {} examples leaves an empty set",
                              o.validation_split, n));
    // Keras takes the last examples, before any shuffling.
    std::vector<int64_t> head, tail;
    for (int64_t i = 0; i < n; ++i) (i < n - n_val ? head : tail).push_back(i);
    x = x_all.take_rows(head);
    y = y_all.take_rows(head);
    if (!w.empty()) w = o.sample_weight.take_rows(head);
    val.emplace(x_all.take_rows(tail), y_all.take_rows(tail),
                o.sample_weight.empty() ? Arrays() : o.sample_weight.take_rows(tail));
  }
  LoopData data(s, x, y, w, o.class_weight, "fit");
  if (val) LoopData(s, val->x, val->y, val->sample_weight, {}, "fit (validation data)");

  int steps = int((data.size + o.batch_size - 1) / o.batch_size);
  auto history = std::make_shared<History>();
  std::vector<CallbackPtr> user = o.callbacks;
  user.push_back(history);
  CallbackList cbs(this, user, o.verbose, {{"epochs", o.epochs}, {"steps", steps}});
  stop_training = false;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_train_begin(logs); });
  for (int epoch = o.initial_epoch; epoch < o.epochs && !stop_training; ++epoch) {
    cbs.each([&](Callback& cb) { cb.on_epoch_begin(epoch, logs); });
    LossTrackers losses;
    auto batches =
        data::batch_indices(data.size, o.batch_size, o.shuffle, o.seed + uint64_t(epoch));
    for (int b = 0; b < int(batches.size()); ++b) {
      cbs.each([&](Callback& cb) { cb.on_train_batch_begin(b, logs); });
      ModelSteps::Args a = data.batch(batches[size_t(b)], "fit");
      StepResult r = s.run(true, a);
      auto& objectives = s.objectives(r.y_pred.size());
      if (b == 0) objectives.reset_metrics();  // (resolved by the first step)
      losses.add(r, double(batches[size_t(b)].size()));
      objectives.update_metrics(a.ys, r.y_pred, a.sws);
      logs = loop_logs(losses, objectives);
      cbs.each([&](Callback& cb) { cb.on_train_batch_end(b, logs); });
    }
    if (val) {
      Logs v =
          evaluate(val->x, val->y,
                   {.batch_size = o.batch_size, .verbose = 0, .sample_weight = val->sample_weight});
      for (const auto& [k, value] : v) logs["val_" + k] = value;
    }
    cbs.each([&](Callback& cb) { cb.on_epoch_end(epoch, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_train_end(logs); });
  return history;
}

Logs ModelImpl::evaluate(const Arrays& x, const Arrays& y, EvaluateOptions o) {
  ModelSteps& s = ModelSteps::of(*this);
  LoopData data(s, x, y, o.sample_weight, {}, "evaluate");
  auto batches = data::batch_indices(data.size, o.batch_size, false, 0);
  CallbackList cbs(this, o.callbacks, o.verbose, {{"steps", int(batches.size())}});
  LossTrackers losses;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_test_begin(logs); });
  for (int b = 0; b < int(batches.size()); ++b) {
    cbs.each([&](Callback& cb) { cb.on_test_batch_begin(b, logs); });
    ModelSteps::Args a = data.batch(batches[size_t(b)], "evaluate");
    StepResult r = s.run(false, a);
    auto& objectives = s.objectives(r.y_pred.size());
    if (b == 0) objectives.reset_metrics();
    losses.add(r, double(batches[size_t(b)].size()));
    objectives.update_metrics(a.ys, r.y_pred, a.sws);
    logs = loop_logs(losses, objectives);
    cbs.each([&](Callback& cb) { cb.on_test_batch_end(b, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_test_end(logs); });
  return logs;
}

std::vector<Tensor> ModelImpl::predict_outputs(const Arrays& x, PredictOptions o) {
  if (x.empty()) throw Error("predict: x must be a tensor with examples along axis 0");
  int64_t n = x.num_examples("predict: x");
  if (n == 0) throw Error("predict: x has no examples (axis 0 is empty)");
  auto batches = data::batch_indices(n, o.batch_size, false, 0);
  CallbackList cbs(this, o.callbacks, 0, {{"steps", int(batches.size())}});
  std::vector<std::vector<Tensor>> outputs;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_predict_begin(logs); });
  for (int b = 0; b < int(batches.size()); ++b) {
    cbs.each([&](Callback& cb) { cb.on_predict_batch_begin(b, logs); });
    std::vector<Tensor> y = run_predict_step(x.take_rows(batches[size_t(b)]));
    outputs.resize(y.size());
    for (size_t i = 0; i < y.size(); ++i) outputs[i].push_back(y[i]);
    cbs.each([&](Callback& cb) { cb.on_predict_batch_end(b, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_predict_end(logs); });
  std::vector<Tensor> out;
  for (const auto& parts : outputs) out.push_back(concat(parts, 0));
  return out;
}

Tensor ModelImpl::predict(const Arrays& x, PredictOptions o) {
  std::vector<Tensor> out = predict_outputs(x, std::move(o));
  if (out.size() != 1)
    throw Error(
        fmt::format("predict: model \"{}\" has {} outputs; use predict_outputs for one "
                    "tensor per output",
                    name(), out.size()));
  return out[0];
}

}  // namespace kiln
