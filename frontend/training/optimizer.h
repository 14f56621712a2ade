// Optimizers (Keras' update rules): SGD (momentum, nesterov), Adam, AdamW, RMSprop, with
// slot variables tracked like weights and learning-rate schedules.
// Optimizer is a handle (copies share state), like Layer.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontend/variable.h"

namespace kiln {

// learning rate as a function of the step (optimizer.iterations before the update).
using LearningRateSchedule = std::function<double(int64_t step)>;
namespace schedules {
// initial * rate^(step / decay_steps), floored to whole periods when staircase (Keras).
LearningRateSchedule exponential_decay(double initial_learning_rate, int64_t decay_steps,
                                       double decay_rate, bool staircase = false);
}  // namespace schedules

class OptimizerImpl {
 public:
  OptimizerImpl(std::string name, double learning_rate);
  virtual ~OptimizerImpl() = default;

  // Applies one update; grads[i] (may be undefined: skipped) belongs to variables[i].
  void apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& variables);
  // Slot variables plus the iteration counter, in creation order.
  std::vector<Variable> variables() const;
  int64_t iterations() const;
  double current_learning_rate() const;
  void set_learning_rate(double lr);
  void set_schedule(LearningRateSchedule schedule);
  const std::string& name() const { return name_; }

 protected:
  // Updates one variable with its gradient at learning rate lr (step = iterations + 1).
  virtual void update(Variable& var, const Tensor& grad, double lr, int64_t step) = 0;
  // A zero-initialised slot for `var`, created once, named "<optimizer>/<var>_<slot>".
  Variable& slot(const Variable& var, const std::string& slot_name);

 private:
  std::string name_;
  double learning_rate_;
  LearningRateSchedule schedule_;
  Variable iterations_;
  std::vector<Variable> slot_order_;
  std::map<std::pair<const void*, std::string>, Variable> slots_;
};

class Optimizer {
 public:
  Optimizer() = default;
  explicit Optimizer(std::shared_ptr<OptimizerImpl> impl) : impl_(std::move(impl)) {}
  // By name with Keras' defaults: "sgd", "adam", "adamw", "rmsprop".
  Optimizer(const char* name);  // NOLINT: implicit
  Optimizer(const std::string& name) : Optimizer(name.c_str()) {}  // NOLINT: implicit
  bool defined() const { return impl_ != nullptr; }
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
  double learning_rate = 0.001, weight_decay = 0.004, beta_1 = 0.9, beta_2 = 0.999,
         epsilon = 1e-7;
};
struct RMSpropOptions {
  double learning_rate = 0.001, rho = 0.9, momentum = 0.0, epsilon = 1e-7;
  bool centered = false;
};

Optimizer SGD(SGDOptions options = {});
Optimizer Adam(AdamOptions options = {});
Optimizer AdamW(AdamWOptions options = {});
Optimizer RMSprop(RMSpropOptions options = {});

}  // namespace kiln
