// Keras' accuracy metrics and Mean (keras/src/metrics/accuracy_metrics.py, reduction_metrics.py):
// each batch contributes per-element match values (1 or 0) to a running total and count, kept
// in double; result() is total / count (0 before the first batch, like divide_no_nan).
#include "kiln/keras/training/metric.h"
#include "kiln/keras/training/keras_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/training/sample_weights.h"

namespace kiln {
namespace {

bool is_accuracy_alias(const std::string& name) {
  const std::string n = training_detail::lower_ascii(name);
  return n == "accuracy" || n == "acc";
}

[[noreturn]] void metric_shape_error(const std::string& metric, const Tensor& y_true,
                                     const Tensor& y_pred, const std::string& expected) {
  throw Error(fmt::format("metric \"{}\": y_true has shape {} and y_pred has shape {}; {}", metric,
                          y_true.shape().to_string(), y_pred.shape().to_string(), expected));
}

void require_inputs(const std::string& metric, const Tensor& y_true, const Tensor& y_pred) {
  if (!y_true.defined() || !y_pred.defined())
    throw Error(
        fmt::format("metric \"{}\": y_true and y_pred must both be defined tensors", metric));
}

// A running mean of per-element values produced by matches().
class MeanMetricImpl : public MetricImpl {
 public:
  using MetricImpl::MetricImpl;
  // A mask on y_pred (keras_mask(), one value per sample) leaves masked samples out; sample
  // weights weigh the values (total += value * weight, count += weight).
  void update_state(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight) override {
    Tensor values = cast(matches(y_true, y_pred), DType::f64);
    Tensor weight = ones_like(values);
    if (sample_weight.defined())
      weight = weight *
               detail::aligned_sample_weights("metric \"" + name() + "\"", sample_weight, values);
    if (Tensor mask = y_pred.keras_mask(); mask.defined()) {
      if (!(mask.shape() == values.shape()))
        throw Error(fmt::format(
            "metric \"{}\": y_pred carries a mask of shape {}, but the metric has one value per "
            "sample of shape {} (y_pred {})",
            name(), mask.shape().to_string(), values.shape().to_string(),
            y_pred.shape().to_string()));
      weight = weight * cast(mask, DType::f64);
    }
    total_ += sum(values * weight).item<double>();
    count_ += sum(weight).item<double>();
  }
  double result() const override { return count_ == 0 ? 0.0 : total_ / count_; }
  void reset_state() override { total_ = count_ = 0; }

 protected:
  // One value per sample (bool or numeric); each counts once.
  virtual Tensor matches(const Tensor& y_true, const Tensor& y_pred) = 0;

 private:
  double total_ = 0, count_ = 0;
};

// argmax(y_pred, -1) == y_true; y_true of shape y_pred.shape[:-1] or with a trailing 1.
class SparseCategoricalAccuracyImpl : public MeanMetricImpl {
 public:
  std::shared_ptr<MetricImpl> clone() const override {
    return std::make_shared<SparseCategoricalAccuracyImpl>(*this);
  }
  using MeanMetricImpl::MeanMetricImpl;

 protected:
  Tensor matches(const Tensor& y_true_in, const Tensor& y_pred) override {
    require_inputs(name(), y_true_in, y_pred);
    if (y_pred.rank() < 1)
      metric_shape_error(name(), y_true_in, y_pred, "y_pred needs a class axis");
    Tensor y_true = y_true_in;
    if (y_true.rank() == y_pred.rank() && y_true.shape().dim(-1) == 1)
      y_true = squeeze(y_true, {-1});
    Shape expected(std::vector<int64_t>(y_pred.shape().begin(), y_pred.shape().end() - 1));
    if (!(y_true.shape() == expected))
      metric_shape_error(
          name(), y_true_in, y_pred,
          fmt::format("integer labels must have shape {} (or a trailing 1)", expected.to_string()));
    Tensor predicted = argmax(y_pred, -1);  // int64
    // Keras casts the prediction to the labels' dtype (float labels compare as floats).
    if (is_floating(y_true.dtype())) return equal(cast(predicted, y_true.dtype()), y_true);
    return equal(predicted, cast(y_true, DType::i64));
  }
};

// argmax(y_true, -1) == argmax(y_pred, -1) (one-hot labels).
class CategoricalAccuracyImpl : public MeanMetricImpl {
 public:
  std::shared_ptr<MetricImpl> clone() const override {
    return std::make_shared<CategoricalAccuracyImpl>(*this);
  }
  using MeanMetricImpl::MeanMetricImpl;

