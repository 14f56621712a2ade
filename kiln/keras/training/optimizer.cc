// The optimizer base (iterations, learning rate, slots, apply_gradients), the Optimizer
// handle, learning-rate schedules, and Keras 3's update rules for SGD, Adam, AdamW and
// RMSprop (keras/src/optimizers/{sgd,adam,adamw,rmsprop}.py, base_optimizer.py).
//
// Updates use kiln ops on the variables' values, so they run in the variables' own dtype and
// trace into kiln::function graphs. The step-dependent scalars (learning rate, Adam's alpha) are
// float64 tensors computed from the iterations variable, then cast to the variable's dtype.
#include "kiln/keras/training/optimizer.h"
#include "kiln/keras/training/keras_names.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/ops.h"

namespace kiln {

// ---------------------------------------------------------------- schedules

namespace {
Tensor f64(double v) { return scalar(v, DType::f64); }
}  // namespace

LearningRateSchedule::LearningRateSchedule(std::function<Tensor(const Tensor& step)> f,
                                           const Json& config)
    : f_(std::move(f)), config_(std::make_shared<const Json>(config)) {}

Tensor LearningRateSchedule::operator()(const Tensor& step) const {
  if (!f_) throw Error("LearningRateSchedule: the schedule is empty");
  Tensor lr = f_(cast(step, DType::f64));
  if (!lr.defined() || lr.rank() != 0 || !is_floating(lr.dtype()))
    throw Error("LearningRateSchedule: the schedule must return a floating scalar tensor");
  return cast(lr, DType::f64);
}

double LearningRateSchedule::operator()(int64_t step) const {
  detail::InitScope eager;
  return (*this)(f64(double(step))).item<double>();
}

namespace schedules {
LearningRateSchedule exponential_decay(double initial_learning_rate, int64_t decay_steps,
                                       double decay_rate, bool staircase) {
  if (decay_steps <= 0)
    throw Error(fmt::format("exponential_decay: decay_steps must be > 0, got {}", decay_steps));
  return LearningRateSchedule(
      [=](const Tensor& step) {
        Tensor p = step / f64(double(decay_steps));
        if (staircase) p = cast(cast(p, DType::i64), DType::f64);  // floor: step >= 0
        return pow(f64(decay_rate), p) * initial_learning_rate;
      },
      Json{{"class_name", "ExponentialDecay"},
           {"config",
            {{"initial_learning_rate", initial_learning_rate},
             {"decay_steps", decay_steps},
             {"decay_rate", decay_rate},
             {"staircase", staircase}}}});
}

LearningRateSchedule from_config(const Json& config) {
  auto bad = [&](const std::string& what) {
    return Error(fmt::format("learning-rate schedule {:.300}: {}", config.dump(), what));
  };
  if (!config.is_object() || !config.contains("class_name") || !config.contains("config") ||
      !config["config"].is_object())
    throw bad("should be {\"class_name\": ..., \"config\": {...}}");
  if (config["class_name"] != "ExponentialDecay")
    throw bad("unknown schedule class; kiln saves and loads ExponentialDecay");
  const Json& c = config["config"];
  try {
    return exponential_decay(c.at("initial_learning_rate").get<double>(),
                             c.at("decay_steps").get<int64_t>(), c.at("decay_rate").get<double>(),
                             c.value("staircase", false));
  } catch (const Json::exception& e) {
    throw bad(fmt::format("missing or wrong entry ({})", e.what()));
  }
}
}  // namespace schedules

// ---------------------------------------------------------------- OptimizerImpl

namespace {
void check_finite(const std::string& who, double v) {
  if (!std::isfinite(v)) throw Error(fmt::format("{}: must be a finite number, got {}", who, v));
}
}  // namespace

OptimizerImpl::OptimizerImpl(std::string name, double learning_rate, GradientClipping clipping)
    : name_(std::move(name)),
      clipping_(clipping),
      iterations_(name_ + "/iterations", scalar(0, DType::i64), /*trainable=*/false) {
  validate_clipping(clipping_, name_);
  add_hyperparameter("learning_rate", learning_rate);
}

void OptimizerImpl::add_hyperparameter(const std::string& name, double value,
                                       std::function<void(double)> check) {
  const std::string full = fmt::format("{}/{}", name_, name);
  check_finite(full, value);
  if (check) check(value);
  Tensor initial;
  {
    detail::InitScope eager;
    initial = scalar(value, DType::f64);
  }
  hyperparameters_.push_back({name, Variable(full, initial, /*trainable=*/false), check});
}

void OptimizerImpl::mark_unavailable(const std::string& name, std::string reason) {
  unavailable_[name] = std::move(reason);
}

bool OptimizerImpl::has_hyperparameter(const std::string& name) const {
  for (const Hyperparameter& h : hyperparameters_)
    if (h.name == name) return true;
  return false;
}

const OptimizerImpl::Hyperparameter& OptimizerImpl::find_hyperparameter(
    const std::string& name) const {
  if (auto it = unavailable_.find(name); it != unavailable_.end())
    throw Error(
        fmt::format("optimizer \"{}\" has no hyperparameter \"{}\": {}", name_, name, it->second));
  std::string known;
  for (const Hyperparameter& h : hyperparameters_) {
    if (h.name == name) return h;
    known += (known.empty() ? "" : ", ") + h.name;
  }
  throw Error(
      fmt::format("optimizer \"{}\" has no hyperparameter \"{}\"; it has: {}", name_, name, known));
}

std::vector<Variable> OptimizerImpl::hyperparameters() const {
  std::vector<Variable> out;
  for (const Hyperparameter& h : hyperparameters_) out.push_back(h.variable);
  return out;
}

double OptimizerImpl::hyperparameter(const std::string& name) const {
  detail::InitScope eager;  // the stored value, also while a trace records
  return find_hyperparameter(name).variable.value().item<double>();
}

void OptimizerImpl::set_hyperparameter(const std::string& name, double value) {
  if (name == "learning_rate" && schedule_)
    throw Error(fmt::format(
        "optimizer \"{}\" uses a learning-rate schedule, so its learning rate is not settable; "
        "call set_schedule(nullptr) first or set a new schedule",
        name_));
  const Hyperparameter& h = find_hyperparameter(name);
  check_finite(h.variable.name(), value);
  if (h.check) h.check(value);
  detail::InitScope eager;  // a setting, not a traced assignment
  Variable v = h.variable;
  v.assign(scalar(value, DType::f64));
}

Tensor OptimizerImpl::hyper(const std::string& name, DType dtype) const {
  return cast(find_hyperparameter(name).variable.value(), dtype);
}

int64_t OptimizerImpl::iterations() const {
  detail::InitScope eager;  // the variable's stored value, also while a trace records
  return iterations_.value().item<int64_t>();
}

double OptimizerImpl::current_learning_rate() const {
  return schedule_ ? schedule_(iterations()) : hyperparameter("learning_rate");
}

void OptimizerImpl::set_learning_rate(double lr) { set_hyperparameter("learning_rate", lr); }

void OptimizerImpl::set_schedule(LearningRateSchedule schedule) {
  if (traced_)
    throw Error(fmt::format(
        "optimizer \"{}\": the learning-rate schedule cannot change after an update was traced "
        "into a kiln::function (the traced steps would keep the old one); set the schedule "
        "before the first traced step, create a new optimizer, or change the rate with "
        "set_learning_rate",
        name_));
  schedule_ = std::move(schedule);
}

std::vector<Variable> OptimizerImpl::variables() const {
  std::vector<Variable> out;
  out.reserve(slot_order_.size() + 2);
  out.push_back(iterations_);
  out.push_back(hyperparameters_.front().variable);  // learning_rate
  out.insert(out.end(), slot_order_.begin(), slot_order_.end());
  return out;
}

Variable& OptimizerImpl::slot(const Variable& var, const std::string& slot_name) {
  auto key = std::make_pair(var.handle_id(), slot_name);
  auto it = slots_.find(key);
  if (it != slots_.end()) return it->second;
  // Keras: add_variable_from_reference names the slot after the variable's path with '/'
  // replaced by '_', inside the optimizer's scope.
  std::string var_name = var.name();
  std::replace(var_name.begin(), var_name.end(), '/', '_');
  Tensor initial;
  {
    detail::InitScope eager;
    initial = zeros(var.shape(), var.dtype());
  }
  Variable s(fmt::format("{}/{}_{}", name_, var_name, slot_name), initial, /*trainable=*/false);
  slot_order_.push_back(s);
  slot_order_names_.push_back(slot_name);
  slot_owners_.push_back(var);
  return slots_.emplace(key, s).first->second;
}

Json OptimizerImpl::get_config() const {
  Json c{{"name", name_}};
  for (const Hyperparameter& h : hyperparameters_) c[h.name] = hyperparameter(h.name);
  if (schedule_) {
    if (!schedule_.config())
      throw Error(fmt::format(
          "optimizer \"{}\": its learning-rate schedule was made from a function alone, so it "
          "cannot be saved; make it with kiln::schedules (exponential_decay) or give "
          "LearningRateSchedule(f, config) a config",
          name_));
    c["learning_rate"] = *schedule_.config();
  }
  auto opt = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
  c["clipnorm"] = opt(clipping_.clipnorm);
  c["clipvalue"] = opt(clipping_.clipvalue);
  c["global_clipnorm"] = opt(clipping_.global_clipnorm);
  return c;
}

std::vector<OptimizerImpl::Slot> OptimizerImpl::slots() const {
  std::vector<Slot> out;
  for (size_t i = 0; i < slot_order_.size(); ++i)
    out.push_back({slot_owners_[i], slot_order_names_[i], slot_order_[i]});
  return out;
}

void OptimizerImpl::restore_slot(const Variable& owner, const std::string& slot_name,
                                 const Tensor& value) {
  if (auto names = slot_names();
      names && std::find(names->begin(), names->end(), slot_name) == names->end())
    throw Error(fmt::format("optimizer \"{}\" ({}) has no slot \"{}\" for \"{}\"; its slots: {}",
                            name_, class_name(), slot_name, owner.name(),
                            names->empty() ? "none" : fmt::format("{}", fmt::join(*names, ", "))));
  if (!(value.type() == TensorType{owner.dtype(), owner.shape()}))
    throw Error(
        fmt::format("optimizer \"{}\": the \"{}\" slot of \"{}\" should be {} {}, got {} {}", name_,
                    slot_name, owner.name(), dtype_name(owner.dtype()), owner.shape().to_string(),
                    dtype_name(value.dtype()), value.shape().to_string()));
  detail::InitScope eager;
  slot(owner, slot_name).assign(value);
}

void OptimizerImpl::apply_gradients(const std::vector<Tensor>& grads_in,
                                    const std::vector<Variable>& variables) {
  // Keras casts each gradient to its variable's dtype: a bfloat16 gradient of a float32
  // variable (mixed precision) is widened here. Other dtype mismatches (float64 for float32)
  // are refused below rather than rounded silently.
  std::vector<Tensor> grads = grads_in;
  for (size_t i = 0; i < grads.size() && i < variables.size(); ++i)
    if (grads[i].defined() && variables[i].defined() && grads[i].dtype() == DType::bf16 &&
        variables[i].dtype() != DType::bf16 && is_floating(variables[i].dtype()))
      grads[i] = cast(grads[i], variables[i].dtype());
  if (grads.size() != variables.size())
    throw Error(
        fmt::format("{}.apply_gradients: got {} gradients for {} variables; pass one "
                    "gradient (possibly undefined) per variable",
                    name_, grads.size(), variables.size()));
  // Validate everything before the first update so a bad call changes nothing.
  size_t present = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!variables[i].defined())
      throw Error(fmt::format("{}.apply_gradients: variable {} is an empty handle", name_, i));
    if (!grads[i].defined()) continue;
    ++present;
    if (!(grads[i].type() == TensorType{variables[i].dtype(), variables[i].shape()}))
      throw Error(fmt::format(
          "{}.apply_gradients: the gradient for variable \"{}\" (index {}) is {} {} but the "
          "variable is {} {}; gradients must match their variable's dtype and shape",
          name_, variables[i].name(), i, dtype_name(grads[i].dtype()), grads[i].shape().to_string(),
          dtype_name(variables[i].dtype()), variables[i].shape().to_string()));
    if (!is_floating(variables[i].dtype()))
      throw Error(
          fmt::format("{}.apply_gradients: variable \"{}\" is {}; only float32/float64 "
                      "variables can be optimized",
                      name_, variables[i].name(), dtype_name(variables[i].dtype())));
  }
  if (!grads.empty() && present == 0)
    throw Error(
        fmt::format("{}.apply_gradients: no gradients provided for any of the {} "
                    "variables (all are undefined): is the loss connected to them?",
                    name_, variables.size()));
  if (detail::tracing()) traced_ = true;
  detail::NameScope scope(name_, origin_, detail::LocationRule::kIfUnknown);
  const std::vector<Tensor> clipped = clip_gradients(clipping_, grads);
  // lr at iterations before the update; step = iterations + 1 (float64 scalars).
  Tensor iterations = cast(iterations_.value(), DType::f64);
  const Tensor lr = schedule_ ? schedule_(iterations) : hyper("learning_rate", DType::f64);
  const Tensor step = iterations + 1.0;
  for (size_t i = 0; i < clipped.size(); ++i) {
    if (!clipped[i].defined()) continue;
    Variable var = variables[i];
    update(var, clipped[i], lr, step);
  }
  // Keras (BaseOptimizer.apply): after the updates, every updated variable with a constraint is
  // projected, variable.assign(constraint(variable)); kiln ops, so a traced step records it.
  for (size_t i = 0; i < clipped.size(); ++i) {
    if (!clipped[i].defined() || !variables[i].constraint()) continue;
    Variable var = variables[i];
    Tensor projected = var.constraint()(var.value());
    if (!(projected.type() == TensorType{var.dtype(), var.shape()}))
      throw Error(fmt::format(
          "{}.apply_gradients: the constraint of variable \"{}\" returned {} {} for a variable of "
          "{} {}; a constraint must keep the dtype and shape",
          name_, var.name(), dtype_name(projected.dtype()), projected.shape().to_string(),
          dtype_name(var.dtype()), var.shape().to_string()));
    var.assign(projected);
  }
  iterations_.assign_add(scalar(1, DType::i64));
}

