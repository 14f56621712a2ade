// Optimizers (Keras 3's update rules): SGD (momentum, nesterov), Adam, AdamW, RMSprop, with
// slot variables tracked like weights and learning-rate schedules. Names as in Keras: "SGD",
// "adam", "adamw", "rmsprop".
// Optimizer is a handle (copies share state), like Layer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontend/tensor.h"
#include "frontend/variable.h"

namespace kiln {

// The learning rate as a function of the step (optimizer.iterations before the update),
// written with kiln ops on a float64 scalar step so that it is traced into a compiled
// training step (Keras' LearningRateSchedule). An empty schedule is "no schedule".
class LearningRateSchedule {
 public:
  LearningRateSchedule() = default;
  LearningRateSchedule(std::nullptr_t) {}  // NOLINT: implicit, as for std::function
  explicit LearningRateSchedule(std::function<Tensor(const Tensor& step)> f) : f_(std::move(f)) {}
  explicit operator bool() const { return bool(f_); }
  // The rate at `step` as a float64 scalar tensor (traced when `step` is).
  Tensor operator()(const Tensor& step) const;
  // The rate at `step`, computed eagerly.
  double operator()(int64_t step) const;

 private:
  std::function<Tensor(const Tensor&)> f_;
};
namespace schedules {
// initial * rate^(step / decay_steps), floored to whole periods when staircase (Keras'
// ExponentialDecay). decay_steps must be > 0 (kiln::Error otherwise).
LearningRateSchedule exponential_decay(double initial_learning_rate, int64_t decay_steps,
                                       double decay_rate, bool staircase = false);
}  // namespace schedules

class OptimizerImpl {
 public:
  OptimizerImpl(std::string name, double learning_rate);
  virtual ~OptimizerImpl() = default;

  // Applies one update; grads[i] (may be undefined: skipped) belongs to variables[i]. The
  // learning rate is evaluated once, at iterations() before the update; iterations() then
  // grows by one. Throws kiln::Error, before changing anything, when the list sizes differ, a
  // gradient's dtype or shape differs from its variable's, a variable is not floating, or
  // every gradient of a non-empty list is undefined (Keras: "No gradients provided").
  void apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& variables);
  // The iteration counter ("<name>/iterations", int64, first), then the slot variables in
  // creation order.
  std::vector<Variable> variables() const;
  int64_t iterations() const;
  double current_learning_rate() const;
  // Throws kiln::Error while a schedule is set (as Keras does); set_schedule(nullptr) clears it.
  void set_learning_rate(double lr);
  void set_schedule(LearningRateSchedule schedule);
  const std::string& name() const { return name_; }

 protected:
  // Updates one variable with its gradient at learning rate lr; lr and step (iterations + 1)
  // are float64 scalar tensors (traced inside kiln::function).
  virtual void update(Variable& var, const Tensor& grad, const Tensor& lr, const Tensor& step) = 0;
  // A zero-initialised, non-trainable slot for `var` (its shape and dtype), created once,
  // named "<optimizer>/<var>_<slot>" with '/' in the variable's name replaced by '_' (Keras'
  // add_variable_from_reference): "adam/dense_1_kernel_momentum".
  Variable& slot(const Variable& var, const std::string& slot_name);

 private:
  std::string name_;
  double learning_rate_;
  LearningRateSchedule schedule_;
  Variable iterations_;
  std::vector<Variable> slot_order_;
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

struct SGDOptions {
  double learning_rate = 0.01, momentum = 0.0;
  bool nesterov = false;
};
struct AdamOptions {
  double learning_rate = 0.001, beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
};
struct AdamWOptions {
  double learning_rate = 0.001, weight_decay = 0.004, beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
};
struct RMSpropOptions {
  double learning_rate = 0.001, rho = 0.9, momentum = 0.0, epsilon = 1e-7;
  bool centered = false;
};

// SGD throws kiln::Error unless 0 <= momentum <= 1 (Keras' check).
Optimizer SGD(SGDOptions options = {});
Optimizer Adam(AdamOptions options = {});
Optimizer AdamW(AdamWOptions options = {});
Optimizer RMSprop(RMSpropOptions options = {});

}  // namespace kiln
