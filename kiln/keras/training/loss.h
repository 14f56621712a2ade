// Losses (Keras' names and formulas): each maps (y_true, y_pred) to a scalar, the mean over
// the batch ("sum_over_batch_size"), optionally weighted per sample. A mask on y_pred
// (Tensor::keras_mask(), one value per sample: [batch] or [batch, timesteps]) excludes the
// masked samples from the mean. Numerically stable: from_logits versions use
// log_softmax / softplus; probability versions clip to [eps, 1 - eps] like Keras.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kiln/frontend/tensor.h"

namespace kiln {

class Loss;
namespace losses {
Loss sparse_categorical_crossentropy(bool from_logits, std::optional<int64_t> ignore_class);
}  // namespace losses

class Loss {
 public:
  using Fn = std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)>;
  Loss() = default;
  // A loss whose function returns the final scalar itself (it cannot take sample weights).
  // If y_pred carries a mask, kiln logs a warning once (it cannot exclude the masked positions).
  Loss(std::string name, Fn fn)
      : name_(std::move(name)), fn_(std::move(fn)), mask_warned_(std::make_shared<bool>(false)) {}
  // A loss whose function returns one value per sample (e.g. [batch] or [batch, timesteps]);
  // calling it reduces them as Keras' "sum_over_batch_size": the sum of the (weighted) values
  // over their number, or over the unmasked ones with a mask. The built-in losses are these.
  // `from_logits` records how the built-in crossentropies read y_pred (for saving a model's
  // compile configuration; it does not change `fn`).
  static Loss per_sample(std::string name, Fn fn, bool from_logits = false);
  // By name: "mean_squared_error" ("mse"), "mean_absolute_error" ("mae"),
  // "binary_crossentropy", "categorical_crossentropy", "sparse_categorical_crossentropy"
  // (probability inputs; use the functions below for from_logits=true).
  Loss(const char* name);                                // NOLINT: implicit
  Loss(const std::string& name) : Loss(name.c_str()) {}  // NOLINT: implicit

  // Another name throws kiln::Error listing the known ones. Calling an empty Loss throws too.
  // Bad shapes (named with both shapes and the loss) or a non-floating y_pred throw kiln::Error.
  // y_true and y_pred may differ by a trailing 1 in rank (Keras' squeeze_or_expand_to_same_rank);
  // y_true is cast to y_pred's dtype. The result is a scalar of y_pred's dtype.
  // sample_weight (per-sample losses only; Keras' sample_weight): non-negative weights of the
  // per-sample values, of their shape or of their leading axes ([batch] for [batch, timesteps]
  // values; a trailing 1 is dropped); the loss is sum(values * weights) / number of values
  // (over the unmasked values with a mask). Wrong shapes, negative weights, or weights given to
  // a scalar-returning loss throw kiln::Error.
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight = Tensor()) const;
  const std::string& name() const { return name_; }
  bool defined() const { return static_cast<bool>(fn_); }
  bool is_per_sample() const { return per_sample_; }
  bool from_logits() const { return from_logits_; }
  // sparse_categorical_crossentropy's ignore_class (for saving the compile configuration).
  const std::optional<int64_t>& ignore_class() const { return ignore_class_; }

 private:
  friend Loss losses::sparse_categorical_crossentropy(bool, std::optional<int64_t>);
  std::string name_;
  Fn fn_;
  bool per_sample_ = false;
  bool from_logits_ = false;
  std::optional<int64_t> ignore_class_{};
  std::shared_ptr<bool> mask_warned_;  // shared by copies: one warning per loss
};

namespace losses {
Loss mean_squared_error();
Loss mean_absolute_error();
// y_true in {0, 1} (float), y_pred probabilities or logits, same shape.
Loss binary_crossentropy(bool from_logits = false);
// y_true one-hot (float), y_pred probabilities or logits over the last axis.
Loss categorical_crossentropy(bool from_logits = false);
// y_true integer class ids (int32/int64; floats are truncated) of shape y_pred.shape[:-1] or
// with a trailing 1. Concrete labels outside [0, classes) throw kiln::Error.
// ignore_class (Keras): positions whose label is that value contribute zero loss and are left
// out of the mean (the per-sample values carry the mask of the others, and-ed with y_pred's).
Loss sparse_categorical_crossentropy(bool from_logits = false,
                                     std::optional<int64_t> ignore_class = std::nullopt);
}  // namespace losses

}  // namespace kiln
