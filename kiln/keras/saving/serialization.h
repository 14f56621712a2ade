// Layers from their configs (Keras 3's serialization_lib): a layer is serialized as
// {"class_name": "Dense", "config": layer->get_config()} and rebuilt by the factory registered
// for its class name, which reads the config back (Keras' from_config).
//
// Where a class name is looked up, first to last:
//   1. the custom objects given to the call (Keras' load_model(..., custom_objects=...)), and
//      those of every enclosing CustomObjectScope (innermost first);
//   2. the classes registered with register_layer_class (Keras'
//      @keras.saving.register_keras_serializable);
//   3. kiln's built-in layers and models (every class in keras/layers/layers.h, InputLayer,
//      Sequential and Functional).
// An unknown class name is a kiln::Error naming it and the known ones, and saying to pass or
// register a factory. A custom layer's factory reads its config with ConfigReader
// (keras/layers/layer_config.h, which this header includes):
//
//   kiln::register_layer_class("MyScale", [](const kiln::Json& config) {
//     kiln::ConfigReader c(config, "MyScale");
//     return kiln::Layer(std::make_shared<MyScaleImpl>(c.get<double>("factor"), c.name()));
//   });
//
// layer_from_config then sets the "trainable" flag and the activity regularizer a config holds,
// for every class (factories need not).
//
// No argument is dropped silently: every ConfigReader made on the very config object a factory
// was given records the entries it is asked for (has, get, optional, at, name). After the
// factory, layer_from_config checks each entry it did not read: a null value, or the value the
// new layer's own get_config writes for that entry (what kiln computes, e.g. "groups": 1), is
// accepted; anything else is a kiln::Error naming the layer, the argument and the value (kiln
// would otherwise compute something other than what the config asks for). This covers C++
// configs, loaded models and the Python keyword wrapper alike. A factory that reads its config
// without a ConfigReader is not checked. Only what a config holds comes back: initializers are
// restored by name (their seeds and a constant's value are not in configs), which matters only
// before weights are loaded.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/keras/layers/layer.h"
#include "kiln/keras/layers/layer_config.h"

namespace kiln {

// Makes a layer (not built) from its config.
using LayerFactory = std::function<Layer(const Json& config)>;
// Class name -> factory, for one load (Keras' custom_objects).
using CustomObjects = std::map<std::string, LayerFactory>;

// Registers a factory for every later lookup in this process (replacing one of the same
// name). kiln::Error for an empty name or factory, or a built-in class name.
void register_layer_class(const std::string& class_name, LayerFactory factory);
// Removes a registration (no-op when absent).
void unregister_layer_class(const std::string& class_name);

// While alive, layer_from_config also looks in `objects` (Keras' custom_object_scope). Scopes
// nest; they belong to the thread that creates them.
class CustomObjectScope {
 public:
  explicit CustomObjectScope(CustomObjects objects);
  ~CustomObjectScope();
  CustomObjectScope(const CustomObjectScope&) = delete;
  CustomObjectScope& operator=(const CustomObjectScope&) = delete;

 private:
  CustomObjects objects_;
};

// {"class_name": ..., "config": layer->get_config()}.
Json serialize_layer(const Layer& layer);
// The layer that `spec` ({"class_name", "config"}) describes. kiln::Error for a spec of
// another form, an unknown class name, or a config its factory rejects (the error names the
// class, the layer and the entry).
Layer layer_from_config(const Json& spec, const CustomObjects& custom_objects = {});

}  // namespace kiln
