// The layer registry, custom-object scopes, layer_from_config and ConfigReader.
#include "kiln/frontend/saving/serialization.h"

#include <fmt/ranges.h>

#include <mutex>

#include "kiln/frontend/saving/from_config.h"

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
  Layer layer = factory(config);
  if (!layer.defined())
    throw Error(fmt::format("the factory for layer class \"{}\" returned an empty layer handle",
                            class_name));
  ConfigReader c(config, class_name);
  if (c.has("trainable")) layer->set_trainable(c.get<bool>("trainable"));
  if (c.has("activity_regularizer"))
    layer->activity_regularizer = saving_detail::regularizer_entry(c, "activity_regularizer");
  return layer;
}

// ---------------------------------------------------------------- ConfigReader

ConfigReader::ConfigReader(const Json& config, std::string class_name)
    : config_(config), class_name_(std::move(class_name)) {
  if (!config_.is_object())
    throw Error(fmt::format("the config of a {} layer should be a JSON object; got {:.200}",
                            class_name_, config_.dump()));
}

bool ConfigReader::has(const std::string& key) const {
  auto it = config_.find(key);
  return it != config_.end() && !it->is_null();
}

const Json& ConfigReader::at(const std::string& key) const {
  if (!has(key)) fail(key, "is missing");
  return config_.at(key);
}

std::string ConfigReader::name() const { return get<std::string>("name", std::string()); }

void ConfigReader::fail(const std::string& key, const std::string& what) const {
  auto it = config_.find("name");
  std::string layer = it != config_.end() && it->is_string() ? it->get<std::string>() : "?";
  throw Error(
      fmt::format("layer \"{}\" ({}): config entry \"{}\" {}", layer, class_name_, key, what));
}

}  // namespace kiln
