// Losses with Keras 3's formulas and "sum_over_batch_size" reduction.
//
// Every loss first computes a per-sample value by reducing the last axis (mean for the
// regression losses and binary crossentropy, sum for the categorical ones) and then averages
// those over every remaining axis. Like Keras' LossFunctionWrapper, y_true and y_pred whose
// ranks differ by one with a trailing 1 on the longer one are brought to the same rank first
// (keras/src/losses/loss.py squeeze_or_expand_to_same_rank), and y_true is cast to y_pred's
// dtype. Everything is built from kiln ops, so gradients flow through GradientTape.
#include "kiln/keras/training/loss.h"
#include "kiln/keras/training/keras_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/training/sample_weights.h"
#include "kiln/runtime/log.h"

namespace kiln {
namespace {

// Keras' backend.epsilon().
constexpr double kBackendEpsilon = 1e-7;

[[noreturn]] void loss_shape_error(const std::string& loss, const Tensor& y_true,
                                   const Tensor& y_pred, const std::string& expected) {
  throw Error(fmt::format("{}: y_true has shape {} and y_pred has shape {}; {}", loss,
                          y_true.shape().to_string(), y_pred.shape().to_string(), expected));
}

void require_defined(const std::string& loss, const Tensor& y_true, const Tensor& y_pred) {
  if (!y_true.defined() || !y_pred.defined())
    throw Error(fmt::format("{}: y_true and y_pred must both be defined tensors (got {} and {})",
                            loss, y_true.defined() ? "a tensor" : "an undefined tensor",
                            y_pred.defined() ? "a tensor" : "an undefined tensor"));
}

void require_floating_pred(const std::string& loss, const Tensor& y_pred) {
  if (!is_floating(y_pred.dtype()))
    throw Error(fmt::format("{}: y_pred must be float32 or float64, got {} with shape {}", loss,
                            dtype_name(y_pred.dtype()), y_pred.shape().to_string()));
}

// Keras' squeeze_or_expand_to_same_rank(y_true, y_pred) with expand_rank_1=True, then an exact
// shape match; y_true is cast to y_pred's dtype.
std::pair<Tensor, Tensor> align_dense(const std::string& loss, const Tensor& y_true_in,
                                      const Tensor& y_pred_in) {
  require_defined(loss, y_true_in, y_pred_in);
  require_floating_pred(loss, y_pred_in);
  Tensor y_true = y_true_in, y_pred = y_pred_in;
  const int rt = y_true.rank(), rp = y_pred.rank();
  if (rt == rp + 1 && y_true.shape().dim(-1) == 1) {
    if (rp == 1)
      y_pred = expand_dims(y_pred, -1);
    else
      y_true = squeeze(y_true, {-1});
  } else if (rp == rt + 1 && y_pred.shape().dim(-1) == 1) {
    if (rt == 1)
      y_true = expand_dims(y_true, -1);
    else
      y_pred = squeeze(y_pred, {-1});
  }
  if (!(y_true.shape() == y_pred.shape()))
    loss_shape_error(loss, y_true_in, y_pred_in,
                     "they must be equal (or differ only by a trailing dimension of 1)");
  if (y_true.dtype() != y_pred.dtype()) y_true = cast(y_true, y_pred.dtype());
  return {y_true, y_pred};
}

// Per-sample values (the last axis already reduced) -> their mean: sum_over_batch_size.
// With a mask on y_pred (keras_mask(), e.g. [batch, timesteps] from Embedding(mask_zero)) the
// mean is over the unmasked samples only (Keras' apply_mask: 0 when every sample is masked);
// sample weights multiply the values first.
Tensor reduce_samples(const std::string& loss, const Tensor& per_sample, const Tensor& y_pred,
                      const Tensor& sample_weight) {
  Tensor values = per_sample;
  if (sample_weight.defined())
    values = values * detail::aligned_sample_weights(loss, sample_weight, values);
  Tensor mask = y_pred.keras_mask();
  // The loss's own mask (ignore_class), and-ed with y_pred's (Keras: in_mask & out_mask).
  if (Tensor own = per_sample.keras_mask(); own.defined()) {
    if (mask.defined() && mask.dtype() != DType::b8)
      mask = not_equal(mask, scalar(0, mask.dtype()));
    mask = mask.defined() && mask.shape() == own.shape() ? logical_and(mask, own) : own;
  }
  if (!mask.defined()) {
    if (!sample_weight.defined()) return mean(values);
    return sum(values) / element_count(values, {}, values.dtype());
  }
  if (!(mask.shape() == values.shape()))
    throw Error(fmt::format(
        "{}: y_pred carries a mask of shape {}, but the loss has one value per sample of shape "
        "{} (y_pred {}); the mask must cover y_pred's axes except the last",
        loss, mask.shape().to_string(), values.shape().to_string(), y_pred.shape().to_string()));
  if (mask.dtype() != DType::b8) mask = not_equal(mask, scalar(0, mask.dtype()));
  const DType t = values.dtype();
  Tensor count = sum(cast(mask, t));
  return sum(where(mask, values, zeros_like(values))) / maximum(count, scalar(1, t));
}

// The mean over the last axis (rank 0 is its own mean): per-sample values.
Tensor last_axis_mean(const Tensor& elementwise) {
  return elementwise.rank() == 0 ? elementwise : mean(elementwise, {-1});
}

Tensor clip_probabilities(const Tensor& p) {
  return minimum(maximum(p, scalar(kBackendEpsilon, p.dtype())),
                 scalar(1.0 - kBackendEpsilon, p.dtype()));
}

void require_rank_1(const std::string& loss, const Tensor& y_true, const Tensor& y_pred) {
  if (y_pred.rank() < 1)
    loss_shape_error(loss, y_true, y_pred, "y_pred must have at least one axis (the classes)");
}

// Integer class ids of shape y_pred.shape[:-1] (a trailing 1 is squeezed), as int64. Floating
// labels are cast (truncated), like Keras' cast to int. Concrete labels are range-checked.
Tensor sparse_labels(const std::string& loss, const Tensor& y_true_in, const Tensor& y_pred) {
  Tensor y_true = y_true_in;
  if (y_true.dtype() == DType::b8)
    throw Error(
        fmt::format("{}: y_true must hold integer class ids (int32/int64), got bool", loss));
  if (y_true.rank() == y_pred.rank() && y_true.rank() > 0 && y_true.shape().dim(-1) == 1)
    y_true = squeeze(y_true, {-1});
  Shape expected(std::vector<int64_t>(y_pred.shape().begin(), y_pred.shape().end() - 1));
  if (!(y_true.shape() == expected))
    loss_shape_error(loss, y_true_in, y_pred,
                     fmt::format("y_true must hold one class id per row, with shape {} (or with a "
                                 "trailing 1)",
                                 expected.to_string()));
  if (y_true.dtype() != DType::i64) y_true = cast(y_true, DType::i64);
  if (!y_true.is_symbolic()) {
    const int64_t classes = y_pred.shape().dim(-1);
    std::vector<int64_t> ids = y_true.to_vector<int64_t>();
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= classes)
        throw Error(
            fmt::format("{}: label {} at flat position {} is outside [0, {}) (y_pred "
                        "has {} classes on its last axis, shape {})",
                        loss, ids[i], i, classes, classes, y_pred.shape().to_string()));
  }
  return y_true;
}

}  // namespace

