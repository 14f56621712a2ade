// LearningRateScheduler and ReduceLROnPlateau (keras/src/callbacks/learning_rate_scheduler.py,
// reduce_lr_on_plateau.py).
#include "kiln/keras/training/lr_callbacks.h"

#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "kiln/distributed/distributed.h"
#include "kiln/keras/models/model.h"
#include "kiln/keras/training/monitor.h"

namespace kiln {

namespace {
OptimizerImpl& optimizer_of(ModelImpl* model, const char* who) {
  if (!model) throw Error(fmt::format("{}: the callback has no model; pass it to Model::fit", who));
  const Optimizer& opt = model->compile_options().optimizer;
  if (!opt.defined())
    throw Error(fmt::format("{}: the model has no optimizer; compile it first", who));
  return opt.impl();
}
}  // namespace

LearningRateScheduler::LearningRateScheduler(Schedule schedule, int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  if (!schedule_) throw Error("LearningRateScheduler: the schedule function is empty");
}

void LearningRateScheduler::on_epoch_begin(int epoch, const Logs&) {
  OptimizerImpl& opt = optimizer_of(model(), "LearningRateScheduler");
  const double lr = schedule_(epoch, opt.current_learning_rate());
  if (!std::isfinite(lr))
    throw Error(fmt::format(
        "LearningRateScheduler: the schedule returned {} for epoch {}; it must return a finite "
        "learning rate",
        lr, epoch));
  opt.set_learning_rate(lr);
  if (verbose_ > 0 && distributed::is_output_rank())
    std::cout << fmt::format("\nEpoch {}: LearningRateScheduler setting learning rate to {}.\n",
                             epoch + 1, lr);
}

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options) : o_(std::move(options)) {
  if (!(o_.factor < 1.0))
    throw Error(fmt::format(
        "ReduceLROnPlateau does not support a factor >= 1.0 (got {}); it multiplies the rate",
        o_.factor));
  maximize_ = detail::maximizes(o_.monitor, o_.mode);
}

void ReduceLROnPlateau::on_train_begin(const Logs&) {
  wait_ = cooldown_counter_ = 0;
  best_ = maximize_ ? -INFINITY : INFINITY;
}

void ReduceLROnPlateau::on_epoch_end(int epoch, const Logs& logs) {
  const double current = detail::monitored(logs, o_.monitor, "ReduceLROnPlateau");
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    wait_ = 0;
  }
  const bool improved = maximize_ ? current > best_ + o_.min_delta : current < best_ - o_.min_delta;
  if (improved) {
    best_ = current;
    wait_ = 0;
    return;
  }
  if (cooldown_counter_ > 0) return;
  if (++wait_ < o_.patience) return;
  OptimizerImpl& opt = optimizer_of(model(), "ReduceLROnPlateau");
  const double old_lr = opt.current_learning_rate();
  // Keras compares with min_lr as a float32.
  if (!(old_lr > double(float(o_.min_lr)))) return;
  const double new_lr = std::max(old_lr * o_.factor, o_.min_lr);
  opt.set_learning_rate(new_lr);
  if (o_.verbose > 0 && distributed::is_output_rank())
    std::cout << fmt::format("\nEpoch {}: ReduceLROnPlateau reducing learning rate to {}.\n",
                             epoch + 1, new_lr);
  cooldown_counter_ = o_.cooldown;
  wait_ = 0;
}

}  // namespace kiln