// ---------------------------------------------------------------- update rules

namespace {

void check_momentum_in_unit_interval(double m) {
  if (!(m >= 0 && m <= 1)) throw Error(fmt::format("SGD: momentum must be in [0, 1], got {}", m));
}

// momentum 0:   w -= lr g
// momentum m:   v = m v - lr g;  w += v
// nesterov:     v = m v - lr g;  w += m v - lr g   (with the new v, as Keras 3)
// Built with momentum 0 the rule has no momentum slot (as in Keras), so momentum cannot be set.
class SGDImpl : public OptimizerImpl {
 public:
  explicit SGDImpl(const SGDOptions& o)
      : OptimizerImpl("SGD", o.learning_rate, o.clip), nesterov_(o.nesterov) {
    check_momentum_in_unit_interval(o.momentum);
    if (o.momentum != 0)
      add_hyperparameter("momentum", o.momentum, check_momentum_in_unit_interval);
    else
      mark_unavailable("momentum",
                       "SGD was built with momentum 0, so its update has no "
                       "momentum term; build it with momentum > 0 to set one");
  }
  Json get_config() const override {
    Json c = OptimizerImpl::get_config();
    c["momentum"] = has_hyperparameter("momentum") ? hyperparameter("momentum") : 0.0;
    c["nesterov"] = nesterov_;
    return c;
  }

