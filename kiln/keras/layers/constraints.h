// Weight constraints (Keras 3's keras.constraints): a projection applied to a variable after
// each optimizer update, `variable.assign(constraint(variable))` (OptimizerImpl::apply_gradients
// does it for every updated variable that has one, eagerly and inside a traced step: the
// projection is written with kiln ops, so a compiled step records it).
//
// Keras' formulas, with eps = keras.backend.epsilon() = 1e-7 and
// norms = sqrt(sum(w^2, axis, keepdims=True)):
//   NonNeg:      w * (w >= 0)
//   MaxNorm:     w * clip(norms, 0, max_value) / (eps + norms)
//   UnitNorm:    w / (eps + norms)
//   MinMaxNorm:  w * (rate * clip(norms, min, max) + (1 - rate) * norms) / (eps + norms)
// By name ("non_neg", "max_norm", "unit_norm", "min_max_norm", or the class names "NonNeg",
// "MaxNorm", "UnitNorm", "MinMaxNorm") a constraint has Keras' default arguments.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

using Json = nlohmann::json;

class Constraint {
 public:
  enum class Kind { kNone, kNonNeg, kMaxNorm, kUnitNorm, kMinMaxNorm };
  // No constraint (defined() is false).
  Constraint() = default;
  // A constraint by Keras name, with Keras' defaults; kiln::Error listing the names otherwise.
  Constraint(const char* name);         // NOLINT: implicit, as Initializer's
  Constraint(const std::string& name);  // NOLINT
  Constraint(Kind kind, double max_value, double min_value, double rate, std::vector<int64_t> axis);

  bool defined() const { return kind_ != Kind::kNone; }
  Kind kind() const { return kind_; }
  // "NonNeg", "MaxNorm", "UnitNorm", "MinMaxNorm" ("" when undefined).
  std::string class_name() const;
  double max_value() const { return max_value_; }
  double min_value() const { return min_value_; }
  double rate() const { return rate_; }
  const std::vector<int64_t>& axis() const { return axis_; }
  // The projected value of `w` (kiln ops: traced when `w` is). An undefined constraint returns w.
  // kiln::Error when an axis is out of range for w's rank.
  Tensor operator()(const Tensor& w) const;
  // Keras' serialized form: {"module": "keras.constraints", "class_name": ..., "config": {...},
  // "registered_name": null}; null when undefined.
  Json config() const;
  // The constraint a config entry describes: null, a name, or {"class_name", "config"} (module
  // and registered_name optional). kiln::Error saying what is accepted otherwise.
  static Constraint from_config(const Json& value);

  friend bool operator==(const Constraint& a, const Constraint& b);

 private:
  Kind kind_ = Kind::kNone;
  double max_value_ = 0, min_value_ = 0, rate_ = 1;
  std::vector<int64_t> axis_;
};

namespace constraints {
inline Constraint non_neg() { return Constraint(Constraint::Kind::kNonNeg, 0, 0, 1, {}); }
inline Constraint max_norm(double max_value = 2, std::vector<int64_t> axis = {0}) {
  return Constraint(Constraint::Kind::kMaxNorm, max_value, 0, 1, std::move(axis));
}
inline Constraint unit_norm(std::vector<int64_t> axis = {0}) {
  return Constraint(Constraint::Kind::kUnitNorm, 0, 0, 1, std::move(axis));
}
inline Constraint min_max_norm(double min_value = 0, double max_value = 1, double rate = 1,
                               std::vector<int64_t> axis = {0}) {
  return Constraint(Constraint::Kind::kMinMaxNorm, max_value, min_value, rate, std::move(axis));
}
}  // namespace constraints

}  // namespace kiln