 protected:
  Tensor matches(const Tensor& y_true, const Tensor& y_pred) override {
    require_inputs(name(), y_true, y_pred);
    if (!(y_true.shape() == y_pred.shape()) || y_pred.rank() < 1)
      metric_shape_error(name(), y_true, y_pred, "one-hot labels must have y_pred's shape");
    return equal(argmax(y_true, -1), argmax(y_pred, -1));
  }
};

// (y_pred > threshold) == (y_true > 0.5), elementwise; shapes aligned like Keras'
// squeeze_or_expand_to_same_rank ((N,) against (N, 1) is accepted).
class BinaryAccuracyImpl : public MeanMetricImpl {
 public:
  std::shared_ptr<MetricImpl> clone() const override {
    return std::make_shared<BinaryAccuracyImpl>(*this);
  }
  BinaryAccuracyImpl(std::string name, double threshold)
      : MeanMetricImpl(std::move(name)), threshold_(threshold) {}

 protected:
  Tensor matches(const Tensor& y_true_in, const Tensor& y_pred_in) override {
    require_inputs(name(), y_true_in, y_pred_in);
    Tensor y_true = y_true_in, y_pred = y_pred_in;
    const int rt = y_true.rank(), rp = y_pred.rank();
    if (rt == rp + 1 && y_true.shape().dim(-1) == 1)
      y_true = squeeze(y_true, {-1});
    else if (rp == rt + 1 && y_pred.shape().dim(-1) == 1)
      y_pred = squeeze(y_pred, {-1});
    if (!(y_true.shape() == y_pred.shape()))
      metric_shape_error(name(), y_true_in, y_pred_in,
                         "they must be equal (or differ only by a trailing dimension of 1)");
    if (!is_floating(y_pred.dtype())) y_pred = cast(y_pred, DType::f64);
    Tensor predicted = greater(y_pred, scalar(threshold_, y_pred.dtype()));
    Tensor actual = greater(cast(y_true, DType::f64), scalar(0.5, DType::f64));
    return equal(predicted, actual);
  }

 private:
  double threshold_;
};

// The label's prediction is among the k largest of its row: fewer than k classes score higher
// (Keras' in_top_k). One-hot labels (sparse = false: argmax of y_true) or integer labels.
class TopKImpl : public MeanMetricImpl {
 public:
  std::shared_ptr<MetricImpl> clone() const override { return std::make_shared<TopKImpl>(*this); }
  TopKImpl(std::string name, int k, bool sparse)
      : MeanMetricImpl(std::move(name)), k_(k), sparse_(sparse) {
    if (k <= 0)
      throw Error(fmt::format("metric \"{}\": k must be positive, got {}", this->name(), k));
  }

