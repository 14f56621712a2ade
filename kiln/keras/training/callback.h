// Callbacks with Keras' hooks. `logs` maps metric names ("loss", "accuracy", "val_loss", ...)
// to values; it is ordered by name, which is also the order the progress bar prints them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class ModelImpl;
using Logs = std::map<std::string, double>;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(const Logs& logs) {}
  virtual void on_train_end(const Logs& logs) {}
  virtual void on_epoch_begin(int epoch, const Logs& logs) {}
  virtual void on_epoch_end(int epoch, const Logs& logs) {}
  virtual void on_train_batch_begin(int batch, const Logs& logs) {}
  virtual void on_train_batch_end(int batch, const Logs& logs) {}
  virtual void on_test_begin(const Logs& logs) {}
  virtual void on_test_end(const Logs& logs) {}
  virtual void on_test_batch_begin(int batch, const Logs& logs) {}
  virtual void on_test_batch_end(int batch, const Logs& logs) {}
  virtual void on_predict_begin(const Logs& logs) {}
  virtual void on_predict_end(const Logs& logs) {}
  virtual void on_predict_batch_begin(int batch, const Logs& logs) {}
  virtual void on_predict_batch_end(int batch, const Logs& logs) {}

  // Set by fit/evaluate/predict before the first hook.
  void set_model(ModelImpl* model) { model_ = model; }
  // epochs, steps (batches per epoch), verbose.
  void set_params(const std::map<std::string, int>& params) { params_ = params; }
  ModelImpl* model() const { return model_; }
  const std::map<std::string, int>& params() const { return params_; }

 private:
  ModelImpl* model_ = nullptr;
  std::map<std::string, int> params_;
};

using CallbackPtr = std::shared_ptr<Callback>;

// Returned by fit: one value per epoch for each metric.
struct History : Callback {
  std::vector<int> epoch;
  std::map<std::string, std::vector<double>> history;
  void on_train_begin(const Logs&) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
};

}  // namespace kiln
