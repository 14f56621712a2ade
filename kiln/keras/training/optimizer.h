// Optimizers (Keras 3's update rules): SGD (momentum, nesterov), Adam, AdamW, RMSprop, with
// slot variables tracked like weights, learning-rate schedules and gradient clipping. Names as
// in Keras: "SGD", "adam", "adamw", "rmsprop".
// Optimizer is a handle (copies share state), like Layer.
//
// Hyperparameters are variables (as Keras 3's learning rate is): the learning rate, momentum,
// betas, epsilon, rho and weight decay are float64 scalar variables that a traced training step
// reads like any other variable, so set_learning_rate / set_hyperparameter (or assigning the
// variable) takes effect at the next call of a compiled step, with no retrace.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"
#include "kiln/ir/source_location.h"
#include "kiln/keras/training/gradient_clipping.h"

namespace kiln {

using Json = nlohmann::json;

// The learning rate as a function of the step (optimizer.iterations before the update),
// written with kiln ops on a float64 scalar step so that it is traced into a compiled
// training step (Keras' LearningRateSchedule). An empty schedule is "no schedule".
class LearningRateSchedule {
 public:
  LearningRateSchedule() = default;
  LearningRateSchedule(std::nullptr_t) {}  // NOLINT: implicit, as for std::function
  explicit LearningRateSchedule(std::function<Tensor(const Tensor& step)> f) : f_(std::move(f)) {}
  // A schedule that can be saved with a model: `config` is Keras' serialized form,
  // {"class_name": ..., "config": {...}}, which schedules::from_config turns back into it.
  LearningRateSchedule(std::function<Tensor(const Tensor& step)> f, const Json& config);
  explicit operator bool() const { return bool(f_); }
  // The serialized form, or nullptr for a schedule made from a function alone.
  const Json* config() const { return config_.get(); }
  // The rate at `step` as a float64 scalar tensor (traced when `step` is).
  Tensor operator()(const Tensor& step) const;
  // The rate at `step`, computed eagerly.
  double operator()(int64_t step) const;

 private:
  std::function<Tensor(const Tensor&)> f_;
  std::shared_ptr<const Json> config_;
};
namespace schedules {
// initial * rate^(step / decay_steps), floored to whole periods when staircase (Keras'
// ExponentialDecay). decay_steps must be > 0 (kiln::Error otherwise).
LearningRateSchedule exponential_decay(double initial_learning_rate, int64_t decay_steps,
                                       double decay_rate, bool staircase = false);
// The schedule a config() describes ("ExponentialDecay"); kiln::Error naming the entry for
// another class or a bad value.
LearningRateSchedule from_config(const Json& config);
}  // namespace schedules

class OptimizerImpl {
 public:
  OptimizerImpl(std::string name, double learning_rate, GradientClipping clipping);
  virtual ~OptimizerImpl() = default;

  // Applies one update; grads[i] (may be undefined: skipped) belongs to variables[i]. The
  // learning rate is evaluated once, at iterations() before the update; iterations() then
  // grows by one. Throws kiln::Error, before changing anything, when the list sizes differ, a
  // gradient's dtype or shape differs from its variable's, a variable is not floating, or
  // every gradient of a non-empty list is undefined (Keras: "No gradients provided").
  void apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& variables);
  // As Keras 3 lists them: the iteration counter ("<name>/iterations", int64), the learning
  // rate ("<name>/learning_rate", float64), then the slot variables in creation order.
  std::vector<Variable> variables() const;
  int64_t iterations() const;
  // Where the user's code made this optimizer: a traced update names its nodes' source
  // location after it where the caller gives none (a model's train step). The first stays.
  void note_origin(const ir::SourceLocation& location) {
    if (!origin_.known()) origin_ = location;
  }
  const ir::SourceLocation& origin() const { return origin_; }
  // The rate the next update uses: the schedule at iterations() if one is set, else the
  // learning-rate variable's value.
  double current_learning_rate() const;
  // Assigns the learning-rate variable (a compiled step sees it at its next call). Throws
  // kiln::Error while a schedule is set (as Keras does; set_schedule(nullptr) clears it) or for
  // a non-finite rate.
  void set_learning_rate(double lr);
  // Sets or clears (nullptr) the schedule. A schedule is traced into the graphs of the steps
  // that use this optimizer, so it can only change before the first traced update (kiln::Error
  // afterwards: create a new optimizer, or change the rate with set_learning_rate).
  void set_schedule(LearningRateSchedule schedule);
  const std::string& name() const { return name_; }

  // The hyperparameter variables ("<name>/<hyperparameter>", float64 scalars, not trainable):
  // learning_rate first, then the update rule's (SGD: momentum; Adam: beta_1, beta_2,
  // epsilon; AdamW: weight_decay too; RMSprop: rho, momentum, epsilon).
  std::vector<Variable> hyperparameters() const;
  // The value of one hyperparameter, by the short name ("beta_1"); kiln::Error listing the
  // names for an unknown one.
  double hyperparameter(const std::string& name) const;
  // Assigns one hyperparameter (no retrace). kiln::Error for an unknown name, a non-finite
  // value, a value outside the rule's range (SGD momentum in [0, 1]), or a momentum of an
  // optimizer built without momentum (its update has no momentum term: construct it with
  // momentum > 0 instead).
  void set_hyperparameter(const std::string& name, double value);
  const GradientClipping& clipping() const { return clipping_; }
  const LearningRateSchedule& schedule() const { return schedule_; }

