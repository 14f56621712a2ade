// ModelImpl::fit / evaluate / predict / train_on_batch / test_on_batch: Keras' training loop.
// Per batch: the train step (forward under a GradientTape, loss + regularization losses,
// gradients of the trainable weights, one optimizer step) runs as a traced kiln::function
// (or eagerly with run_eagerly); metrics and callbacks run on the host with its results.
#include <fmt/format.h>

#include "frontend/creation.h"
#include "frontend/data/dataset.h"
#include "frontend/function/function.h"
#include "frontend/gradient_tape.h"
#include "frontend/models/model.h"
#include "frontend/ops.h"
#include "frontend/training/callbacks.h"

namespace kiln {
namespace {

// Batch-size-weighted running mean (Keras' loss tracker).
struct RunningMean {
  double total = 0, count = 0;
  void add(double v, double n) { total += v * n, count += n; }
  double result() const { return count > 0 ? total / count : 0; }
};

// The compiled metrics with "accuracy" resolved from the loss, created once per model.
struct MetricSet {
  std::vector<Metric> metrics;
  MetricSet(const CompileOptions& c) {
    for (const Metric& m : c.metrics) metrics.push_back(resolve_metric(m, c.loss));
  }
  void reset() {
    for (Metric& m : metrics) m->reset_state();
  }
  void update(const Tensor& y, const Tensor& y_pred) {
    for (Metric& m : metrics) m->update_state(y, y_pred);
  }
  void write(Logs& logs, const std::string& prefix = "") const {
    for (const Metric& m : metrics) logs[prefix + m->name()] = m->result();
  }
};

void check_xy(const Tensor& x, const Tensor& y, const char* what) {
  if (!x.defined() || !y.defined()) throw Error(fmt::format("{}: x and y must be defined", what));
  if (x.rank() == 0 || y.rank() == 0 || x.shape()[0] != y.shape()[0])
    throw Error(fmt::format("{}: x {} and y {} must have the same number of examples (axis 0)",
                            what, x.shape().to_string(), y.shape().to_string()));
}

Tensor total_loss(ModelImpl& model, const CompileOptions& c, const Tensor& y,
                  const Tensor& y_pred) {
  Tensor loss = c.loss(y, y_pred);
  for (const Tensor& extra : model.losses()) loss = loss + cast(extra, loss.dtype());
  return loss;
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

// A step's results: {loss, y_pred} and y_pred's mask when it has one (a traced step's outputs
// are plain tensors, so the mask travels as a third output and is attached again).
std::vector<Tensor> step_results(const Tensor& loss, const Tensor& y_pred) {
  std::vector<Tensor> out{loss, y_pred};
  if (y_pred.keras_mask().defined()) out.push_back(y_pred.keras_mask());
  return out;
}

std::pair<Tensor, Tensor> loss_and_prediction(const std::vector<Tensor>& results) {
  Tensor y_pred = results[1];
  if (results.size() > 2) y_pred = y_pred.with_keras_mask(results[2]);
  return {results[0], y_pred};
}

// The three steps, written once and run eagerly or traced.
std::vector<Tensor> train_step(ModelImpl& model, const CompileOptions& c, const Tensor& x,
                               const Tensor& y) {
  GradientTape tape;
  Tensor y_pred = model.invoke({x}, /*training=*/true)[0];
  Tensor loss = total_loss(model, c, y, y_pred);
  std::vector<Variable> vars = model.trainable_weights();
  std::vector<Tensor> grads = tape.gradient(loss, vars);
  c.optimizer->apply_gradients(grads, vars);
  return step_results(loss, y_pred);
}

std::vector<Tensor> test_step(ModelImpl& model, const CompileOptions& c, const Tensor& x,
                              const Tensor& y) {
  Tensor y_pred = model.invoke({x}, false)[0];
  return step_results(total_loss(model, c, y, y_pred), y_pred);
}

}  // namespace

// The model's traced steps (Keras' make_train_function and friends).
struct ModelSteps {
  using XY = std::function<std::vector<Tensor>(const Tensor&, const Tensor&)>;
  using X = std::function<Tensor(const Tensor&)>;
  Function<XY> train, test;
  Function<X> predict;
  ModelSteps(ModelImpl& m)
      : train(XY([&m](const Tensor& x, const Tensor& y) {
                return train_step(m, m.compile_options(), x, y);
              }),
              {.name = m.name() + "/train_step"}),
        test(XY([&m](const Tensor& x, const Tensor& y) {
               return test_step(m, m.compile_options(), x, y);
             }),
             {.name = m.name() + "/test_step"}),
        predict(X([&m](const Tensor& x) { return m.invoke({x}, false)[0]; }),
                {.name = m.name() + "/predict_step"}) {}
};

ConcreteFunction ModelImpl::train_step_function(const Tensor& x, const Tensor& y) {
  compile_options();  // throws when not compiled
  if (!steps_) steps_ = std::make_shared<ModelSteps>(*this);
  return steps_->train.concrete(x, y);
}

std::pair<Tensor, Tensor> ModelImpl::run_train_step(const Tensor& x, const Tensor& y) {
  const CompileOptions& c = compile_options();
  if (c.run_eagerly) return loss_and_prediction(train_step(*this, c, x, y));
  if (!steps_) steps_ = std::make_shared<ModelSteps>(*this);
  return loss_and_prediction(steps_->train(x, y));
}

std::pair<Tensor, Tensor> ModelImpl::run_test_step(const Tensor& x, const Tensor& y) {
  const CompileOptions& c = compile_options();
  if (c.run_eagerly) return loss_and_prediction(test_step(*this, c, x, y));
  if (!steps_) steps_ = std::make_shared<ModelSteps>(*this);
  return loss_and_prediction(steps_->test(x, y));
}

Tensor ModelImpl::run_predict_step(const Tensor& x) {
  if (!compiled_ || compiled_->run_eagerly) return invoke({x}, false)[0];
  if (!steps_) steps_ = std::make_shared<ModelSteps>(*this);
  return steps_->predict(x);
}

Logs ModelImpl::train_on_batch(const Tensor& x, const Tensor& y) {
  const CompileOptions& c = compile_options();
  check_xy(x, y, "train_on_batch");
  auto [loss, y_pred] = run_train_step(x, y);
  Logs logs{{"loss", loss.item<double>()}};
  MetricSet m(c);
  m.update(y, y_pred);
  m.write(logs);
  return logs;
}

Logs ModelImpl::test_on_batch(const Tensor& x, const Tensor& y) {
  const CompileOptions& c = compile_options();
  check_xy(x, y, "test_on_batch");
  auto [loss, y_pred] = run_test_step(x, y);
  Logs logs{{"loss", loss.item<double>()}};
  MetricSet m(c);
  m.update(y, y_pred);
  m.write(logs);
  return logs;
}

std::shared_ptr<History> ModelImpl::fit(const Tensor& x_all, const Tensor& y_all, FitOptions o) {
  const CompileOptions& c = compile_options();
  check_xy(x_all, y_all, "fit");
  if (o.epochs < 1 || o.batch_size < 1)
    throw Error(fmt::format("fit: epochs ({}) and batch_size ({}) must be at least 1", o.epochs,
                            o.batch_size));
  Tensor x = x_all, y = y_all;
  std::optional<std::pair<Tensor, Tensor>> val = o.validation_data;
  if (o.validation_split > 0) {
    if (o.validation_split >= 1 || val)
      throw Error(
          fmt::format("fit: validation_split must be in [0, 1) and cannot be combined "
                      "with validation_data (got {})",
                      o.validation_split));
    int64_t n = x_all.shape()[0];
    auto n_val = int64_t(double(n) * o.validation_split);
    if (n_val < 1 || n_val >= n)
      throw Error(fmt::format("fit: validation_split {} of {} examples leaves an empty set",
                              o.validation_split, n));
    // Keras takes the last examples, before any shuffling.
    std::vector<int64_t> head, tail;
    for (int64_t i = 0; i < n; ++i) (i < n - n_val ? head : tail).push_back(i);
    x = data::take_rows(x_all, head);
    y = data::take_rows(y_all, head);
    val = std::make_pair(data::take_rows(x_all, tail), data::take_rows(y_all, tail));
  }
  if (val) check_xy(val->first, val->second, "fit (validation data)");

  int64_t n = x.shape()[0];
  int steps = int((n + o.batch_size - 1) / o.batch_size);
  auto history = std::make_shared<History>();
  std::vector<CallbackPtr> user = o.callbacks;
  user.push_back(history);
  CallbackList cbs(this, user, o.verbose, {{"epochs", o.epochs}, {"steps", steps}});
  MetricSet metrics(c);
  stop_training = false;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_train_begin(logs); });
  for (int epoch = o.initial_epoch; epoch < o.epochs && !stop_training; ++epoch) {
    cbs.each([&](Callback& cb) { cb.on_epoch_begin(epoch, logs); });
    metrics.reset();
    RunningMean loss_mean;
    auto batches = data::batch_indices(n, o.batch_size, o.shuffle, o.seed + uint64_t(epoch));
    for (int b = 0; b < int(batches.size()); ++b) {
      cbs.each([&](Callback& cb) { cb.on_train_batch_begin(b, logs); });
      Tensor xb = data::take_rows(x, batches[size_t(b)]);
      Tensor yb = data::take_rows(y, batches[size_t(b)]);
      auto [loss, y_pred] = run_train_step(xb, yb);
      loss_mean.add(loss.item<double>(), double(batches[size_t(b)].size()));
      metrics.update(yb, y_pred);
      logs = {{"loss", loss_mean.result()}};
      metrics.write(logs);
      cbs.each([&](Callback& cb) { cb.on_train_batch_end(b, logs); });
    }
    if (val) {
      Logs v = evaluate(val->first, val->second, {.batch_size = o.batch_size, .verbose = 0});
      for (const auto& [k, value] : v) logs["val_" + k] = value;
    }
    cbs.each([&](Callback& cb) { cb.on_epoch_end(epoch, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_train_end(logs); });
  return history;
}

Logs ModelImpl::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions o) {
  const CompileOptions& c = compile_options();
  check_xy(x, y, "evaluate");
  int64_t n = x.shape()[0];
  auto batches = data::batch_indices(n, o.batch_size, false, 0);
  CallbackList cbs(this, o.callbacks, o.verbose, {{"steps", int(batches.size())}});
  MetricSet metrics(c);
  RunningMean loss_mean;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_test_begin(logs); });
  for (int b = 0; b < int(batches.size()); ++b) {
    cbs.each([&](Callback& cb) { cb.on_test_batch_begin(b, logs); });
    Tensor xb = data::take_rows(x, batches[size_t(b)]);
    Tensor yb = data::take_rows(y, batches[size_t(b)]);
    auto [loss, y_pred] = run_test_step(xb, yb);
    loss_mean.add(loss.item<double>(), double(batches[size_t(b)].size()));
    metrics.update(yb, y_pred);
    logs = {{"loss", loss_mean.result()}};
    metrics.write(logs);
    cbs.each([&](Callback& cb) { cb.on_test_batch_end(b, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_test_end(logs); });
  return logs;
}

Tensor ModelImpl::predict(const Tensor& x, PredictOptions o) {
  if (!x.defined() || x.rank() == 0)
    throw Error("predict: x must be a tensor with examples along axis 0");
  auto batches = data::batch_indices(x.shape()[0], o.batch_size, false, 0);
  CallbackList cbs(this, o.callbacks, 0, {{"steps", int(batches.size())}});
  std::vector<Tensor> outputs;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_predict_begin(logs); });
  for (int b = 0; b < int(batches.size()); ++b) {
    cbs.each([&](Callback& cb) { cb.on_predict_batch_begin(b, logs); });
    outputs.push_back(run_predict_step(data::take_rows(x, batches[size_t(b)])));
    cbs.each([&](Callback& cb) { cb.on_predict_batch_end(b, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_predict_end(logs); });
  if (outputs.empty()) throw Error("predict: x has no examples (axis 0 is empty)");
  return concat(outputs, 0);
}

}  // namespace kiln