 protected:
  std::optional<std::vector<std::string>> slot_names() const override {
    if (has_hyperparameter("momentum")) return std::vector<std::string>{"momentum"};
    return std::vector<std::string>{};
  }
  void update(Variable& var, const Tensor& g, const Tensor& lr_f64, const Tensor&) override {
    Tensor lr = cast(lr_f64, var.dtype());
    if (!has_hyperparameter("momentum")) {
      var.assign_sub(g * lr);
      return;
    }
    const Tensor momentum = hyper("momentum", var.dtype());
    Variable& m = slot(var, "momentum");
    m.assign(m.value() * momentum - g * lr);
    if (nesterov_)
      var.assign_add(m.value() * momentum - g * lr);
    else
      var.assign_add(m.value());
  }

 private:
  bool nesterov_;
};

// Keras' Adam step (t = iterations + 1), shared by Adam and AdamW:
//   m += (g - m)(1 - b1);  v += (g^2 - v)(1 - b2)
//   amsgrad: v_hat = max(v_hat, v), and v_hat stands for v below
//   alpha = lr sqrt(1 - b2^t) / (1 - b1^t);  w -= alpha m / (sqrt(v) + eps)
// The hyperparameters are float64 scalars; 1 - b is formed in float64, then cast.
struct AdamHyper {
  Tensor beta_1, beta_2, epsilon;
};
void adam_step(Variable& var, const Tensor& g, const Tensor& lr, const Tensor& t,
               const AdamHyper& h, Variable& m, Variable& v, Variable* v_hat) {
  const DType dt = var.dtype();
  const Tensor alpha = cast(lr * sqrt(1.0 - pow(h.beta_2, t)) / (1.0 - pow(h.beta_1, t)), dt);
  m.assign_add((g - m.value()) * cast(1.0 - h.beta_1, dt));
  v.assign_add((square(g) - v.value()) * cast(1.0 - h.beta_2, dt));
  Tensor denominator = v.value();
  if (v_hat != nullptr) {
    v_hat->assign(maximum(v_hat->value(), v.value()));
    denominator = v_hat->value();
  }
  var.assign_sub((m.value() * alpha) / (sqrt(denominator) + cast(h.epsilon, dt)));
}

std::vector<std::string> adam_slots(bool amsgrad) {
  std::vector<std::string> names{"momentum", "velocity"};
  if (amsgrad) names.push_back("velocity_hat");
  return names;
}

class AdamImpl : public OptimizerImpl {
 public:
  explicit AdamImpl(const AdamOptions& o)
      : OptimizerImpl("adam", o.learning_rate, o.clip), amsgrad_(o.amsgrad) {
    add_hyperparameter("beta_1", o.beta_1);
    add_hyperparameter("beta_2", o.beta_2);
    add_hyperparameter("epsilon", o.epsilon);
  }
  std::string class_name() const override { return "Adam"; }
  Json get_config() const override {
    Json c = OptimizerImpl::get_config();
    c["amsgrad"] = amsgrad_;
    return c;
  }

