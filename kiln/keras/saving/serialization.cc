// The layer registry, custom-object scopes and layer_from_config.
#include "kiln/keras/saving/serialization.h"

#include <fmt/ranges.h>

#include <mutex>

#include "kiln/keras/saving/from_config.h"

namespace kiln {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, LayerFactory> factories;
};
Registry& registry() {
  static Registry r;
  return r;
}

// Entries Keras 3 writes that kiln's get_config leaves out, at the Keras default that kiln
// computes: InputLayer's "ragged" and "optional" (kiln inputs are dense and required), and
// LSTM/GRU's "use_cudnn" (a kernel choice, not a different result).
bool keras_default_kiln_matches(const std::string& key, const Json& value) {
  static const std::map<std::string, Json> defaults = {
      {"ragged", false}, {"optional", false}, {"use_cudnn", "auto"}};
  auto it = defaults.find(key);
  return it != defaults.end() && it->second == value;
}

// After the factory: every entry it did not read is null or what the layer computes (the value
// the layer's own get_config writes for it); anything else would be dropped silently.
void refuse_unread_entries(const Json& config, const std::set<std::string>& read,
                           const Layer& layer, const std::string& class_name) {
  Json honoured;
  bool have_config = false;
  for (const auto& [key, value] : config.items()) {
    if (read.count(key) || value.is_null()) continue;
    if (!have_config) {
      honoured = layer->get_config();
      have_config = true;
    }
    auto it = honoured.find(key);
    if (it != honoured.end() && *it == value) continue;  // what kiln computes anyway
    if (it == honoured.end() && keras_default_kiln_matches(key, value)) continue;
    if (it != honoured.end())
      throw Error(fmt::format(
          "layer \"{}\" ({}): argument {}={:.200} is not supported: kiln's {} computes {}={:.200} "
          "only, and refuses another value rather than ignore it. Remove the argument or set it "
          "to {:.200}",
          layer->name(), class_name, key, value.dump(), class_name, key, it->dump(), it->dump()));
    std::vector<std::string> known;
    for (const auto& [k, v] : honoured.items()) known.push_back(k);
    throw Error(fmt::format(
        "layer \"{}\" ({}): argument {}={:.200} is not an argument kiln's {} knows (it takes: {}); "
        "kiln refuses it rather than ignore it. Remove it",
        layer->name(), class_name, key, value.dump(), class_name, fmt::join(known, ", ")));
  }
}

// The scopes alive on this thread, innermost last.
std::vector<const CustomObjects*>& scopes() {
  thread_local std::vector<const CustomObjects*> s;
  return s;
}

LayerFactory find_factory(const std::string& class_name) {
  for (auto it = scopes().rbegin(); it != scopes().rend(); ++it)
    if (auto f = (*it)->find(class_name); f != (*it)->end()) return f->second;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    if (auto f = registry().factories.find(class_name); f != registry().factories.end())
      return f->second;
  }
  const auto& builtin = saving_detail::builtin_layer_factories();
  if (auto f = builtin.find(class_name); f != builtin.end()) return f->second;
  return nullptr;
}

std::vector<std::string> known_class_names() {
  std::vector<std::string> names;
  for (const auto& [n, f] : saving_detail::builtin_layer_factories()) names.push_back(n);
  std::lock_guard<std::mutex> lock(registry().mutex);
  for (const auto& [n, f] : registry().factories) names.push_back(n);
  return names;
}

}  // namespace

bool saving_detail::has_custom_layer_factory(const std::string& class_name) {
  for (auto it = scopes().rbegin(); it != scopes().rend(); ++it)
    if ((*it)->count(class_name)) return true;
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().factories.count(class_name) > 0;
}

void register_layer_class(const std::string& class_name, LayerFactory factory) {
  if (class_name.empty() || !factory)
    throw Error("register_layer_class: give a class name and a factory");
  if (saving_detail::builtin_layer_factories().count(class_name))
    throw Error(fmt::format(
        "register_layer_class: \"{}\" is a built-in layer class; give your class another name "
        "(its get_config's class_name)",
        class_name));
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().factories[class_name] = std::move(factory);
}

void unregister_layer_class(const std::string& class_name) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().factories.erase(class_name);
}

CustomObjectScope::CustomObjectScope(CustomObjects objects) : objects_(std::move(objects)) {
  scopes().push_back(&objects_);
}

CustomObjectScope::~CustomObjectScope() { scopes().pop_back(); }

Json serialize_layer(const Layer& layer) {
  return Json{{"class_name", layer->class_name()}, {"config", layer->get_config()}};
}

Layer layer_from_config(const Json& spec, const CustomObjects& custom_objects) {
  CustomObjectScope scope(custom_objects);
  if (!spec.is_object() || !spec.contains("class_name") || !spec["class_name"].is_string() ||
      !spec.contains("config") || !spec["config"].is_object())
    throw Error(fmt::format(
        "a layer should be serialized as {{\"class_name\": \"...\", \"config\": {{...}}}}; got "
        "{:.200}",
        spec.dump()));
  const std::string class_name = spec["class_name"].get<std::string>();
  const Json& config = spec["config"];
  LayerFactory factory = find_factory(class_name);
  if (!factory)
    throw Error(fmt::format(
        "unknown layer class \"{}\" (layer \"{}\"); known classes: {}. For a custom layer, pass "
        "a factory in custom_objects (load_model(path, {{.custom_objects = {{{{\"{}\", "
        "factory}}}}}})) or call kiln::register_layer_class(\"{}\", factory)",
        class_name, config.value("name", std::string("?")), fmt::join(known_class_names(), ", "),
        class_name, class_name));
  ConfigReadRecord reads(config);
  Layer layer = factory(config);
  if (!layer.defined())
    throw Error(fmt::format("the factory for layer class \"{}\" returned an empty layer handle",
                            class_name));
  const bool checked = reads.attached();  // the factory read with a ConfigReader
  ConfigReader c(config, class_name);
  if (c.has("trainable")) layer->set_trainable(c.get<bool>("trainable"));
  // Keras writes a dtype policy for every layer: the layers whose factory does not read it
  // (layers without weights) take it here; it decides their autocast and compute dtype.
  // (An InputLayer's "dtype" is its tensor's dtype, not a policy.)
  if (class_name != "InputLayer")
    if (std::optional<DTypePolicy> policy = layer_config::policy_entry(c))
      layer->set_dtype_policy(*policy);
  if (c.has("activity_regularizer"))
    layer->activity_regularizer = layer_config::regularizer_entry(c, "activity_regularizer");
  if (checked) refuse_unread_entries(config, c.read_keys(), layer, class_name);
  return layer;
}

}  // namespace kiln
