// Keras' built-in callbacks: ProgbarLogger (the progress bar fit adds when verbose),
// EarlyStopping, ModelCheckpoint and CSVLogger.
#pragma once

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/keras/training/callback.h"
#include "kiln/keras/training/progbar.h"

namespace kiln {

class ProgbarLogger : public Callback {
 public:
  explicit ProgbarLogger(std::ostream& os = std::cout, std::optional<bool> interactive = {});
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(int batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_test_begin(const Logs& logs) override;
  void on_test_batch_end(int batch, const Logs& logs) override;
  void on_test_end(const Logs& logs) override;

 private:
  std::ostream& os_;
  bool interactive_;
  std::unique_ptr<Progbar> bar_;
  bool in_fit_ = false;
  Logs last_;
  int seen_ = 0;  // batches of the current loop so far (for an unknown number of steps)
};

// "min" when the monitored name does not contain "acc"/"auc", else "max" (Keras' "auto").
enum class MonitorMode { kAuto, kMin, kMax };

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0;
  int patience = 0;
  MonitorMode mode = MonitorMode::kAuto;
  std::optional<double> baseline{};
  bool restore_best_weights = false;
  int start_from_epoch = 0;
  int verbose = 0;
};

class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }

 private:
  bool improved(double value, double reference) const;
  EarlyStoppingOptions o_;
  bool maximize_ = false;
  double best_ = 0;
  int wait_ = 0, stopped_epoch_ = -1, best_epoch_ = -1;
  std::vector<Tensor> best_weights_;
};

struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  bool save_best_only = false;
  MonitorMode mode = MonitorMode::kAuto;
  int verbose = 0;
};

// Saves the model's weights (safetensors) after each epoch to `filepath`, a template with
// Python-format fields from the epoch (1-based) and the logs, e.g.
// "ckpt_{epoch:02d}_{val_loss:.4f}.safetensors".
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string filepath, ModelCheckpointOptions options = {});
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  // The path for `epoch` (0-based) and `logs`; kiln::Error for unknown fields.
  std::string format_path(int epoch, const Logs& logs) const;

 private:
  std::string filepath_;
  ModelCheckpointOptions o_;
  bool maximize_ = false;
  std::optional<double> best_;
};

// Writes one CSV row per epoch ("epoch" 0-based, then the logs by name). The file is rewritten
// atomically each epoch, so it is never left half-written.
class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::string filename, char separator = ',', bool append = false);
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  std::string filename_, content_;
  char sep_;
  bool append_;
  std::vector<std::string> keys_;
};

}  // namespace kiln