 protected:
  std::optional<std::vector<std::string>> slot_names() const override {
    return adam_slots(amsgrad_);
  }
  void update(Variable& var, const Tensor& g, const Tensor& lr, const Tensor& step) override {
    Variable& m = slot(var, "momentum");
    Variable& v = slot(var, "velocity");
    adam_step(
        var, g, lr, step,
        {hyper("beta_1", DType::f64), hyper("beta_2", DType::f64), hyper("epsilon", DType::f64)}, m,
        v, amsgrad_ ? &slot(var, "velocity_hat") : nullptr);
  }

 private:
  bool amsgrad_;
};

// Decoupled weight decay first (base_optimizer._apply_weight_decay: w = w - w wd lr), then the
// Adam step on the decayed weights. The decay runs for every weight decay, 0 included (w - w 0
// lr = w), so setting it later takes effect.
class AdamWImpl : public OptimizerImpl {
 public:
  explicit AdamWImpl(const AdamWOptions& o)
      : OptimizerImpl("adamw", o.learning_rate, o.clip), amsgrad_(o.amsgrad) {
    add_hyperparameter("weight_decay", o.weight_decay);
    add_hyperparameter("beta_1", o.beta_1);
    add_hyperparameter("beta_2", o.beta_2);
    add_hyperparameter("epsilon", o.epsilon);
  }
  std::string class_name() const override { return "AdamW"; }
  Json get_config() const override {
    Json c = OptimizerImpl::get_config();
    c["amsgrad"] = amsgrad_;
    return c;
  }