// ---------------------------------------------------------------- Loss

Loss::Loss(const char* name) {
  const std::string key = training_detail::lower_ascii(name ? name : "");
  if (key == "mean_squared_error" || key == "mse") {
    *this = losses::mean_squared_error();
  } else if (key == "mean_absolute_error" || key == "mae") {
    *this = losses::mean_absolute_error();
  } else if (key == "binary_crossentropy") {
    *this = losses::binary_crossentropy();
  } else if (key == "categorical_crossentropy") {
    *this = losses::categorical_crossentropy();
  } else if (key == "sparse_categorical_crossentropy") {
    *this = losses::sparse_categorical_crossentropy();
  } else {
    throw Error(fmt::format(
        "unknown loss \"{}\"; known losses: mean_squared_error (mse), mean_absolute_error (mae), "
        "binary_crossentropy, categorical_crossentropy, sparse_categorical_crossentropy (for "
        "logits use kiln::losses::...(/*from_logits=*/true))",
        name ? name : ""));
  }
}

Loss Loss::per_sample(std::string name, Fn fn, bool from_logits) {
  Loss l(std::move(name), std::move(fn));
  l.per_sample_ = true;
  l.from_logits_ = from_logits;
  return l;
}

Tensor Loss::operator()(const Tensor& y_true_in, const Tensor& y_pred_in,
                        const Tensor& sample_weight) const {
  // Keras' Loss computes in floatx: bfloat16 values (a mixed_bfloat16 model's outputs) are
  // cast to float32 first (the mask kept), so the loss and its reduction are float32.
  const Tensor y_pred = y_pred_in.defined() && y_pred_in.dtype() == DType::bf16
                            ? cast(y_pred_in, DType::f32).with_keras_mask(y_pred_in.keras_mask())
                            : y_pred_in;
  const Tensor y_true = y_true_in.defined() && y_true_in.dtype() == DType::bf16
                            ? cast(y_true_in, DType::f32)
                            : y_true_in;
  if (!fn_)
    throw Error(
        "Loss: calling an empty loss (default-constructed); give it a name or a "
        "function");
  if (!per_sample_) {
    if (sample_weight.defined())
      throw Error(fmt::format(
          "loss \"{}\" returns its own scalar and cannot weight samples; make it with "
          "Loss::per_sample (a function returning one value per sample) to use sample_weight",
          name_));
    // The function gets y_pred with its mask but reduces by itself: say once that kiln cannot
    // exclude the masked positions for it (a per-sample loss can).
    if (y_pred.keras_mask().defined() && mask_warned_ && !*mask_warned_) {
      *mask_warned_ = true;
      log_warning(fmt::format(
          "loss \"{}\" returns its own scalar, so kiln cannot leave out the masked positions of "
          "y_pred (keras_mask()); make it with Loss::per_sample (one value per sample) to have "
          "them excluded, or apply y_pred.keras_mask() inside it",
          name_));
    }
    return fn_(y_true, y_pred);
  }
  return reduce_samples(name_, fn_(y_true, y_pred), y_pred, sample_weight);
}

