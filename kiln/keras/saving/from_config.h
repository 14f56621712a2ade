// Internal to keras/saving/: the table of built-in layer factories (builtin_layers.cc; the
// layers' own from_config functions are beside their get_config in keras/layers/, the config
// entry readers in keras/layers/layer_config.h), the model factories (model_config.cc) and the
// compile configuration (compile_config.cc).
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
Layer functional_from_config(const Json& config);

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