 protected:
  std::optional<std::vector<std::string>> slot_names() const override {
    return adam_slots(amsgrad_);
  }
  void update(Variable& var, const Tensor& g, const Tensor& lr, const Tensor& step) override {
    Variable& m = slot(var, "momentum");
    Variable& v = slot(var, "velocity");
    const DType dt = var.dtype();
    var.assign(var.value() - var.value() * hyper("weight_decay", dt) * cast(lr, dt));
    adam_step(
        var, g, lr, step,
        {hyper("beta_1", DType::f64), hyper("beta_2", DType::f64), hyper("epsilon", DType::f64)}, m,
        v, amsgrad_ ? &slot(var, "velocity_hat") : nullptr);
  }

 private:
  bool amsgrad_;
};

// v = rho v + (1 - rho) g^2
// centered: a = rho a + (1 - rho) g; denom = v - a^2 + eps; else denom = v + eps
// inc = lr g / sqrt(denom); momentum > 0: mom = momentum mom + inc, w -= mom; else w -= inc
// Built with momentum 0 the rule has no momentum slot, so momentum cannot be set later.
class RMSpropImpl : public OptimizerImpl {
 public:
  explicit RMSpropImpl(const RMSpropOptions& o)
      : OptimizerImpl("rmsprop", o.learning_rate, o.clip), centered_(o.centered) {
    add_hyperparameter("rho", o.rho);
    if (o.momentum > 0)
      add_hyperparameter("momentum", o.momentum);
    else
      mark_unavailable("momentum",
                       "rmsprop was built with momentum 0, so its update has no "
                       "momentum term; build it with momentum > 0 to set one");
    add_hyperparameter("epsilon", o.epsilon);
  }
  std::string class_name() const override { return "RMSprop"; }
  Json get_config() const override {
    Json c = OptimizerImpl::get_config();
    c["momentum"] = has_hyperparameter("momentum") ? hyperparameter("momentum") : 0.0;
    c["centered"] = centered_;
    return c;
  }