namespace losses {

// mean((y_true - y_pred)^2) over the last axis, then over the batch.
Loss mean_squared_error() {
  return Loss::per_sample("mean_squared_error", [](const Tensor& t, const Tensor& p) {
    auto [y_true, y_pred] = align_dense("mean_squared_error", t, p);
    return last_axis_mean(square(y_pred - y_true));
  });
}

// mean(|y_true - y_pred|) over the last axis, then over the batch.
Loss mean_absolute_error() {
  return Loss::per_sample("mean_absolute_error", [](const Tensor& t, const Tensor& p) {
    auto [y_true, y_pred] = align_dense("mean_absolute_error", t, p);
    return last_axis_mean(abs(y_pred - y_true));
  });
}

// Probabilities: p clipped to [eps, 1 - eps], -(y log p + (1 - y) log(1 - p)).
// Logits x: softplus(x) - x y = max(x, 0) - x y + log1p(exp(-|x|)), exact for any |x|
// (the value of TensorFlow's sigmoid_cross_entropy_with_logits and Keras' JAX backend).
Loss binary_crossentropy(bool from_logits) {
  return Loss::per_sample(
      "binary_crossentropy",
      [from_logits](const Tensor& t, const Tensor& p) {
        auto [y, x] = align_dense("binary_crossentropy", t, p);
        Tensor elementwise;
        if (from_logits) {
          elementwise = softplus(x) - x * y;
        } else {
          Tensor q = clip_probabilities(x);
          elementwise = -(y * log(q) + (1.0 - y) * log(1.0 - q));
        }
        return last_axis_mean(elementwise);
      },
      from_logits);
}

// Probabilities: p / sum(p, -1) clipped to [eps, 1 - eps], -sum(y log p, -1).
// Logits: -sum(y log_softmax(x), -1).
Loss categorical_crossentropy(bool from_logits) {
  return Loss::per_sample(
      "categorical_crossentropy",
      [from_logits](const Tensor& t, const Tensor& p) {
        const char* name = "categorical_crossentropy";
        require_defined(name, t, p);
        require_floating_pred(name, p);
        if (!(t.shape() == p.shape()))
          loss_shape_error(name, t, p, "y_true must be one-hot with y_pred's shape");
        require_rank_1(name, t, p);
        Tensor y = t.dtype() == p.dtype() ? t : cast(t, p.dtype());
        Tensor log_prob =
            from_logits ? log_softmax(p, -1) : log(clip_probabilities(p / sum(p, {-1}, true)));
        return -sum(y * log_prob, {-1});
      },
      from_logits);
}

// As categorical_crossentropy with y_true = one_hot(labels, classes).
Loss sparse_categorical_crossentropy(bool from_logits, std::optional<int64_t> ignore_class) {
  Loss l = Loss::per_sample(
      "sparse_categorical_crossentropy",
      [from_logits, ignore_class](const Tensor& t, const Tensor& p) {
        const char* name = "sparse_categorical_crossentropy";
        require_defined(name, t, p);
        require_floating_pred(name, p);
        require_rank_1(name, t, p);
        Tensor ids = t, valid;
        if (ignore_class) {
          // Keras: the ignored positions get label 0 for the computation, then loss 0.
          if (ids.rank() == p.rank() && ids.rank() > 0 && ids.shape().dim(-1) == 1)
            ids = squeeze(ids, {-1});
          valid = not_equal(ids, scalar(double(*ignore_class), ids.dtype()));
          ids = where(valid, ids, zeros_like(ids));
        }
        Tensor labels = sparse_labels(name, ids, p);
        Tensor log_prob =
            from_logits ? log_softmax(p, -1) : log(clip_probabilities(p / sum(p, {-1}, true)));
        Tensor y = one_hot(labels, p.shape().dim(-1), p.dtype());
        Tensor values = -sum(y * log_prob, {-1});
        if (!ignore_class) return values;
        return where(valid, values, zeros_like(values)).with_keras_mask(valid);
      },
      from_logits);
  l.ignore_class_ = ignore_class;
  return l;
}

}  // namespace losses
}  // namespace kiln
