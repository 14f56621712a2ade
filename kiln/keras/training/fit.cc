// ModelImpl::fit / evaluate / predict / train_on_batch / test_on_batch on tensors (Keras'
// arrays), and the loops they share with the Dataset forms (fit_dataset.cc). Per batch the
// train step (forward under a GradientTape, the per-output losses, gradients, one optimizer
// step) runs as a traced kiln::function, or eagerly with run_eagerly (model_steps.cc); metrics
// and callbacks run on the host with its results. Inputs, targets and sample weights are
// lists in the model's input/output order from here on; class weights become sample weights
// per batch.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kiln/distributed/distributed.h"
#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/data/dataset.h"
#include "kiln/keras/models/model.h"
#include "kiln/keras/training/data_parallel.h"
#include "kiln/keras/training/fit_loops.h"
#include "kiln/keras/training/sample_weights.h"
#include "kiln/runtime/log.h"

namespace kiln {
namespace detail {
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

// The logs of a loop so far: losses, then metrics.
Logs loop_logs(const LossTrackers& losses, const OutputObjectives& objectives) {
  Logs logs{{"loss", losses.total.result()}};
  for (size_t o = 0; o < objectives.size(); ++o)
    if (objectives.size() > 1 && objectives.has_loss(o))
      logs[objectives.loss_key(o)] = losses.per_output[o].result();
  objectives.write_metrics(logs);
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

// One pass of `next`: steps, losses and metrics; `on_batch_begin/end(b, logs)` around each.
// `parallel`: the data-parallel step (train or test) on this rank's share of each batch.
template <typename Begin, typename End>
Logs run_batches(ModelSteps& s, bool training, const NextBatch& next, Begin&& on_begin,
                 End&& on_end, DataParallel* parallel = nullptr) {
  LossTrackers losses;
  Logs logs;
  for (int b = 0;; ++b) {
    std::optional<ModelSteps::Args> a = next();
    if (!a) break;
    on_begin(b, logs);
    ModelImpl::StepResult r = parallel ? parallel->run(*a, training) : s.run(training, *a);
    OutputObjectives& objectives = s.objectives(r.y_pred.size());
    if (b == 0) objectives.reset_metrics();  // (resolved by the first step)
    losses.add(r, double(r.y_pred[0].shape()[0]));
    objectives.update_metrics(a->ys, r.y_pred, a->sws);
    logs = loop_logs(losses, objectives);
    on_end(b, logs);
  }
  return logs;
}

// Which batches of which pass each epoch of an array fit takes (Keras 3's EpochIterator on
// arrays). Without steps_per_epoch an epoch is pass `epoch`, whole. With it, epochs take
// steps_per_epoch batches each from a pass that continues across epochs; an epoch that reaches
// the end of the pass stops there (short, with a warning), and the next epoch starts the next
// pass. Computed from the epoch number alone, so fit(initial_epoch=e) resumes exactly where
// an uninterrupted fit would be.
struct ArrayPasses {
  int64_t per_pass = 0;          // batches in one pass over the data
  int64_t steps_per_epoch = -1;  // -1: an epoch is one pass
  struct Epoch {
    int64_t pass = 0, first = 0, count = 0;  // batches [first, first + count) of `pass`
  };
  Epoch epoch(int epoch) const {
    if (steps_per_epoch < 1) return {epoch, 0, per_pass};
    Epoch e;
    for (int k = 0;; ++k) {
      e.count = std::min(steps_per_epoch, per_pass - e.first);
      if (k == epoch) return e;
      e.first += e.count;
      if (e.first >= per_pass) ++e.pass, e.first = 0;
    }
  }
};

// All examples as lists in the model's order, with the class weights to apply.
struct ArrayData {
  ModelSteps::Args lists;
  std::vector<std::map<int64_t, double>> class_weights;  // per output; empty: none
  int64_t size = 0;

  ArrayData(ModelSteps& s, const Arrays& x, const Arrays& y, const Arrays& w, const ClassWeight& cw,
            const std::string& caller) {
    lists = s.args(x, y, w, caller);
    size = Arrays(lists.xs).num_examples(caller + ": x");
    if (Arrays(lists.ys).num_examples(caller + ": y") != size)
      throw Error(
          fmt::format("{}: x ({}) and y ({}) must have the same number of examples "
                      "(axis 0)",
                      caller, x.describe(), y.describe()));
    for (const Tensor& t : lists.sws) {
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

  // Batches of `batch_size`, shuffled per pass with seed + pass when `shuffle`. An epoch is
  // one pass (pass = epoch), or with `steps_per_epoch` >= 1 that many batches of a pass that
  // continues across epochs (ArrayPasses).
  BatchSource batches(int64_t batch_size, bool shuffle, uint64_t seed, std::string caller,
                      int64_t steps_per_epoch = -1) const {
    BatchSource src;
    const int64_t per_pass = (size + batch_size - 1) / batch_size;
    src.steps = int(steps_per_epoch >= 1 ? steps_per_epoch : per_pass);
    const ArrayPasses passes{per_pass, steps_per_epoch};
    src.epoch = [this, batch_size, shuffle, seed, caller, passes](int epoch) -> NextBatch {
      const ArrayPasses::Epoch e = passes.epoch(epoch);
      auto order = std::make_shared<std::vector<std::vector<int64_t>>>(
          data::batch_indices(size, batch_size, shuffle, seed + uint64_t(e.pass)));
      auto i = std::make_shared<int64_t>(e.first);
      const int64_t end = e.first + e.count;
      return [this, order, i, end, e, epoch, passes, caller]() -> std::optional<ModelSteps::Args> {
        if (*i >= end) {
          if (e.count < passes.steps_per_epoch && *i == end) {
            log_warning(fmt::format(
                "{}: the data ran out after {} of steps_per_epoch={} batches of epoch {} ({} "
                "batches per pass); the epoch ends early and the next one starts a new pass, as "
                "in Keras 3. Give steps_per_epoch dividing the {} batches to avoid short epochs",
                caller, e.count, passes.steps_per_epoch, epoch + 1, passes.per_pass,
                passes.per_pass));
            ++*i;  // warn once
          }
          return std::nullopt;
        }
        return batch((*order)[size_t((*i)++)], caller);
      };
    };
    return src;
  }

  ModelSteps::Args batch(const std::vector<int64_t>& rows, const std::string& caller) const {
    ModelSteps::Args b;
    Tensor index = tensor<int64_t>(rows);
    for (const Tensor& t : lists.xs) b.xs.push_back(gather(t, index, 0));
    for (const Tensor& t : lists.ys) b.ys.push_back(gather(t, index, 0));
    for (const Tensor& t : lists.sws) b.sws.push_back(gather(t, index, 0));
    return with_class_weights(std::move(b), class_weights, caller);
  }
};

void require_arrays_options(int64_t steps, const char* name, const std::string& caller) {
  if (steps != -1)
    throw Error(
        fmt::format("{}: {} ({}) applies to Dataset input; with tensors an epoch is one "
                    "pass over them (use batch_size)",
                    caller, name, steps));
}

}  // namespace

ModelSteps::Args with_class_weights(ModelSteps::Args b,
                                    const std::vector<std::map<int64_t, double>>& class_weights,
                                    const std::string& caller) {
  if (class_weights.empty()) return b;
  if (b.sws.empty()) b.sws.resize(b.ys.size());
  for (size_t o = 0; o < b.ys.size(); ++o) {
    Tensor w = b.sws[o];
    if (!class_weights[o].empty()) {
      Tensor c = class_sample_weights(b.ys[o], class_weights[o], caller);
      if (w.defined() && w.rank() < c.rank())
        w = aligned_sample_weights(caller, w, c);
      else if (w.defined() && c.rank() < w.rank())
        c = aligned_sample_weights(caller, c, w);
      w = w.defined() ? cast(w, DType::f32) * c : c;
    }
    // Outputs without weights weigh 1 (a list of weights needs an entry per output).
    b.sws[o] = w.defined() ? w : ones({b.ys[o].shape()[0]}, DType::f32);
  }
  return b;
}

std::shared_ptr<History> fit_loop(ModelImpl& model, ModelSteps& s, const BatchSource& train,
                                  const std::function<Logs()>& validate, const FitOptions& o) {
  if (o.epochs < 1) throw Error(fmt::format("fit: epochs ({}) must be at least 1", o.epochs));
  std::optional<DataParallel> parallel;
  if (o.data_parallel)
    parallel.emplace(model, s,
                     fmt::format("epochs {} to {}, {} batches per epoch", o.initial_epoch + 1,
                                 o.epochs, train.steps));
  auto history = std::make_shared<History>();
  std::vector<CallbackPtr> user = o.callbacks;
  user.push_back(history);
  // Data parallel: rank 0 alone shows progress (every rank sees the same logs).
  const int verbose = distributed::is_output_rank() ? o.verbose : 0;
  CallbackList cbs(&model, user, verbose, {{"epochs", o.epochs}, {"steps", train.steps}});
  model.stop_training = false;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_train_begin(logs); });
  for (int epoch = o.initial_epoch; epoch < o.epochs && !model.stop_training; ++epoch) {
    cbs.each([&](Callback& cb) { cb.on_epoch_begin(epoch, logs); });
    logs = run_batches(
        s, true, train.epoch(epoch),
        [&](int b, const Logs& l) {
          cbs.each([&](Callback& cb) { cb.on_train_batch_begin(b, l); });
        },
        [&](int b, const Logs& l) { cbs.each([&](Callback& cb) { cb.on_train_batch_end(b, l); }); },
        parallel ? &*parallel : nullptr);
    if (validate)
      for (const auto& [k, value] : validate()) logs["val_" + k] = value;
    cbs.each([&](Callback& cb) { cb.on_epoch_end(epoch, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_train_end(logs); });
  return history;
}

Logs evaluate_loop(ModelImpl& model, ModelSteps& s, const BatchSource& batches,
                   const EvaluateOptions& o) {
  std::optional<DataParallel> parallel;
  if (o.data_parallel) parallel.emplace(model, s, "evaluate");
  // Data parallel: rank 0 alone shows progress (every rank sees the same logs).
  const int verbose = !o.data_parallel || distributed::is_output_rank() ? o.verbose : 0;
  CallbackList cbs(&model, o.callbacks, verbose, {{"steps", batches.steps}});
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_test_begin(logs); });
  logs = run_batches(
      s, false, batches.epoch(0),
      [&](int b, const Logs& l) { cbs.each([&](Callback& cb) { cb.on_test_batch_begin(b, l); }); },
      [&](int b, const Logs& l) { cbs.each([&](Callback& cb) { cb.on_test_batch_end(b, l); }); },
      parallel ? &*parallel : nullptr);
  cbs.each([&](Callback& cb) { cb.on_test_end(logs); });
  return logs;
}

std::vector<Tensor> predict_loop(ModelImpl& model,
                                 const std::function<std::optional<Arrays>()>& next, int steps,
                                 const PredictOptions& o) {
  CallbackList cbs(&model, o.callbacks, 0, {{"steps", steps}});
  std::vector<std::vector<Tensor>> outputs;
  Logs logs;
  cbs.each([&](Callback& cb) { cb.on_predict_begin(logs); });
  for (int b = 0;; ++b) {
    std::optional<Arrays> x = next();
    if (!x) break;
    cbs.each([&](Callback& cb) { cb.on_predict_batch_begin(b, logs); });
    std::vector<Tensor> y = model.run_predict_step(*x);
    outputs.resize(y.size());
    for (size_t i = 0; i < y.size(); ++i) outputs[i].push_back(y[i]);
    cbs.each([&](Callback& cb) { cb.on_predict_batch_end(b, logs); });
  }
  cbs.each([&](Callback& cb) { cb.on_predict_end(logs); });
  if (outputs.empty()) throw Error("predict: x has no examples (axis 0 is empty)");
  std::vector<Tensor> out;
  for (const auto& parts : outputs) out.push_back(concat(parts, 0));
  return out;
}

std::function<Logs()> validation(ModelImpl& model, ModelSteps& s,
                                 const std::optional<ValidationData>& val, const FitOptions& o) {
  if (!val) return {};
  if (val->dataset) {
    auto ds = val->dataset;
    const int64_t steps = o.validation_steps;
    const bool parallel = o.data_parallel;
    return [&model, ds, steps, parallel] {
      return model.evaluate(*ds, {.verbose = 0, .steps = steps, .data_parallel = parallel});
    };
  }
  // Checked now, not after the first epoch.
  ArrayData(s, val->x, val->y, val->sample_weight, {}, "fit (validation data)");
  ValidationData v = *val;
  const int64_t batch_size = o.batch_size;
  const bool parallel = o.data_parallel;
  return [&model, v, batch_size, parallel] {
    return model.evaluate(v.x, v.y,
                          {.batch_size = batch_size,
                           .verbose = 0,
                           .sample_weight = v.sample_weight,
                           .data_parallel = parallel});
  };
}

Tensor single_output(const ModelImpl& model, std::vector<Tensor> outputs) {
  if (outputs.size() != 1)
    throw Error(
        fmt::format("predict: model \"{}\" has {} outputs; use predict_outputs for one "
                    "tensor per output",
                    model.name(), outputs.size()));
  return outputs[0];
}

}  // namespace detail

Logs ModelImpl::train_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight,
                               const ClassWeight& class_weight) {
  ModelSteps& s = ModelSteps::of(*this);
  detail::ArrayData data(s, x, y, sample_weight, class_weight, "train_on_batch");
  bool done = false;
  return detail::run_batches(
      s, true,
      [&]() -> std::optional<ModelSteps::Args> {
        if (done) return std::nullopt;
        done = true;
        return detail::with_class_weights(data.lists, data.class_weights, "train_on_batch");
      },
      [](int, const Logs&) {}, [](int, const Logs&) {});
}

