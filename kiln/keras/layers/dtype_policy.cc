#include "kiln/keras/layers/dtype_policy.h"

#include <fmt/format.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "kiln/ir/error.h"

namespace kiln {
namespace {

std::mutex& policy_mutex() {
  static std::mutex m;
  return m;
}
DTypePolicy& global_policy_storage() {
  static DTypePolicy p;
  return p;
}

}  // namespace

DTypePolicy::DTypePolicy() : name_("float32") {}

DTypePolicy::DTypePolicy(const char* name) : DTypePolicy(std::string(name)) {}

DTypePolicy::DTypePolicy(const std::string& name) : name_(name) {
  if (name == "float16" || name == "mixed_float16" || name == "half" || name == "f16")
    throw Error(fmt::format(
        "dtype policy \"{}\": kiln has no float16 dtype; use \"mixed_bfloat16\" (variables "
        "float32, computation bfloat16) or \"bfloat16\" instead",
        name));
  if (name == "mixed_bfloat16") {
    compute_ = DType::bf16;
    variable_ = DType::f32;
    return;
  }
  DType t;
  try {
    t = parse_dtype(name);
  } catch (const Error&) {
    throw Error(fmt::format(
        "Cannot convert \"{}\" to a mixed precision DTypePolicy. Valid policies include "
        "\"mixed_bfloat16\" and the name of any dtype kiln has such as \"float32\", "
        "\"float64\" or \"bfloat16\"",
        name));
  }
  name_ = std::string(dtype_name(t));  // "f32" -> "float32", as Keras' standardize_dtype
  compute_ = variable_ = t;
}

DTypePolicy::DTypePolicy(DType dtype)
    : name_(std::string(dtype_name(dtype))), compute_(dtype), variable_(dtype) {}

Json DTypePolicy::get_config() const { return Json{{"name", name_}}; }

Json DTypePolicy::serialize() const {
  return Json{{"module", "keras"},
              {"class_name", "DTypePolicy"},
              {"config", get_config()},
              {"registered_name", nullptr}};
}

DTypePolicy DTypePolicy::deserialize(const Json& v) {
  if (v.is_string()) return DTypePolicy(v.get<std::string>());
  if (v.is_object() && v.contains("config") && v["config"].is_object() &&
      v["config"].contains("name") && v["config"]["name"].is_string()) {
    std::string cls = v.value("class_name", std::string("DTypePolicy"));
    if (cls != "DTypePolicy" && cls != "FloatDTypePolicy")
      throw Error(fmt::format(
          "dtype policy class \"{}\" is not supported by kiln (only DTypePolicy: float and "
          "mixed policies; quantized policies are not)",
          cls));
    return DTypePolicy(v["config"]["name"].get<std::string>());
  }
  throw Error(
      fmt::format("a dtype policy should be a name such as \"mixed_bfloat16\" or {{\"class_name\": "
                  "\"DTypePolicy\", \"config\": {{\"name\": ...}}}}, got {}",
                  v.dump()));
}

std::string DTypePolicy::repr() const { return fmt::format("<DTypePolicy \"{}\">", name_); }

namespace mixed_precision {

void set_global_policy(const DTypePolicy& policy) {
  std::lock_guard lock(policy_mutex());
  global_policy_storage() = policy;
}

DTypePolicy global_policy() {
  std::lock_guard lock(policy_mutex());
  return global_policy_storage();
}

PolicyScope::PolicyScope(const DTypePolicy& policy) : previous_(global_policy()) {
  set_global_policy(policy);
}
PolicyScope::~PolicyScope() { set_global_policy(previous_); }

}  // namespace mixed_precision
}  // namespace kiln
