// DTypePolicy: Keras 3's dtype policies (keras.DTypePolicy, keras.mixed_precision).
//
// A policy names two dtypes: the variable dtype (the dtype a layer creates its weights in) and
// the compute dtype (the dtype of its inputs, its computation and its outputs).
//   "float32", "float64", "bfloat16", any dtype kiln has ("int32", ...): both dtypes are it;
//   "mixed_bfloat16": variables float32, computation bfloat16.
// "float16" and "mixed_float16" are refused (kiln has no float16) with a kiln::Error that
// suggests "mixed_bfloat16"; any other name is a kiln::Error listing the valid ones.
//
// The global policy (mixed_precision::set_global_policy, Keras' keras.config.set_dtype_policy)
// is what a layer made without a `dtype` takes, read when the layer is constructed (as Keras).
// Layers use a policy this way (LayerImpl): weights are created in the variable dtype;
// floating inputs are cast to the compute dtype before `call` (Keras' autocast); floating
// variables are read cast to the compute dtype (LayerImpl::read_weight, Keras' AutocastScope),
// the cast being an op, so gradients reach the float32 variable in its own dtype.
//
// Serialized as Keras 3 writes it: {"module": "keras", "class_name": "DTypePolicy",
// "config": {"name": ...}, "registered_name": null}; read back from that or a plain name.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>

#include "kiln/ir/dtype.h"

namespace kiln {

using Json = nlohmann::json;

class DTypePolicy {
 public:
  // "float32".
  DTypePolicy();
  // A policy name (see above); kiln::Error for float16 policies and unknown names.
  DTypePolicy(const std::string& name);  // NOLINT: implicit, as Keras takes names everywhere
  DTypePolicy(const char* name);         // NOLINT
  DTypePolicy(DType dtype);              // NOLINT: the policy of that dtype's name

  const std::string& name() const { return name_; }
  DType compute_dtype() const { return compute_; }
  DType variable_dtype() const { return variable_; }
  // The variable and compute dtypes differ ("mixed_bfloat16").
  bool mixed() const { return compute_ != variable_; }

  // Keras' DTypePolicy.get_config(): {"name": ...}.
  Json get_config() const;
  // Keras 3's serialized form (the "dtype" entry of a layer config, see above).
  Json serialize() const;
  // A serialized policy, {"class_name": "DTypePolicy" | "FloatDTypePolicy", "config":
  // {"name"}}, or a plain name (older Keras files); kiln::Error otherwise.
  static DTypePolicy deserialize(const Json& value);
  // '<DTypePolicy "mixed_bfloat16">', as Keras' repr.
  std::string repr() const;

  friend bool operator==(const DTypePolicy& a, const DTypePolicy& b) { return a.name_ == b.name_; }

 private:
  std::string name_;
  DType compute_ = DType::f32, variable_ = DType::f32;
};

namespace mixed_precision {
// The policy layers made without a dtype take (Keras' set_global_policy / set_dtype_policy).
void set_global_policy(const DTypePolicy& policy);
// The global policy ("float32" until set).
DTypePolicy global_policy();

// Sets the global policy for its lifetime and restores the previous one (tests, scoped use).
class PolicyScope {
 public:
  explicit PolicyScope(const DTypePolicy& policy);
  ~PolicyScope();
  PolicyScope(const PolicyScope&) = delete;
  PolicyScope& operator=(const PolicyScope&) = delete;

 private:
  DTypePolicy previous_;
};
}  // namespace mixed_precision

}  // namespace kiln
