// Reading a layer's config back: the counterpart of get_config (Keras' from_config).
//
// ConfigReader reads one config (a JSON object) with errors that name the class, the layer and
// the entry; custom layers' factories use it too (keras/saving/serialization.h, which includes
// this header, describes the layer registry). The entry readers below (namespace layer_config)
// are shared by the built-in layers' from_config functions, each in its layer's .cc beside
// get_config, and by keras/saving/; they are not part of the user API.
//
// Read entries: every ConfigReader made on the very config object that a ConfigReadRecord
// records shares that record's set of read entries (has, get, optional, at and name mark an
// entry as read). layer_from_config (keras/saving/serialization.cc) records the config it
// hands to a factory, and afterwards refuses each entry that no reader read unless the layer
// computes it anyway. A reader made on any other object (a copy, a nested object) has a set
// of its own.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/keras/layers/layer.h"

namespace kiln {

// Reads a layer's config with errors that name the class, the layer and the entry:
// `layer "dense_1" (Dense): config entry "units" should be an integer, got "ten"`.
class ConfigReader {
 public:
  ConfigReader(const Json& config, std::string class_name);
  // A required entry.
  template <typename T>
  T get(const std::string& key) const {
    if (!has(key)) fail(key, "is missing");
    return convert<T>(key);
  }
  // An optional entry: `fallback` when it is absent or null.
  template <typename T>
  T get(const std::string& key, T fallback) const {
    return has(key) ? convert<T>(key) : fallback;
  }
  template <typename T>
  std::optional<T> optional(const std::string& key) const {
    if (!has(key)) return std::nullopt;
    return convert<T>(key);
  }
  // True when the entry is present and not null. Marks the entry as read.
  bool has(const std::string& key) const;
  // The entries asked for so far.
  const std::set<std::string>& read_keys() const { return *read_; }
  const Json& at(const std::string& key) const;
  // The layer's name ("" when the config has none: a default name is then made).
  std::string name() const;
  const std::string& class_name() const { return class_name_; }
  // Throws kiln::Error "layer "<name>" (<class>): config entry "<key>" <what>".
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  template <typename T>
  T convert(const std::string& key) const {
    const Json& v = config_.at(key);
    try {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if (!v.is_number_integer())
          fail(key, fmt::format("should be an integer, got {}", v.dump()));
      } else if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number()) fail(key, fmt::format("should be a number, got {}", v.dump()));
      } else if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) fail(key, fmt::format("should be true or false, got {}", v.dump()));
      } else if constexpr (std::is_same_v<T, std::string>) {
        if (!v.is_string()) fail(key, fmt::format("should be a string, got {}", v.dump()));
      }
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      fail(key, fmt::format("has the wrong type: {}", v.dump()));
    }
  }

  Json config_;  // a copy: a reader may outlive the JSON it was made from
  std::string class_name_;
  // Shared with a ConfigReadRecord when this reader reads the config it records.
  std::shared_ptr<std::set<std::string>> read_;
};

// While alive, records the entries read from `config` (this very object, not a copy) by every
// ConfigReader made on it on this thread. Records nest (innermost wins); they belong to the
// thread that makes them and must be destroyed in reverse order of creation.
class ConfigReadRecord {
 public:
  explicit ConfigReadRecord(const Json& config);
  ~ConfigReadRecord();
  ConfigReadRecord(const ConfigReadRecord&) = delete;
  ConfigReadRecord& operator=(const ConfigReadRecord&) = delete;
  // True once a ConfigReader was made on the config.
  bool attached() const;
};

// Makes a layer from its spec {"class_name", "config"}: how a wrapper's from_config builds the
// layers it holds (keras/saving/ passes its layer_from_config).
using LayerSpecReader = std::function<Layer(const Json& spec)>;