std::vector<std::string> ModelImpl::log_keys() {
  const ModelSteps& s = ModelSteps::of(*this);
  return s.resolved ? s.resolved->log_keys() : std::vector<std::string>{"loss"};
}

Logs ModelImpl::test_on_batch(const Arrays& x, const Arrays& y, const Arrays& sample_weight) {
  ModelSteps& s = ModelSteps::of(*this);
  detail::ArrayData data(s, x, y, sample_weight, {}, "test_on_batch");
  bool done = false;
  return detail::run_batches(
      s, false,
      [&]() -> std::optional<ModelSteps::Args> {
        if (done) return std::nullopt;
        done = true;
        return data.lists;
      },
      [](int, const Logs&) {}, [](int, const Logs&) {});
}

std::shared_ptr<History> ModelImpl::fit(const Arrays& x_all, const Arrays& y_all, FitOptions o) {
  ModelSteps& s = ModelSteps::of(*this);
  if (o.epochs < 1 || o.batch_size < 1)
    throw Error(fmt::format("fit: epochs ({}) and batch_size ({}) must be at least 1", o.epochs,
                            o.batch_size));
  if (o.steps_per_epoch < -1 || o.steps_per_epoch == 0)
    throw Error(fmt::format(
        "fit: steps_per_epoch must be at least 1 (or -1 for one pass per epoch), got {}",
        o.steps_per_epoch));
  detail::require_arrays_options(o.validation_steps, "validation_steps", "fit");
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
  detail::ArrayData data(s, x, y, w, o.class_weight, "fit");
  std::function<Logs()> validate = detail::validation(*this, s, val, o);
  return detail::fit_loop(*this, s,
                          data.batches(o.batch_size, o.shuffle, o.seed, "fit", o.steps_per_epoch),
                          validate, o);
}

Logs ModelImpl::evaluate(const Arrays& x, const Arrays& y, EvaluateOptions o) {
  ModelSteps& s = ModelSteps::of(*this);
  if (o.batch_size < 1)
    throw Error(fmt::format("evaluate: batch_size ({}) must be at least 1", o.batch_size));
  detail::require_arrays_options(o.steps, "steps", "evaluate");
  detail::ArrayData data(s, x, y, o.sample_weight, {}, "evaluate");
  return detail::evaluate_loop(*this, s, data.batches(o.batch_size, false, 0, "evaluate"), o);
}

std::vector<Tensor> ModelImpl::predict_outputs(const Arrays& x, PredictOptions o) {
  if (x.empty()) throw Error("predict: x must be a tensor with examples along axis 0");
  if (o.batch_size < 1)
    throw Error(fmt::format("predict: batch_size ({}) must be at least 1", o.batch_size));
  auto batches = data::batch_indices(x.num_examples("predict: x"), o.batch_size, false, 0);
  size_t i = 0;
  return detail::predict_loop(
      *this,
      [&]() -> std::optional<Arrays> {
        if (i >= batches.size()) return std::nullopt;
        return x.take_rows(batches[i++]);
      },
      int(batches.size()), o);
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