 protected:
  Tensor matches(const Tensor& y_true_in, const Tensor& y_pred) override {
    require_inputs(name(), y_true_in, y_pred);
    if (y_pred.rank() < 1)
      metric_shape_error(name(), y_true_in, y_pred, "y_pred needs a class axis");
    Tensor labels;
    if (sparse_) {
      labels = y_true_in;
      if (labels.rank() == y_pred.rank() && labels.shape().dim(-1) == 1)
        labels = squeeze(labels, {-1});
      Shape expected(std::vector<int64_t>(y_pred.shape().begin(), y_pred.shape().end() - 1));
      if (!(labels.shape() == expected))
        metric_shape_error(name(), y_true_in, y_pred,
                           fmt::format("integer labels must have shape {} (or a trailing 1)",
                                       expected.to_string()));
      labels = cast(labels, DType::i64);
    } else {
      if (!(y_true_in.shape() == y_pred.shape()))
        metric_shape_error(name(), y_true_in, y_pred, "one-hot labels must have y_pred's shape");
      labels = argmax(y_true_in, -1);
    }
    const int64_t classes = y_pred.shape().dim(-1);
    Tensor at_label = sum(y_pred * one_hot(labels, classes, y_pred.dtype()), {-1}, true);
    Tensor higher = sum(cast(greater(y_pred, at_label), DType::i64), {-1});
    return less(higher, scalar(double(k_), DType::i64));
  }

 private:
  int k_;
  bool sparse_;
};

// Keras' MeanAbsoluteError metric: per sample mean(|y_true - y_pred|) over the last axis.
class MeanAbsoluteErrorImpl : public MeanMetricImpl {
 public:
  std::shared_ptr<MetricImpl> clone() const override {
    return std::make_shared<MeanAbsoluteErrorImpl>(*this);
  }
  using MeanMetricImpl::MeanMetricImpl;

 protected:
  Tensor matches(const Tensor& y_true, const Tensor& y_pred) override {
    require_inputs(name(), y_true, y_pred);
    if (!(y_true.shape() == y_pred.shape()) || y_pred.rank() < 1)
      metric_shape_error(name(), y_true, y_pred, "they must have the same shape (rank >= 1)");
    Tensor p = cast(y_pred, DType::f64), t = cast(y_true, DType::f64);
    return mean(abs(p - t), {-1});
  }
};

// Keras' Mean: every element of y_pred is one value.
class MeanImpl : public MeanMetricImpl {
 public:
  std::shared_ptr<MetricImpl> clone() const override { return std::make_shared<MeanImpl>(*this); }
  using MeanMetricImpl::MeanMetricImpl;

 protected:
  Tensor matches(const Tensor&, const Tensor& values) override {
    if (!values.defined())
      throw Error(fmt::format("metric \"{}\": the value (y_pred) is undefined", name()));
    return values;
  }
};

std::unique_ptr<MetricImpl> make_accuracy(const std::string& kind, const std::string& name) {
  if (kind == "binary") return std::make_unique<BinaryAccuracyImpl>(name, 0.5);
  if (kind == "categorical") return std::make_unique<CategoricalAccuracyImpl>(name);
  return std::make_unique<SparseCategoricalAccuracyImpl>(name);
}

// "accuracy" before compile knows the loss: picks the kind from the first batch's shapes
// (keras/src/trainers/compile_utils.py is_binary_or_sparse_categorical) and keeps it.
class AutoAccuracyImpl : public MetricImpl {
 public:
  using MetricImpl::MetricImpl;
  std::shared_ptr<MetricImpl> clone() const override {
    return std::make_shared<AutoAccuracyImpl>(name());
  }
  void update_state(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight) override {
    if (!chosen_) {
      require_inputs(name(), y_true, y_pred);
      const int rt = y_true.rank(), rp = y_pred.rank();
      const int64_t t_last = rt > 0 ? y_true.shape().dim(-1) : 1;
      const int64_t p_last = rp > 0 ? y_pred.shape().dim(-1) : 1;
      const bool binary = p_last == 1;
      const bool sparse = rt < rp || (t_last == 1 && p_last > 1);
      chosen_ = make_accuracy(binary ? "binary" : sparse ? "sparse" : "categorical", name());
    }
    chosen_->update_state(y_true, y_pred, sample_weight);
  }
  double result() const override { return chosen_ ? chosen_->result() : 0.0; }
  void reset_state() override {
    if (chosen_) chosen_->reset_state();
  }