  // ---- saving (keras/saving/): configuration and state ----
  // Keras' class name of the rule: "SGD", "Adam", "AdamW", "RMSprop" (a custom rule: name()).
  virtual std::string class_name() const { return name_; }
  // Keras' get_config: {"name", "learning_rate" (the value, or the schedule's config), each
  // hyperparameter's value, "clipnorm", "clipvalue", "global_clipnorm" (null when unset)}, plus
  // the rule's flags (SGD: "nesterov"; RMSprop: "centered"). kiln::Error when the schedule was
  // made from a function alone (it has no config).
  virtual Json get_config() const;
  // The slot variables with the variable each belongs to and the slot's name ("momentum"), in
  // creation order.
  struct Slot {
    Variable owner;
    std::string name;
    Variable variable;
  };
  std::vector<Slot> slots() const;
  // Sets the slot `slot_name` of `owner` (creating it if no update made it yet) to `value`: how
  // a saved state comes back before the first update. kiln::Error, changing nothing, when the
  // rule has no slot of that name or `value` differs from the owner in dtype or shape.
  void restore_slot(const Variable& owner, const std::string& slot_name, const Tensor& value);

 protected:
  // The names of the slots the rule creates, for restore_slot's check; nullopt (the default,
  // for custom rules) accepts any name.
  virtual std::optional<std::vector<std::string>> slot_names() const { return std::nullopt; }
  // Updates one variable with its gradient at learning rate lr; lr and step (iterations + 1)
  // are float64 scalar tensors (traced inside kiln::function).
  virtual void update(Variable& var, const Tensor& grad, const Tensor& lr, const Tensor& step) = 0;
  // Creates the hyperparameter variable "<optimizer>/<name>" (constructors only). `check`
  // validates a value (initial and set); it throws kiln::Error for a bad one.
  void add_hyperparameter(const std::string& name, double value,
                          std::function<void(double)> check = nullptr);
  // The hyperparameter's current value as a scalar tensor of `dtype` (a variable read: captured
  // when traced).
  Tensor hyper(const std::string& name, DType dtype) const;
  bool has_hyperparameter(const std::string& name) const;
  // A hyperparameter this configuration of the rule does not have; asking for it throws
  // kiln::Error with `reason`.
  void mark_unavailable(const std::string& name, std::string reason);
  // A zero-initialised, non-trainable slot for `var` (its shape and dtype), created once,
  // named "<optimizer>/<var>_<slot>" with '/' in the variable's name replaced by '_' (Keras'
  // add_variable_from_reference): "adam/dense_1_kernel_momentum".
  Variable& slot(const Variable& var, const std::string& slot_name);

 private:
  struct Hyperparameter {
    std::string name;
    Variable variable;
    std::function<void(double)> check;
  };
  const Hyperparameter& find_hyperparameter(const std::string& name) const;

  std::string name_;
  GradientClipping clipping_;
  LearningRateSchedule schedule_;
  bool traced_ = false;  // an update was traced into a graph
  ir::SourceLocation origin_;
  Variable iterations_;
  std::vector<Hyperparameter> hyperparameters_;  // learning_rate first
  std::map<std::string, std::string> unavailable_;
  std::vector<Variable> slot_order_;
  std::vector<std::string> slot_order_names_;  // parallel to slot_order_
  // Keyed by the owning variable's identity; slot_owners_ keeps those variables alive so an
  // address is never reused for another variable while its key is in the map.
  std::map<std::pair<const void*, std::string>, Variable> slots_;
  std::vector<Variable> slot_owners_;
};

class Optimizer {
 public:
  Optimizer() = default;
  explicit Optimizer(std::shared_ptr<OptimizerImpl> impl) : impl_(std::move(impl)) {}
  // By name (case-insensitive) with Keras' defaults: "sgd", "adam", "adamw", "rmsprop";
  // another name throws kiln::Error listing these.
  Optimizer(const char* name);                                     // NOLINT: implicit
  Optimizer(const std::string& name) : Optimizer(name.c_str()) {}  // NOLINT: implicit
  bool defined() const { return impl_ != nullptr; }
  // Throws kiln::Error on an empty handle.
  OptimizerImpl* operator->() const;
  OptimizerImpl& impl() const { return *operator->(); }

 private:
  std::shared_ptr<OptimizerImpl> impl_;
};

// Keras' constructor arguments and defaults; `clip` holds clipnorm / clipvalue /
// global_clipnorm: kiln::SGD({.learning_rate = 0.1, .clip = {.clipnorm = 1.0}}).
struct SGDOptions {
  double learning_rate = 0.01, momentum = 0.0;
  bool nesterov = false;
  GradientClipping clip{};
};
// amsgrad (Keras 3): a third slot "velocity_hat" keeps the running maximum of the velocity,
// and the step divides by its square root instead of the velocity's.
struct AdamOptions {
  double learning_rate = 0.001, beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  GradientClipping clip{};
  bool amsgrad = false;
};
struct AdamWOptions {
  double learning_rate = 0.001, weight_decay = 0.004, beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  GradientClipping clip{};
  bool amsgrad = false;
};
struct RMSpropOptions {
  double learning_rate = 0.001, rho = 0.9, momentum = 0.0, epsilon = 1e-7;
  bool centered = false;
  GradientClipping clip{};
};

// SGD throws kiln::Error unless 0 <= momentum <= 1 (Keras' check).
// `loc`: where the user's code made the optimizer (OptimizerImpl::note_origin).
Optimizer SGD(SGDOptions options = {}, std::source_location loc = std::source_location::current());
Optimizer Adam(AdamOptions options = {},
               std::source_location loc = std::source_location::current());
Optimizer AdamW(AdamWOptions options = {},
                std::source_location loc = std::source_location::current());
Optimizer RMSprop(RMSpropOptions options = {},
                  std::source_location loc = std::source_location::current());

}  // namespace kiln