 protected:
  std::optional<std::vector<std::string>> slot_names() const override {
    std::vector<std::string> names{"velocity"};
    if (has_hyperparameter("momentum")) names.push_back("momentum");
    if (centered_) names.push_back("average_gradient");
    return names;
  }
  void update(Variable& var, const Tensor& g, const Tensor& lr_f64, const Tensor&) override {
    const DType dt = var.dtype();
    Tensor lr = cast(lr_f64, dt);
    const Tensor rho_f64 = hyper("rho", DType::f64);
    const Tensor rho = cast(rho_f64, dt), one_minus_rho = cast(1.0 - rho_f64, dt);
    const Tensor epsilon = hyper("epsilon", dt);
    // Slots in Keras' build order: velocity, momentum, average_gradient.
    Variable& v = slot(var, "velocity");
    Variable* mom = has_hyperparameter("momentum") ? &slot(var, "momentum") : nullptr;
    Variable* avg = centered_ ? &slot(var, "average_gradient") : nullptr;
    v.assign(v.value() * rho + square(g) * one_minus_rho);
    Tensor denominator;
    if (avg) {
      avg->assign(avg->value() * rho + g * one_minus_rho);
      denominator = v.value() - square(avg->value()) + epsilon;
    } else {
      denominator = v.value() + epsilon;
    }
    Tensor increment = (g * lr) / sqrt(denominator);
    if (mom) {
      mom->assign(mom->value() * hyper("momentum", dt) + increment);
      var.assign_sub(mom->value());
    } else {
      var.assign_sub(increment);
    }
  }

 private:
  bool centered_;
};

}  // namespace

// ---------------------------------------------------------------- Optimizer handle

Optimizer::Optimizer(const char* name) {
  const std::string key = training_detail::lower_ascii(name ? name : "");
  if (key == "sgd")
    *this = SGD();
  else if (key == "adam")
    *this = Adam();
  else if (key == "adamw")
    *this = AdamW();
  else if (key == "rmsprop")
    *this = RMSprop();
  else
    throw Error(
        fmt::format("unknown optimizer \"{}\"; known optimizers: sgd, adam, adamw, "
                    "rmsprop (or construct one with kiln::SGD({{...}}) etc.)",
                    name ? name : ""));
}

OptimizerImpl* Optimizer::operator->() const {
  if (!impl_)
    throw Error(
        "Optimizer: the handle is empty (default-constructed); create one with a name "
        "(\"adam\") or a factory (kiln::Adam())");
  return impl_.get();
}

namespace {
Optimizer made_at(std::shared_ptr<OptimizerImpl> impl, const std::source_location& loc) {
  impl->note_origin(detail::user_location(loc));
  return Optimizer(std::move(impl));
}
}  // namespace

Optimizer SGD(SGDOptions options, std::source_location loc) {
  return made_at(std::make_shared<SGDImpl>(options), loc);
}
Optimizer Adam(AdamOptions options, std::source_location loc) {
  return made_at(std::make_shared<AdamImpl>(options), loc);
}
Optimizer AdamW(AdamWOptions options, std::source_location loc) {
  return made_at(std::make_shared<AdamWImpl>(options), loc);
}
Optimizer RMSprop(RMSpropOptions options, std::source_location loc) {
  return made_at(std::make_shared<RMSpropImpl>(options), loc);
}

}  // namespace kiln
