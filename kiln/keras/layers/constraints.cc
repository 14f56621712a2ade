// Keras 3's weight constraints (keras/src/constraints/constraints.py), as kiln ops.
#include "kiln/keras/layers/constraints.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"

namespace kiln {
namespace {

constexpr double kConstraintEpsilon = 1e-7;  // keras.backend.epsilon()

Constraint::Kind kind_of(const std::string& name) {
  if (name == "non_neg" || name == "NonNeg") return Constraint::Kind::kNonNeg;
  if (name == "max_norm" || name == "MaxNorm") return Constraint::Kind::kMaxNorm;
  if (name == "unit_norm" || name == "UnitNorm") return Constraint::Kind::kUnitNorm;
  if (name == "min_max_norm" || name == "MinMaxNorm") return Constraint::Kind::kMinMaxNorm;
  throw Error(fmt::format(
      "unknown constraint \"{}\"; kiln has Keras' \"non_neg\", \"max_norm\", \"unit_norm\" and "
      "\"min_max_norm\" (or their class names NonNeg, MaxNorm, UnitNorm, MinMaxNorm)",
      name));
}

Constraint with_defaults(Constraint::Kind kind) {
  switch (kind) {
    case Constraint::Kind::kNonNeg:
      return constraints::non_neg();
    case Constraint::Kind::kMaxNorm:
      return constraints::max_norm();
    case Constraint::Kind::kUnitNorm:
      return constraints::unit_norm();
    case Constraint::Kind::kMinMaxNorm:
      return constraints::min_max_norm();
    default:
      return {};
  }
}

// Keras writes an axis as it was given: one integer, or a list.
Json axis_json(const std::vector<int64_t>& axis) {
  return axis.size() == 1 ? Json(axis[0]) : Json(axis);
}

}  // namespace

Constraint::Constraint(const char* name) : Constraint(std::string(name)) {}
Constraint::Constraint(const std::string& name) { *this = with_defaults(kind_of(name)); }

Constraint::Constraint(Kind kind, double max_value, double min_value, double rate,
                       std::vector<int64_t> axis)
    : kind_(kind),
      max_value_(max_value),
      min_value_(min_value),
      rate_(rate),
      axis_(std::move(axis)) {
  bool norm = kind == Kind::kMaxNorm || kind == Kind::kUnitNorm || kind == Kind::kMinMaxNorm;
  if (norm && axis_.empty())
    throw Error(fmt::format("{}: give the axis (or axes) to take the norm over", class_name()));
  if (kind == Kind::kMaxNorm && !(max_value >= 0))
    throw Error(fmt::format("MaxNorm: max_value must be >= 0, got {}", max_value));
  if (kind == Kind::kMinMaxNorm && !(min_value <= max_value))
    throw Error(
        fmt::format("MinMaxNorm: min_value ({}) must be <= max_value ({})", min_value, max_value));
}

std::string Constraint::class_name() const {
  switch (kind_) {
    case Kind::kNonNeg:
      return "NonNeg";
    case Kind::kMaxNorm:
      return "MaxNorm";
    case Kind::kUnitNorm:
      return "UnitNorm";
    case Kind::kMinMaxNorm:
      return "MinMaxNorm";
    default:
      return "";
  }
}

Tensor Constraint::operator()(const Tensor& w) const {
  if (kind_ == Kind::kNone) return w;
  const DType t = w.dtype();
  if (kind_ == Kind::kNonNeg) return w * cast(greater_equal(w, scalar(0, t)), t);
  Axes axes;
  for (int64_t a : axis_) {
    int64_t r = a < 0 ? a + w.rank() : a;
    if (r < 0 || r >= w.rank())
      throw Error(fmt::format("{} constraint: axis {} is out of range for a weight of shape {}",
                              class_name(), a, w.shape().to_string()));
    axes.push_back(r);
  }
  Tensor norms = sqrt(sum(square(w), axes, /*keepdims=*/true));
  Tensor denom = norms + scalar(kConstraintEpsilon, t);
  if (kind_ == Kind::kUnitNorm) return w / denom;
  Tensor clipped = minimum(maximum(norms, scalar(kind_ == Kind::kMaxNorm ? 0.0 : min_value_, t)),
                           scalar(max_value_, t));
  Tensor desired =
      kind_ == Kind::kMaxNorm ? clipped : clipped * scalar(rate_, t) + norms * scalar(1 - rate_, t);
  return w * (desired / denom);
}

Json Constraint::config() const {
  if (kind_ == Kind::kNone) return nullptr;
  Json config = Json::object();
  if (kind_ == Kind::kMaxNorm) {
    config["max_value"] = max_value_;
    config["axis"] = axis_json(axis_);
  } else if (kind_ == Kind::kUnitNorm) {
    config["axis"] = axis_json(axis_);
  } else if (kind_ == Kind::kMinMaxNorm) {
    config["min_value"] = min_value_;
    config["max_value"] = max_value_;
    config["rate"] = rate_;
    config["axis"] = axis_json(axis_);
  }
  return Json{{"module", "keras.constraints"},
              {"class_name", class_name()},
              {"config", config},
              {"registered_name", nullptr}};
}

Constraint Constraint::from_config(const Json& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return Constraint(v.get<std::string>());
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string())
    throw Error(
        fmt::format("a constraint should be null, a name such as \"non_neg\", or {{\"class_name\": "
                    "\"MaxNorm\", \"config\": {{...}}}}; got {:.200}",
                    v.dump()));
  const std::string name = v["class_name"].get<std::string>();
  Constraint c = with_defaults(kind_of(name));
  const Json config = v.contains("config") && !v["config"].is_null() ? v["config"] : Json::object();
  if (!config.is_object())
    throw Error(fmt::format("constraint {}: \"config\" should be an object, got {:.200}", name,
                            config.dump()));
  auto number = [&](const char* key, double fallback) {
    if (!config.contains(key) || config[key].is_null()) return fallback;
    if (!config[key].is_number())
      throw Error(fmt::format("constraint {}: \"{}\" should be a number, got {}", name, key,
                              config[key].dump()));
    return config[key].get<double>();
  };
  std::vector<int64_t> axis = c.axis_;
  if (config.contains("axis") && !config["axis"].is_null()) {
    const Json& a = config["axis"];
    if (a.is_number_integer()) {
      axis = {a.get<int64_t>()};
    } else if (a.is_array() && !a.empty() && std::all_of(a.begin(), a.end(), [](const Json& e) {
                 return e.is_number_integer();
               })) {
      axis = a.get<std::vector<int64_t>>();
    } else {
      throw Error(
          fmt::format("constraint {}: \"axis\" should be an integer or a list of them, "
                      "got {}",
                      name, a.dump()));
    }
  }
  std::vector<std::string> known;
  if (c.kind_ == Kind::kMaxNorm) known = {"max_value", "axis"};
  if (c.kind_ == Kind::kUnitNorm) known = {"axis"};
  if (c.kind_ == Kind::kMinMaxNorm) known = {"min_value", "max_value", "rate", "axis"};
  for (const auto& [key, value] : config.items())
    if (std::find(known.begin(), known.end(), key) == known.end() && !value.is_null())
      throw Error(fmt::format("constraint {} has no argument \"{}\" (it takes: {})", name, key,
                              fmt::join(known, ", ")));
  return Constraint(c.kind_, number("max_value", c.max_value_), number("min_value", c.min_value_),
                    number("rate", c.rate_),
                    c.kind_ == Kind::kNonNeg ? std::vector<int64_t>{} : axis);
}

bool operator==(const Constraint& a, const Constraint& b) {
  return a.kind_ == b.kind_ && a.max_value_ == b.max_value_ && a.min_value_ == b.min_value_ &&
         a.rate_ == b.rate_ && a.axis_ == b.axis_;
}

}  // namespace kiln