 private:
  std::unique_ptr<MetricImpl> chosen_;
};

}  // namespace

Metric::Metric(const char* name_in) : requested_(name_in ? name_in : "") {
  const std::string key = training_detail::lower_ascii(requested_);
  if (key == "accuracy" || key == "acc")
    impl_ = std::make_shared<AutoAccuracyImpl>(requested_);
  else if (key == "sparse_categorical_accuracy")
    impl_ = std::make_shared<SparseCategoricalAccuracyImpl>(key);
  else if (key == "categorical_accuracy")
    impl_ = std::make_shared<CategoricalAccuracyImpl>(key);
  else if (key == "binary_accuracy")
    impl_ = std::make_shared<BinaryAccuracyImpl>(key, 0.5);
  else if (key == "top_k_categorical_accuracy")
    impl_ = std::make_shared<TopKImpl>(key, 5, false);
  else if (key == "sparse_top_k_categorical_accuracy")
    impl_ = std::make_shared<TopKImpl>(key, 5, true);
  else if (key == "mean_absolute_error" || key == "mae")
    impl_ = std::make_shared<MeanAbsoluteErrorImpl>(key);
  else if (key == "precision" || key == "recall" || key == "auc")
    impl_ = (key == "precision" ? metrics::precision(key)
             : key == "recall"  ? metrics::recall(key)
                                : metrics::auc(key))
                .impl_;
  else
    throw Error(
        fmt::format("unknown metric \"{}\"; known metrics: accuracy (acc), "
                    "sparse_categorical_accuracy, categorical_accuracy, binary_accuracy, "
                    "top_k_categorical_accuracy, sparse_top_k_categorical_accuracy, "
                    "mean_absolute_error (mae), precision, recall, auc (a running mean: "
                    "kiln::metrics::mean(name))",
                    requested_));
}

Metric Metric::fresh() const {
  std::shared_ptr<MetricImpl> copy = operator->()->clone();
  copy->reset_state();
  return Metric(std::move(copy), requested_);
}

MetricImpl* Metric::operator->() const {
  if (!impl_)
    throw Error(
        "Metric: the handle is empty (default-constructed); create one with a name "
        "(\"accuracy\") or a factory in kiln::metrics");
  return impl_.get();
}

namespace metrics {
Metric sparse_categorical_accuracy(const std::string& name) {
  return Metric(std::make_shared<SparseCategoricalAccuracyImpl>(name));
}
Metric categorical_accuracy(const std::string& name) {
  return Metric(std::make_shared<CategoricalAccuracyImpl>(name));
}
Metric binary_accuracy(const std::string& name, double threshold) {
  return Metric(std::make_shared<BinaryAccuracyImpl>(name, threshold));
}
Metric mean(const std::string& name) { return Metric(std::make_shared<MeanImpl>(name)); }
Metric top_k_categorical_accuracy(int k, const std::string& name) {
  return Metric(std::make_shared<TopKImpl>(name, k, false));
}
Metric sparse_top_k_categorical_accuracy(int k, const std::string& name) {
  return Metric(std::make_shared<TopKImpl>(name, k, true));
}
Metric mean_absolute_error(const std::string& name) {
  return Metric(std::make_shared<MeanAbsoluteErrorImpl>(name));
}
}  // namespace metrics

Metric resolve_metric(const Metric& m, const Loss& loss) {
  if (!m.defined() || !is_accuracy_alias(m.requested_name()) || !loss.defined()) return m;
  const std::string& l = loss.name();
  std::string kind;
  if (l == "sparse_categorical_crossentropy")
    kind = "sparse";
  else if (l == "categorical_crossentropy")
    kind = "categorical";
  else if (l == "binary_crossentropy")
    kind = "binary";
  else
    return m;
  return Metric(std::shared_ptr<MetricImpl>(make_accuracy(kind, m.requested_name())),
                m.requested_name());
}

}  // namespace kiln
