// Keras' callbacks that change the optimizer's learning rate between epochs:
// LearningRateScheduler and ReduceLROnPlateau. They assign the optimizer's learning-rate
// variable, so a compiled training step uses the new rate at its next call (no retrace).
// Both need a compiled model whose optimizer has no schedule (kiln::Error otherwise).
#pragma once

#include <functional>

#include "kiln/keras/training/callback.h"
#include "kiln/keras/training/callbacks.h"

namespace kiln {

// At the start of each epoch: lr = schedule(epoch (0-based), current lr); the optimizer uses lr
// for that epoch. verbose > 0 prints "Epoch N: LearningRateScheduler setting learning rate to
// lr." A non-finite result is a kiln::Error.
class LearningRateScheduler : public Callback {
 public:
  using Schedule = std::function<double(int epoch, double learning_rate)>;
  explicit LearningRateScheduler(Schedule schedule, int verbose = 0);
  void on_epoch_begin(int epoch, const Logs& logs) override;

 private:
  Schedule schedule_;
  int verbose_;
};

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;  // new lr = lr * factor; must be < 1
  int patience = 10;    // epochs without improvement before reducing
  int verbose = 0;
  MonitorMode mode = MonitorMode::kAuto;
  double min_delta = 1e-4;  // smaller changes are not improvements
  int cooldown = 0;         // epochs to wait after a reduction before counting again
  double min_lr = 0;        // the rate never goes below this
};

// Keras' ReduceLROnPlateau: when the monitored metric has not improved by min_delta for
// `patience` epochs, multiplies the learning rate by `factor` (not below min_lr), then waits
// `cooldown` epochs. kiln::Error for factor >= 1 and, at the end of an epoch, when the metric
// is not in the logs.
class ReduceLROnPlateau : public Callback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  ReduceLROnPlateauOptions o_;
  bool maximize_ = false;
  double best_ = 0;
  int wait_ = 0, cooldown_counter_ = 0;
};

}  // namespace kiln
