// Keras' confusion-matrix metrics with streaming state: Precision, Recall and AUC (ROC,
// interpolated), accumulated over batches as counts (never an average of batch averages).
// y_true is a label per element (nonzero = positive), y_pred a probability per element of the
// same shape (a trailing 1 on either side is dropped); a mask on y_pred (keras_mask(), of
// y_pred's shape) leaves masked elements out.
#include <fmt/format.h>

#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/training/metric.h"
#include "kiln/keras/training/sample_weights.h"

namespace kiln {
namespace {

// Labels (true = positive), predictions and the weight of each element (0 when masked), as
// host vectors.
struct Elements {
  std::vector<bool> positive;
  std::vector<double> pred, weight;
};

Elements elements(const std::string& metric, const Tensor& y_true_in, const Tensor& y_pred_in,
                  const Tensor& sample_weight) {
  if (!y_true_in.defined() || !y_pred_in.defined())
    throw Error(
        fmt::format("metric \"{}\": y_true and y_pred must both be defined tensors", metric));
  Tensor t = y_true_in, p = y_pred_in;
  if (t.rank() == p.rank() + 1 && t.shape().dim(-1) == 1) t = squeeze(t, {-1});
  if (p.rank() == t.rank() + 1 && p.shape().dim(-1) == 1) p = squeeze(p, {-1});
  if (!(t.shape() == p.shape()))
    throw Error(fmt::format(
        "metric \"{}\": y_true has shape {} and y_pred has shape {}; they must be equal (or "
        "differ only by a trailing dimension of 1)",
        metric, y_true_in.shape().to_string(), y_pred_in.shape().to_string()));
  Elements e;
  e.pred = p.to_vector<double>();
  for (double v : t.to_vector<double>()) e.positive.push_back(v != 0);
  Tensor w = ones_like(cast(p, DType::f64));
  if (sample_weight.defined())
    w = w * detail::aligned_sample_weights("metric \"" + metric + "\"", sample_weight, w);
  e.weight = w.to_vector<double>();
  if (Tensor mask = y_pred_in.keras_mask(); mask.defined()) {
    if (!(mask.shape() == p.shape()) && !(mask.shape() == y_pred_in.shape()))
      throw Error(
          fmt::format("metric \"{}\": y_pred carries a mask of shape {}; it must have "
                      "y_pred's shape {}",
                      metric, mask.shape().to_string(), y_pred_in.shape().to_string()));
    std::vector<double> m = mask.to_vector<double>();
    for (size_t i = 0; i < m.size(); ++i) e.weight[i] *= double(m[i] != 0);
  }
  return e;
}

double divide_no_nan(double a, double b) { return b == 0 ? 0.0 : a / b; }

// Precision = TP / (TP + FP), recall = TP / (TP + FN), with y_pred > threshold predicted
// positive.
class PrecisionRecallImpl : public MetricImpl {
 public:
  PrecisionRecallImpl(std::string name, bool recall, double threshold)
      : MetricImpl(std::move(name)), recall_(recall), threshold_(threshold) {}
  std::shared_ptr<MetricImpl> clone() const override {
    return std::make_shared<PrecisionRecallImpl>(name(), recall_, threshold_);
  }
  void update_state(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight) override {
    Elements e = elements(name(), y_true, y_pred, sample_weight);
    for (size_t i = 0; i < e.pred.size(); ++i) {
      const double w = e.weight[i];
      const bool predicted = e.pred[i] > threshold_;
      tp_ += w * double(predicted && e.positive[i]);
      fp_ += w * double(predicted && !e.positive[i]);
      fn_ += w * double(!predicted && e.positive[i]);
    }
  }
  double result() const override { return divide_no_nan(tp_, tp_ + (recall_ ? fn_ : fp_)); }
  void reset_state() override { tp_ = fp_ = fn_ = 0; }

 private:
  bool recall_;
  double threshold_;
  double tp_ = 0, fp_ = 0, fn_ = 0;
};

// Keras' AUC(num_thresholds, curve="ROC", summation_method="interpolation"): confusion counts at
// thresholds -eps, 1/(n-1), ..., (n-2)/(n-1), 1+eps; the area under (false positive rate,
// recall) by the trapezoidal rule.
class AucImpl : public MetricImpl {
 public:
  AucImpl(std::string name, int num_thresholds) : MetricImpl(std::move(name)) {
    if (num_thresholds <= 1)
      throw Error(fmt::format("metric \"{}\": num_thresholds must be > 1, got {}", this->name(),
                              num_thresholds));
    constexpr double kEpsilon = 1e-7;
    thresholds_.push_back(0.0 - kEpsilon);
    for (int i = 0; i < num_thresholds - 2; ++i)
      thresholds_.push_back(double(i + 1) / double(num_thresholds - 1));
    thresholds_.push_back(1.0 + kEpsilon);
    reset_state();
  }
  std::shared_ptr<MetricImpl> clone() const override {
    return std::make_shared<AucImpl>(name(), int(thresholds_.size()));
  }
  void update_state(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight) override {
    Elements e = elements(name(), y_true, y_pred, sample_weight);
    for (size_t i = 0; i < e.pred.size(); ++i) {
      const double w = e.weight[i];
      if (w == 0) continue;
      for (size_t k = 0; k < thresholds_.size(); ++k) {
        const bool predicted = e.pred[i] > thresholds_[k];
        if (e.positive[i])
          (predicted ? tp_ : fn_)[k] += w;
        else
          (predicted ? fp_ : tn_)[k] += w;
      }
    }
  }
  double result() const override {
    double area = 0;
    for (size_t k = 0; k + 1 < thresholds_.size(); ++k) {
      const double r0 = divide_no_nan(tp_[k], tp_[k] + fn_[k]);
      const double r1 = divide_no_nan(tp_[k + 1], tp_[k + 1] + fn_[k + 1]);
      const double f0 = divide_no_nan(fp_[k], fp_[k] + tn_[k]);
      const double f1 = divide_no_nan(fp_[k + 1], fp_[k + 1] + tn_[k + 1]);
      area += (f0 - f1) * (r0 + r1) / 2;
    }
    return area;
  }
  void reset_state() override {
    for (auto* v : {&tp_, &fp_, &tn_, &fn_}) v->assign(thresholds_.size(), 0.0);
  }

 private:
  std::vector<double> thresholds_, tp_, fp_, tn_, fn_;
};

}  // namespace

namespace metrics {
Metric precision(const std::string& name, double threshold) {
  return Metric(std::make_shared<PrecisionRecallImpl>(name, false, threshold));
}
Metric recall(const std::string& name, double threshold) {
  return Metric(std::make_shared<PrecisionRecallImpl>(name, true, threshold));
}
Metric auc(const std::string& name, int num_thresholds) {
  return Metric(std::make_shared<AucImpl>(name, num_thresholds));
}
}  // namespace metrics

}  // namespace kiln
