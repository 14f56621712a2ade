// ModelImpl::fit / evaluate / predict_outputs on a data::Dataset (Keras' fit(dataset)): every
// element is a batch {x, y, sample_weight}; an epoch is one pass (pass number = epoch, so a
// shuffle reshuffles per epoch exactly as the in-memory fit does), or `steps_per_epoch`
// batches of a pass that continues across epochs (needed for an endless Dataset). The options
// that only make sense for tensors (batch_size, shuffle, validation_split, sample_weight) are
// not used: the Dataset batches, shuffles and carries the weights itself.
#include <fmt/format.h>

#include "kiln/keras/data/pipeline.h"
#include "kiln/keras/models/model.h"
#include "kiln/keras/training/fit_loops.h"
#include "kiln/runtime/log.h"

namespace kiln {
namespace {

ModelSteps::Args element_args(ModelSteps& s, const data::Element& e,
                              const std::vector<std::map<int64_t, double>>& class_weights,
                              const std::string& caller) {
  if (e.y.empty())
    throw Error(
        fmt::format("{}: the Dataset's elements have no targets (y); build it with "
                    "from_tensor_slices(x, y) or give y in each element",
                    caller));
  return detail::with_class_weights(s.args(e.x, e.y, e.sample_weight, caller), class_weights,
                                    caller);
}

// The batches of each epoch. With `steps` >= 1, one pass continues across epochs, `steps`
// batches per epoch; when it ends early the model stops training with a warning (Keras 3).
detail::BatchSource dataset_batches(ModelImpl& model, ModelSteps& s, const data::Dataset& ds,
                                    int64_t steps,
                                    std::vector<std::map<int64_t, double>> class_weights,
                                    const std::string& caller) {
  const int64_t known = ds.cardinality();
  if (steps == -1 && known == data::Dataset::kInfinite)
    throw Error(
        fmt::format("{}: the Dataset is endless (repeat()); give the number of batches "
                    "per epoch (steps_per_epoch / validation_steps / steps)",
                    caller));
  if (steps < -1 || steps == 0)
    throw Error(
        fmt::format("{}: the number of steps must be at least 1 (or -1 for a whole "
                    "pass), got {}",
                    caller, steps));
  detail::BatchSource src;
  src.steps = int(steps >= 1 ? steps : known >= 0 ? known : 0);
  auto cw = std::make_shared<std::vector<std::map<int64_t, double>>>(std::move(class_weights));
  if (steps == -1) {
    src.epoch = [&s, ds, cw, caller](int epoch) -> detail::NextBatch {
      auto it = std::make_shared<data::Dataset::Iterator>(ds.begin_pass(uint64_t(epoch)));
      return [&s, it, cw, caller]() -> std::optional<ModelSteps::Args> {
        std::optional<data::Element> e = it->next();
        if (!e) return std::nullopt;
        return element_args(s, *e, *cw, caller);
      };
    };
    return src;
  }
  auto it = std::make_shared<std::optional<data::Dataset::Iterator>>();
  src.epoch = [&model, &s, ds, cw, caller, steps, it](int epoch) -> detail::NextBatch {
    auto taken = std::make_shared<int64_t>(0);
    return [&model, &s, ds, cw, caller, steps, it, taken,
            epoch]() -> std::optional<ModelSteps::Args> {
      if (*taken >= steps || model.stop_training) return std::nullopt;
      if (!*it) it->emplace(ds.begin_pass(uint64_t(epoch)));
      std::optional<data::Element> e = (**it).next();
      if (!e) {
        log_warning(fmt::format(
            "{}: the Dataset ran out of data after {} of {} batches of epoch {}; stopping. Make "
            "sure it can give steps_per_epoch * epochs batches (e.g. with repeat())",
            caller, *taken, steps, epoch + 1));
        model.stop_training = true;
        return std::nullopt;
      }
      ++*taken;
      return element_args(s, *e, *cw, caller);
    };
  };
  return src;
}

}  // namespace

ValidationData::ValidationData(const data::Dataset& ds)
    : dataset(std::make_shared<data::Dataset>(ds)) {}

std::shared_ptr<History> ModelImpl::fit(const data::Dataset& ds, FitOptions o) {
  ModelSteps& s = ModelSteps::of(*this);
  if (o.validation_split != 0)
    throw Error(
        fmt::format("fit: validation_split ({}) needs tensors; with a Dataset give "
                    "validation_data (another Dataset, or tensors)",
                    o.validation_split));
  if (!o.sample_weight.empty())
    throw Error(
        "fit: sample_weight cannot be given with a Dataset; put the weights in its "
        "elements (from_tensor_slices(x, y, sample_weight))");
  std::vector<std::map<int64_t, double>> cw;
  if (!o.class_weight.empty()) cw = o.class_weight.for_outputs(s.output_names(1), "fit");
  detail::BatchSource train = dataset_batches(*this, s, ds, o.steps_per_epoch, cw, "fit");
  std::function<Logs()> validate = detail::validation(*this, s, o.validation_data, o);
  return detail::fit_loop(*this, s, train, validate, o);
}

Logs ModelImpl::evaluate(const data::Dataset& ds, EvaluateOptions o) {
  ModelSteps& s = ModelSteps::of(*this);
  if (!o.sample_weight.empty())
    throw Error(
        "evaluate: sample_weight cannot be given with a Dataset; put the weights in its "
        "elements");
  return detail::evaluate_loop(*this, s, dataset_batches(*this, s, ds, o.steps, {}, "evaluate"), o);
}

std::vector<Tensor> ModelImpl::predict_outputs(const data::Dataset& ds, PredictOptions o) {
  if (ds.cardinality() == data::Dataset::kInfinite)
    throw Error("predict: the Dataset is endless (repeat()); take(n) the batches to predict");
  data::Dataset::Iterator it = ds.begin_pass(0);
  return detail::predict_loop(
      *this,
      [&]() -> std::optional<Arrays> {
        std::optional<data::Element> e = it.next();
        if (!e) return std::nullopt;
        return e->x;
      },
      int(std::max<int64_t>(ds.cardinality(), 0)), o);
}

Tensor ModelImpl::predict(const data::Dataset& ds, PredictOptions o) {
  return detail::single_output(*this, predict_outputs(ds, std::move(o)));
}

}  // namespace kiln
