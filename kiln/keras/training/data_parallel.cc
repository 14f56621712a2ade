#include "kiln/keras/training/data_parallel.h"

#include <fmt/format.h>

#include <cstring>

#include "kiln/distributed/distributed.h"
#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/normalization.h"

namespace kiln::detail {

namespace {
void refuse_synchronized_batch_norm(const LayerImpl& layer) {
  if (auto* bn = dynamic_cast<const BatchNormalizationImpl*>(&layer);
      bn && bn->options().synchronized)
    throw Error(fmt::format(
        "layer \"{}\" (BatchNormalization): synchronized=true asks for the statistics of the "
        "global batch over all {} processes, which kiln's data-parallel fit does not compute "
        "(each process would use its own rows' statistics); set synchronized=false to normalize "
        "per process, or train in one process",
        bn->name(), distributed::size()));
  for (const Layer& sub : layer.sublayers()) refuse_synchronized_batch_norm(sub.impl());
}
}  // namespace
namespace {

int64_t rows_of(const ModelSteps::Args& a) {
  if (a.xs.empty() || a.xs[0].rank() == 0)
    throw Error("fit (data_parallel): the model's first input must have a batch axis (axis 0)");
  return a.xs[0].shape()[0];
}

// Rows [b, e) of t along axis 0 (undefined stays undefined).
Tensor take(const Tensor& t, int64_t b, int64_t e) {
  if (!t.defined()) return t;
  std::vector<int64_t> start(size_t(t.rank()), 0), stop = t.shape().to_vector();
  start[0] = b;
  stop[0] = e;
  return slice(t, start, stop);
}

std::vector<Tensor> take(const std::vector<Tensor>& ts, int64_t b, int64_t e) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(take(t, b, e));
  return out;
}

// Every rank's rows of `local` (rows of shard_of(batch, r, N) each; a rank without rows gives
// none), concatenated in rank order: the global batch's tensor.
Tensor gather_rows(const Tensor& local, int64_t batch, const std::string& what) {
  if (local.rank() == 0)
    throw Error(fmt::format(
        "fit (data_parallel): {} is a scalar; each output needs a batch axis (axis 0) for its "
        "rows to be gathered across the ranks",
        what));
  const int n = distributed::size();
  std::vector<int64_t> dims = local.shape().to_vector();
  const int64_t row_bytes =
      local.shape()[0] > 0 ? int64_t(local.array().nbytes()) / local.shape()[0] : 0;
  std::vector<int64_t> bytes(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    bytes[size_t(r)] = distributed::shard_of(batch, r, n).rows() * row_bytes;
  dims[0] = batch;
  runtime::Array out = runtime::Array::empty(local.dtype(), Shape(dims));
  distributed::all_gather_bytes(local.array().raw(), bytes, out.raw(), what);
  return Tensor(std::move(out));
}

std::string describe(const std::vector<Tensor>& ts) {
  std::vector<std::string> parts;
  for (const Tensor& t : ts) {
    if (!t.defined()) {
      parts.push_back("none");
      continue;
    }
    // "f32[batch,28,28]": the type with the batch axis named.
    std::vector<int64_t> d = t.shape().to_vector();
    d.erase(d.begin());
    const std::string scalar_type = TensorType{t.dtype(), Shape{}}.to_string();  // "f32[]"
    parts.push_back(fmt::format("{}[batch{}{}]", scalar_type.substr(0, scalar_type.size() - 2),
                                d.empty() ? "" : ",", fmt::join(d, ",")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// FNV-1a over the bytes of the batch: ranks that read other data (another file, another
// shuffle seed) differ here.
uint64_t checksum(const ModelSteps::Args& a) {
  uint64_t h = 1469598103934665603ull;
  for (const auto* list : {&a.xs, &a.ys, &a.sws})
    for (const Tensor& t : *list) {
      if (!t.defined()) continue;
      const auto* p = static_cast<const unsigned char*>(t.array().raw());
      for (size_t i = 0; i < t.array().nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
    }
  return h;
}

}  // namespace

DataParallel::DataParallel(ModelImpl& model, ModelSteps& steps, std::string run_description)
    : model_(model), steps_(steps), run_description_(std::move(run_description)) {
  distributed::initialize();
  // BatchNormalization(synchronized=true) asks for statistics over the global batch (Keras'
  // cross-replica mean and variance). This step does not all-reduce them: each rank would
  // normalize with the statistics of its own rows, so with more than one process the layer is
  // refused rather than computing something else. (With one process they are the same thing.)
  if (distributed::size() > 1) refuse_synchronized_batch_norm(model_);
}

void DataParallel::start(const ModelSteps::Args& global, const ModelSteps::Args& local) {
  // A model that builds on its first call gets its variables now (rank 0's values win below).
  if (model_.weights().empty()) model_.invoke(local.xs, /*training=*/false);
  std::vector<Variable> vars = model_.weights();
  Optimizer opt = model_.compile_options().optimizer;
  for (const Variable& v : opt->variables()) vars.push_back(v);
  std::vector<std::string> names;
  for (const Variable& v : vars)
    names.push_back(v.name() + " " + TensorType{v.dtype(), v.shape()}.to_string());
  const std::string description = fmt::format(
      "model \"{}\" with variables {}; optimizer {}; inputs {}; targets {}; sample weights {}; "
      "global batch {} rows; {}; first batch checksum {:016x}",
      model_.name(), fmt::join(names, ", "), opt->name(), describe(global.xs), describe(global.ys),
      describe(global.sws), rows_of(global), run_description_, checksum(global));
  distributed::check_same_everywhere(description, "the model, the data or the options of fit");
  // Rank 0's weights and optimizer state, everywhere.
  size_t total = 0;
  for (const Variable& v : vars) total += v.value().array().nbytes();
  std::vector<char> bytes(total);
  size_t at = 0;
  for (const Variable& v : vars) {
    const runtime::Array& a = v.value().array();
    if (a.nbytes()) std::memcpy(bytes.data() + at, a.raw(), a.nbytes());
    at += a.nbytes();
  }
  distributed::broadcast(bytes.data(), bytes.size(), "the initial weights and optimizer state");
  if (distributed::rank() == 0) return;
  at = 0;
  for (Variable& v : vars) {
    runtime::Array a = runtime::Array::empty(v.dtype(), v.shape());
    if (a.nbytes()) std::memcpy(a.raw(), bytes.data() + at, a.nbytes());
    at += a.nbytes();
    v.assign(Tensor(std::move(a)));
  }
}

ModelImpl::StepResult DataParallel::run(const ModelSteps::Args& global, bool training) {
  const int64_t batch = rows_of(global);
  const distributed::Shard shard =
      distributed::shard_of(batch, distributed::rank(), distributed::size());
  // A rank without rows trains on one row with a share of 0 (the step and its all_reduce
  // run on every rank).
  const int64_t b = shard.rows() > 0 ? shard.begin : 0, e = shard.rows() > 0 ? shard.end : 1;
  ModelSteps::Args local{take(global.xs, b, e), take(global.ys, b, e), take(global.sws, b, e)};
  if (training && !started_) {
    start(global, local);
    started_ = true;
  }
  const double share = double(shard.rows()) / double(batch);
  if (training) steps_.gradient_scale.assign(scalar(share, DType::f64));
  ModelImpl::StepResult r = steps_.run(training, local, /*data_parallel=*/training);

  // The global batch's losses: the ranks' losses weighted by their shares, summed.
  std::vector<double> losses{r.loss.item<double>() * share};
  for (const Tensor& l : r.output_losses)
    losses.push_back(l.defined() ? l.item<double>() * share : 0);
  distributed::all_reduce_sum(losses.data(), losses.size(), "the step's losses");
  ModelImpl::StepResult g;
  g.loss = scalar(losses[0], r.loss.dtype());
  for (size_t o = 0; o < r.output_losses.size(); ++o)
    g.output_losses.push_back(r.output_losses[o].defined()
                                  ? scalar(losses[o + 1], r.output_losses[o].dtype())
                                  : Tensor());
  for (size_t o = 0; o < r.y_pred.size(); ++o) {
    const Tensor& y = r.y_pred[o];
    Tensor all = gather_rows(y, batch, fmt::format("the predictions of output {}", o));
    if (y.keras_mask().defined())
      all = all.with_keras_mask(
          gather_rows(y.keras_mask(), batch, fmt::format("the mask of output {}", o)));
    g.y_pred.push_back(all);
  }
  return g;
}

}  // namespace kiln::detail