namespace layer_config {

// An initializer entry: a Keras name ("glorot_uniform") or {"class_name": name, ...}; absent or
// null gives `fallback`. A "constant" initializer comes back as constant(0) (its value is not in
// configs). Unknown names are kiln::Errors naming the entry.
Initializer initializer_entry(const ConfigReader& c, const std::string& key,
                              const Initializer& fallback);
// A regularizer entry: null, or {"class_name": "L1" | "L2" | "L1L2", "config": {...}}.
Regularizer regularizer_entry(const ConfigReader& c, const std::string& key);
// A constraint entry (Keras' "*_constraint"): null, a name ("non_neg", "max_norm", ...), or
// {"class_name": "MaxNorm", "config": {...}}. kiln::Error naming the entry otherwise.
Constraint constraint_entry(const ConfigReader& c, const std::string& key);
// A dtype entry ("float32" or "f32"); absent or null: float32.
DType dtype_entry(const ConfigReader& c, const std::string& key = "dtype");
// A layer's dtype policy entry: Keras 3's {"class_name": "DTypePolicy", "config": {"name"}} or
// a plain name (older Keras files); absent or null: unset (the layer takes the global policy).
// kiln::Error naming the entry for a policy kiln refuses (float16) or does not know.
std::optional<DTypePolicy> policy_entry(const ConfigReader& c, const std::string& key = "dtype");
// A shape in a config: a list of integers and nulls (unknown dimensions).
Shape shape_entry(const ConfigReader& c, const std::string& key);

// A Keras "tuple" entry of one integer ([3]) or the integer itself (3).
int64_t single(const ConfigReader& c, const std::string& key, int64_t fallback);
// A (height, width) entry: [2, 2], or one integer for both.
std::vector<int64_t> pair(const ConfigReader& c, const std::string& key,
                          std::vector<int64_t> fallback);
// Keras' data_format entry: "channels_last" or "channels_first"; absent or null: channels_last
// (Keras' image_data_format() default).
std::string data_format_entry(const ConfigReader& c);

// The layer a wrapper holds: the spec under `key`, made by `read`. kiln::Error naming the
// entry when `read` fails.
Layer inner_layer(const ConfigReader& c, const std::string& key, const LayerSpecReader& read);

// The entries every weighted layer's options share.
template <typename Options>
void common_weights(const ConfigReader& c, Options& o) {
  o.name = c.name();
  o.dtype = policy_entry(c);
  o.kernel_initializer = initializer_entry(c, "kernel_initializer", o.kernel_initializer);
  o.bias_initializer = initializer_entry(c, "bias_initializer", o.bias_initializer);
  o.kernel_regularizer = regularizer_entry(c, "kernel_regularizer");
  o.bias_regularizer = regularizer_entry(c, "bias_regularizer");
  o.activity_regularizer = regularizer_entry(c, "activity_regularizer");
  o.kernel_constraint = constraint_entry(c, "kernel_constraint");
  o.bias_constraint = constraint_entry(c, "bias_constraint");
}

// The arguments of a recurrent step (RecurrentOptions): a cell's config; a recurrent layer's
// config has them too.
template <typename Options>
void recurrent_step_entries(const ConfigReader& c, Options& o) {
  common_weights(c, o);
  o.recurrent_initializer = initializer_entry(c, "recurrent_initializer", o.recurrent_initializer);
  o.recurrent_regularizer = regularizer_entry(c, "recurrent_regularizer");
  o.recurrent_constraint = constraint_entry(c, "recurrent_constraint");
  o.activation = c.get<std::string>("activation", o.activation);
  o.recurrent_activation = c.get<std::string>("recurrent_activation", o.recurrent_activation);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  o.unit_forget_bias = c.get<bool>("unit_forget_bias", o.unit_forget_bias);
  o.reset_after = c.get<bool>("reset_after", o.reset_after);
  o.dropout = c.get<double>("dropout", o.dropout);
  o.recurrent_dropout = c.get<double>("recurrent_dropout", o.recurrent_dropout);
  o.seed = c.optional<int64_t>("seed");
}

// The sequence options of a recurrent layer or an RNN (RecurrentOptions or RNNOptions);
// stateful is refused.
template <typename Options>
void sequence_entries(const ConfigReader& c, Options& o) {
  o.return_sequences = c.get<bool>("return_sequences", o.return_sequences);
  o.return_state = c.get<bool>("return_state", o.return_state);
  o.go_backwards = c.get<bool>("go_backwards", o.go_backwards);
  o.zero_output_for_mask = c.get<bool>("zero_output_for_mask", o.zero_output_for_mask);
  o.unroll = c.get<bool>("unroll", o.unroll);
  if (c.get<bool>("stateful", false)) c.fail("stateful", "is true; kiln has no stateful RNNs");
}

}  // namespace layer_config
}  // namespace kiln
