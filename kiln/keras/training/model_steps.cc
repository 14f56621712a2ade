// The train, test and predict steps of ModelImpl, written once and run eagerly or traced.
#include "kiln/keras/training/model_steps.h"

#include <fmt/format.h>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/gradient_tape.h"
#include "kiln/frontend/ops.h"

namespace kiln {
namespace {

// [total, per-output losses (several outputs), predictions, masks], recording the layout.
std::vector<Tensor> pack(const detail::OutputObjectives::Values& losses,
                         const std::vector<Tensor>& y_pred, ModelSteps::Layout& layout) {
  std::vector<Tensor> out{losses.total};
  layout.has_loss.assign(y_pred.size(), false);
  layout.has_mask.assign(y_pred.size(), false);
  if (y_pred.size() > 1)
    for (size_t o = 0; o < y_pred.size(); ++o)
      if (losses.per_output[o].defined()) {
        out.push_back(losses.per_output[o]);
        layout.has_loss[o] = true;
      }
  out.insert(out.end(), y_pred.begin(), y_pred.end());
  for (size_t o = 0; o < y_pred.size(); ++o)
    if (y_pred[o].keras_mask().defined()) {
      out.push_back(y_pred[o].keras_mask());
      layout.has_mask[o] = true;
    }
  return out;
}

ModelImpl::StepResult unpack(const std::vector<Tensor>& r, const ModelSteps::Layout& layout) {
  ModelImpl::StepResult s;
  const size_t n = layout.has_mask.size();
  size_t i = 0;
  s.loss = r.at(i++);
  s.output_losses.resize(n);
  for (size_t o = 0; o < n; ++o)
    if (layout.has_loss[o]) s.output_losses[o] = r.at(i++);
  if (n == 1) s.output_losses[0] = s.loss;
  for (size_t o = 0; o < n; ++o) s.y_pred.push_back(r.at(i++));
  for (size_t o = 0; o < n; ++o)
    if (layout.has_mask[o]) s.y_pred[o] = s.y_pred[o].with_keras_mask(r.at(i++));
  return s;
}

// The compiled losses of a step, traced under "compile_loss" (Keras 3's scope) with the
// location of the user's compile().
auto step_losses(ModelSteps& s, ModelImpl& model, const std::vector<Tensor>& ys,
                 const std::vector<Tensor>& y_pred, const std::vector<Tensor>& sws) {
  detail::NameScope scope("compile_loss", model.compile_origin(), detail::LocationRule::kIfUnknown);
  return s.objectives(y_pred.size()).losses(ys, y_pred, sws, model.losses());
}

// Data parallel: the gradients of this rank's loss times its share of the global batch,
// summed over the ranks, are the gradients of the global batch's loss (a mean over the
// examples; the layers' regularization losses count once, as the shares sum to 1).
std::vector<Tensor> train_step(ModelSteps& s, const std::vector<Tensor>& xs,
                               const std::vector<Tensor>& ys, const std::vector<Tensor>& sws,
                               bool data_parallel = false) {
  ModelImpl& model = s.model;
  GradientTape tape;
  std::vector<Tensor> y_pred = model.invoke(xs, /*training=*/true);
  auto losses = step_losses(s, model, ys, y_pred, sws);
  std::vector<Variable> vars = model.trainable_weights();
  Tensor target = losses.total;
  if (data_parallel) target = target * cast(s.gradient_scale.read(), target.dtype());
  std::vector<Tensor> grads = tape.gradient(target, vars);
  // From the last variable to the first: the order the backward pass produces the gradients
  // in, which schedule-collectives keeps (passes/schedule_collectives.h).
  if (data_parallel)
    for (auto g = grads.rbegin(); g != grads.rend(); ++g)
      if (g->defined()) *g = all_reduce(*g);
  model.compile_options().optimizer->apply_gradients(grads, vars);
  return pack(losses, y_pred, s.train_layout);
}

std::vector<Tensor> test_step(ModelSteps& s, const std::vector<Tensor>& xs,
                              const std::vector<Tensor>& ys, const std::vector<Tensor>& sws) {
  std::vector<Tensor> y_pred = s.model.invoke(xs, /*training=*/false);
  auto losses = step_losses(s, s.model, ys, y_pred, sws);
  return pack(losses, y_pred, s.test_layout);
}

// `names`, or "<prefix>0", "<prefix>1", ... for the `n` entries of a model that has none.
std::vector<std::string> names_or_positions(std::vector<std::string> names, size_t n,
                                            const std::string& prefix) {
  if (names.empty())
    for (size_t i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

// The model's inputs from `x`, in its input order.
std::vector<Tensor> model_inputs(const ModelImpl& model, const Arrays& x,
                                 const std::string& caller) {
  if (x.named() && model.input_names().empty())
    throw Error(
        fmt::format("{}: model \"{}\" does not name its inputs; give x as a tensor or a "
                    "list in input order",
                    caller, model.name()));
  return x.in_order(names_or_positions(model.input_names(), x.size(), "input_"), "input", caller);
}

}  // namespace

ModelSteps::ModelSteps(ModelImpl& m)
    : model(m),
      train(
          Lists([this](const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                       const std::vector<Tensor>& sws) { return train_step(*this, xs, ys, sws); }),
          {.name = m.name() + "/train_step"}),
      train_parallel(Lists([this](const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                                  const std::vector<Tensor>& sws) {
                       return train_step(*this, xs, ys, sws, /*data_parallel=*/true);
                     }),
                     {.name = m.name() + "/train_step_data_parallel"}),
      test(Lists([this](const std::vector<Tensor>& xs, const std::vector<Tensor>& ys,
                        const std::vector<Tensor>& sws) { return test_step(*this, xs, ys, sws); }),
           {.name = m.name() + "/test_step"}),
      predict(Inputs([this](const std::vector<Tensor>& xs) { return model.invoke(xs, false); }),
              {.name = m.name() + "/predict_step"}),
      gradient_scale(m.name() + "/data_parallel/gradient_scale", scalar(1.0, DType::f64),
                     /*trainable=*/false) {}

ModelSteps& ModelSteps::of(ModelImpl& m) {
  m.compile_options();  // throws when not compiled
  if (!m.steps_) m.steps_ = std::make_shared<ModelSteps>(m);
  return *m.steps_;
}

std::vector<std::string> ModelSteps::input_names(size_t n) const {
  return names_or_positions(model.input_names(), n, "input_");
}

std::vector<std::string> ModelSteps::output_names(size_t n) const {
  return names_or_positions(model.output_names(), n, "output_");
}

std::vector<Tensor> ModelSteps::inputs(const Arrays& x, const std::string& caller) const {
  return model_inputs(model, x, caller);
}

ModelSteps::Args ModelSteps::args(const Arrays& x, const Arrays& y, const Arrays& w,
                                  const std::string& caller) const {
  Args a;
  a.xs = inputs(x, caller);
  if (y.named() && model.output_names().empty())
    throw Error(
        fmt::format("{}: model \"{}\" does not name its outputs; give y as a tensor or "
                    "a list in output order",
                    caller, model.name()));
  a.ys = y.in_order(output_names(y.size()), "target", caller);
  if (w.empty()) return a;
  a.sws = w.in_order(output_names(a.ys.size()), "sample weight", caller, /*for_weights=*/true);
  // Outputs left out of weights given by name weigh 1 (the step takes one entry per output).
  for (size_t o = 0; o < a.sws.size(); ++o)
    if (!a.sws[o].defined() && a.ys[o].rank() > 0)
      a.sws[o] = ones({a.ys[o].shape()[0]}, DType::f32);
  return a;
}

ModelImpl::StepResult ModelSteps::run(bool training, const Args& a, bool data_parallel) {
  std::vector<Tensor> r;
  if (model.compile_options().run_eagerly)
    r = training ? train_step(*this, a.xs, a.ys, a.sws, data_parallel)
                 : test_step(*this, a.xs, a.ys, a.sws);
  else if (training)
    r = data_parallel ? train_parallel(a.xs, a.ys, a.sws) : train(a.xs, a.ys, a.sws);
  else
    r = test(a.xs, a.ys, a.sws);
  return unpack(r, training ? train_layout : test_layout);
}

detail::OutputObjectives& ModelSteps::objectives(size_t outputs) {
  if (!resolved) resolved.emplace(model.compile_options(), output_names(outputs), model.name());
  if (resolved->size() != outputs)
    throw Error(fmt::format("model \"{}\" has {} outputs here, but {} before (outputs {})",
                            model.name(), outputs, resolved->size(),
                            fmt::join(resolved->names(), ", ")));
  return *resolved;
}

ConcreteFunction ModelImpl::train_step_function(const Arrays& x, const Arrays& y,
                                                const Arrays& sample_weight) {
  ModelSteps& s = ModelSteps::of(*this);
  ModelSteps::Args a = s.args(x, y, sample_weight, "train_step_function");
  return s.train.concrete(a.xs, a.ys, a.sws);
}

ModelImpl::StepResult ModelImpl::run_train_step(const Arrays& x, const Arrays& y,
                                                const Arrays& sample_weight) {
  ModelSteps& s = ModelSteps::of(*this);
  return s.run(true, s.args(x, y, sample_weight, "train step"));
}

ModelImpl::StepResult ModelImpl::run_test_step(const Arrays& x, const Arrays& y,
                                               const Arrays& sample_weight) {
  ModelSteps& s = ModelSteps::of(*this);
  return s.run(false, s.args(x, y, sample_weight, "test step"));
}

std::vector<Tensor> ModelImpl::run_predict_step(const Arrays& x) {
  if (!compiled() || compile_options().run_eagerly)
    return invoke(model_inputs(*this, x, "predict"), false);
  ModelSteps& s = ModelSteps::of(*this);
  return s.predict(s.inputs(x, "predict"));
}

}  // namespace kiln
