// Internal to keras/saving/: the built-in layer factories (builtin_layers.cc), the model
// factories (model_config.cc), the compile configuration (compile_config.cc) and the config
// readers they share.
#pragma once

#include <map>
#include <string>

#include "kiln/keras/layers/initializers.h"
#include "kiln/keras/saving/serialization.h"
#include "kiln/keras/training/compile_options.h"

namespace kiln::saving_detail {

// Every built-in class name -> its factory (Sequential and Functional included).
const std::map<std::string, LayerFactory>& builtin_layer_factories();

// True when custom objects of an enclosing CustomObjectScope or the registry have a factory for
// `class_name` (built-in classes are not looked at).
bool has_custom_layer_factory(const std::string& class_name);

Layer sequential_from_config(const Json& config);
// layers.RNN from its config; with `given_cell` that cell (Python's RNN(cell) keeps the cell
// object it is given), else the one config["cell"] describes.
Layer rnn_from_config(const Json& config, const Layer* given_cell = nullptr);
Layer functional_from_config(const Json& config);

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
// A shape in a config: a list of integers and nulls (unknown dimensions).
Shape shape_entry(const ConfigReader& c, const std::string& key);

// {"class_name": "Adam", "config": optimizer->get_config()}.
Json optimizer_config(const Optimizer& optimizer);
// The optimizer such a config describes, with its schedule; kiln::Error naming the entry for an
// unknown class or a bad value.
Optimizer optimizer_from_config(const Json& config);
// Keras' compile config: {"optimizer", "loss", "loss_weights", "metrics", "weighted_metrics",
// "run_eagerly"}. A loss is its name, or {"class_name": name, "config": {"from_logits": true}};
// a metric is the name it was requested by.
Json compile_config(const CompileOptions& options);
CompileOptions compile_options_from_config(const Json& config);

}  // namespace kiln::saving_detail
