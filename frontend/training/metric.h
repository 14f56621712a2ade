// Metrics (Keras' stateful metrics): update_state per batch, result(), reset_state per epoch.
#pragma once

#include <memory>
#include <string>

#include "frontend/tensor.h"

namespace kiln {

class MetricImpl {
 public:
  explicit MetricImpl(std::string name) : name_(std::move(name)) {}
  virtual ~MetricImpl() = default;
  virtual void update_state(const Tensor& y_true, const Tensor& y_pred) = 0;
  virtual double result() const = 0;
  virtual void reset_state() = 0;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

class Metric {
 public:
  Metric() = default;
  explicit Metric(std::shared_ptr<MetricImpl> impl) : impl_(std::move(impl)) {}
  // By name: "accuracy" (resolved by compile from the loss, as Keras does),
  // "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy".
  Metric(const char* name);  // NOLINT: implicit
  Metric(const std::string& name) : Metric(name.c_str()) {}  // NOLINT: implicit
  bool defined() const { return impl_ != nullptr; }
  MetricImpl* operator->() const;
  const std::string& requested_name() const { return requested_; }

 private:
  std::shared_ptr<MetricImpl> impl_;
  std::string requested_;
};

namespace metrics {
// Fraction of rows whose argmax(y_pred) equals the integer label y_true.
Metric sparse_categorical_accuracy(const std::string& name = "accuracy");
// Fraction of rows whose argmax(y_pred) equals argmax(y_true) (one-hot labels).
Metric categorical_accuracy(const std::string& name = "accuracy");
// Fraction of elements with (y_pred > threshold) == (y_true > 0.5).
Metric binary_accuracy(const std::string& name = "accuracy", double threshold = 0.5);
// Running mean of scalar values passed as y_pred (y_true ignored).
Metric mean(const std::string& name);
}  // namespace metrics

}  // namespace kiln
