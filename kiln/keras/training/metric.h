// Metrics (Keras' stateful metrics): update_state per batch, result(), reset_state per epoch.
#pragma once

#include <memory>
#include <string>

#include "kiln/frontend/tensor.h"
#include "kiln/keras/training/loss.h"

namespace kiln {

class MetricImpl {
 public:
  explicit MetricImpl(std::string name) : name_(std::move(name)) {}
  virtual ~MetricImpl() = default;
  // Accumulates one batch (concrete tensors). `sample_weight` (optional, >= 0) weighs each
  // sample: of the per-sample values' shape or of its leading axes ([batch]); the result is
  // then sum(value * weight) / sum(weight) (Keras' weighted metrics). Bad shapes or dtypes
  // throw kiln::Error.
  virtual void update_state(const Tensor& y_true, const Tensor& y_pred,
                            const Tensor& sample_weight = Tensor()) = 0;
  // total / count over the batches since the last reset (0 before any).
  virtual double result() const = 0;
  virtual void reset_state() = 0;
  // A new metric of the same kind, name and settings, with empty state.
  virtual std::shared_ptr<MetricImpl> clone() const = 0;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

class Metric {
 public:
  Metric() = default;
  // `requested` is the name the user asked for ("accuracy"); empty for metrics built directly.
  explicit Metric(std::shared_ptr<MetricImpl> impl, std::string requested = {})
      : impl_(std::move(impl)), requested_(std::move(requested)) {}
  // By name (case-insensitive): "sparse_categorical_accuracy", "categorical_accuracy",
  // "binary_accuracy", "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy" (k 5),
  // "mean_absolute_error" / "mae", "precision", "recall", "auc", and "accuracy" / "acc". The last
  // two make a metric named as requested that picks binary, sparse categorical or categorical
  // accuracy from the shapes of its first batch, as Keras 3's compile does (binary if
  // y_pred.shape[-1] == 1; sparse if y_true has lower rank than y_pred, or y_true.shape[-1] == 1 <
  // y_pred.shape[-1]; else categorical); resolve_metric() fixes the choice from the loss instead.
  // Unknown names throw kiln::Error.
  Metric(const char* name);                                  // NOLINT: implicit
  Metric(const std::string& name) : Metric(name.c_str()) {}  // NOLINT: implicit
  bool defined() const { return impl_ != nullptr; }
  // Throws kiln::Error on an empty handle.
  MetricImpl* operator->() const;
  const std::string& requested_name() const { return requested_; }
  // The same metric with fresh state (its own copy: one per model output).
  Metric fresh() const;

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
// Running mean of the values passed as y_pred (every element counts once; y_true ignored).
Metric mean(const std::string& name);
// The label is among the k largest predictions (ties at the k-th value count as in, as
// Keras' in_top_k): one-hot labels, or integer labels (the sparse form).
Metric top_k_categorical_accuracy(int k = 5,
                                  const std::string& name = "top_k_categorical_accuracy");
Metric sparse_top_k_categorical_accuracy(
    int k = 5, const std::string& name = "sparse_top_k_categorical_accuracy");
// mean(|y_true - y_pred|) over the last axis, averaged over the samples.
Metric mean_absolute_error(const std::string& name = "mean_absolute_error");
// Streaming confusion counts (keras/training/confusion_metrics.cc): labels nonzero =
// positive, y_pred > threshold predicted positive. Precision TP / (TP + FP), recall
// TP / (TP + FN), 0 when the denominator is 0.
Metric precision(const std::string& name = "precision", double threshold = 0.5);
Metric recall(const std::string& name = "recall", double threshold = 0.5);
// Keras' AUC: the ROC area from confusion counts at num_thresholds thresholds in [0, 1],
// trapezoidal rule.
Metric auc(const std::string& name = "auc", int num_thresholds = 200);
}  // namespace metrics

// Keras' compile-time choice of accuracy: when `m` was requested as "accuracy" or "acc",
// returns a new metric of the same name that is sparse categorical accuracy for
// sparse_categorical_crossentropy, categorical accuracy for categorical_crossentropy and
// binary accuracy for binary_crossentropy. Any other metric or loss: `m` itself.
Metric resolve_metric(const Metric& m, const Loss& loss);

}  // namespace kiln
