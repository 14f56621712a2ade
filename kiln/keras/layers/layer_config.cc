// ConfigReader, the read records layer_from_config keeps, and the shared config entries.
#include "kiln/keras/layers/layer_config.h"

#include <nlohmann/json.hpp>

namespace kiln {
namespace {

// The configs whose reads layer_from_config is recording on this thread, innermost last: a
// ConfigReader made on one of these very objects shares its read set.
struct ReadRecord {
  const Json* config;
  std::shared_ptr<std::set<std::string>> keys;
  bool attached = false;  // a ConfigReader read this config
};
std::vector<ReadRecord>& read_records() {
  thread_local std::vector<ReadRecord> r;
  return r;
}

}  // namespace

// ---------------------------------------------------------------- ConfigReadRecord

ConfigReadRecord::ConfigReadRecord(const Json& config) {
  read_records().push_back({&config, std::make_shared<std::set<std::string>>()});
}

ConfigReadRecord::~ConfigReadRecord() { read_records().pop_back(); }

bool ConfigReadRecord::attached() const { return read_records().back().attached; }

// ---------------------------------------------------------------- ConfigReader

ConfigReader::ConfigReader(const Json& config, std::string class_name)
    : config_(config), class_name_(std::move(class_name)) {
  if (!config_.is_object())
    throw Error(fmt::format("the config of a {} layer should be a JSON object; got {:.200}",
                            class_name_, config_.dump()));
  // Reading the config layer_from_config handed to a factory: share its read set.
  for (auto it = read_records().rbegin(); it != read_records().rend(); ++it)
    if (it->config == &config) {
      it->attached = true;
      read_ = it->keys;
      break;
    }
  if (!read_) read_ = std::make_shared<std::set<std::string>>();
}

bool ConfigReader::has(const std::string& key) const {
  read_->insert(key);
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

// ---------------------------------------------------------------- shared entries

namespace layer_config {

Initializer initializer_entry(const ConfigReader& c, const std::string& key,
                              const Initializer& fallback) {
  if (!c.has(key)) return fallback;
  const Json& v = c.at(key);
  std::string name;
  std::map<std::string, double> args;
  std::optional<int64_t> seed;
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    // Keras' serialized form: every entry of its config is honoured or refused.
    name = v["class_name"].get<std::string>();
    if (v.contains("config") && !v["config"].is_null()) {
      if (!v["config"].is_object())
        c.fail(key, fmt::format("has a config that is not an object: {}", v["config"].dump()));
      for (const auto& [k, x] : v["config"].items()) {
        if (k == "seed") {
          if (x.is_number_integer())
            seed = x.get<int64_t>();
          else if (!x.is_null())
            c.fail(key, fmt::format("has a seed that is not an integer or null: {}", x.dump()));
        } else if (x.is_number()) {
          args[k] = x.get<double>();
        } else {
          c.fail(key, fmt::format("has an argument \"{}\" kiln's initializers cannot take: {}", k,
                                  x.dump()));
        }
      }
    }
  } else {
    c.fail(key, fmt::format("should be an initializer name such as \"glorot_uniform\", got {}",
                            v.dump()));
  }
  try {
    return initializer_from_keras(name, args, seed);
  } catch (const Error& e) {
    c.fail(key, e.what());
  }
}

Regularizer regularizer_entry(const ConfigReader& c, const std::string& key) {
  if (!c.has(key)) return {};
  const Json& v = c.at(key);
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string() ||
      !v.contains("config") || !v["config"].is_object())
    c.fail(key, fmt::format("should be null or {{\"class_name\": \"L1\" | \"L2\" | \"L1L2\", "
                            "\"config\": {{...}}}}, got {}",
                            v.dump()));
  const std::string kind = v["class_name"].get<std::string>();
  ConfigReader r(v["config"], kind);
  double l1 = r.get<double>("l1", 0.0), l2 = r.get<double>("l2", 0.0);
  if (kind == "L1") return regularizers::l1(r.get<double>("l1"));
  if (kind == "L2") return regularizers::l2(r.get<double>("l2"));
  if (kind == "L1L2") return regularizers::l1_l2(l1, l2);
  c.fail(key,
         fmt::format("has an unknown regularizer class \"{}\" (expected L1, L2 or L1L2)", kind));
}

Constraint constraint_entry(const ConfigReader& c, const std::string& key) {
  if (!c.has(key)) return {};
  try {
    return Constraint::from_config(c.at(key));
  } catch (const Error& e) {
    c.fail(key, e.what());
  }
}

DType dtype_entry(const ConfigReader& c, const std::string& key) {
  if (!c.has(key)) return DType::f32;
  const Json& v = c.at(key);
  // Keras 3 may write a DTypePolicy object: {"class_name": "DTypePolicy", "config": {"name"}}.
  std::string name;
  if (v.is_string())
    name = v.get<std::string>();
  else if (v.is_object() && v.contains("config") && v["config"].contains("name") &&
           v["config"]["name"].is_string())
    name = v["config"]["name"].get<std::string>();
  else
    c.fail(key, fmt::format("should be a dtype name such as \"float32\", got {}", v.dump()));
  try {
    return parse_dtype(name);
  } catch (const Error& e) {
    c.fail(key, e.what());
  }
}

std::optional<DTypePolicy> policy_entry(const ConfigReader& c, const std::string& key) {
  if (!c.has(key) || c.at(key).is_null()) return std::nullopt;
  try {
    return DTypePolicy::deserialize(c.at(key));
  } catch (const Error& e) {
    c.fail(key, e.what());
  }
}

Shape shape_entry(const ConfigReader& c, const std::string& key) {
  const Json& v = c.at(key);
  if (!v.is_array()) c.fail(key, fmt::format("should be a list of dimensions, got {}", v.dump()));
  if (v.size() > size_t(kMaxRank))
    c.fail(key, fmt::format("has {} dimensions; kiln supports at most {}", v.size(), kMaxRank));
  Shape s;
  for (const Json& d : v) {
    if (d.is_null())
      s.push_back(kUnknownDim);
    else if (d.is_number_integer() && d.get<int64_t>() >= 0)
      s.push_back(d.get<int64_t>());
    else
      c.fail(key, fmt::format("should hold sizes >= 0 or null, got {}", v.dump()));
  }
  return s;
}

int64_t single(const ConfigReader& c, const std::string& key, int64_t fallback) {
  if (!c.has(key)) return fallback;
  const Json& v = c.at(key);
  if (v.is_array() && v.size() == 1 && v[0].is_number_integer()) return v[0].get<int64_t>();
  return c.get<int64_t>(key);
}

std::vector<int64_t> pair(const ConfigReader& c, const std::string& key,
                          std::vector<int64_t> fallback) {
  if (!c.has(key)) return fallback;
  if (c.at(key).is_number_integer()) return {c.get<int64_t>(key), c.get<int64_t>(key)};
  return c.get<std::vector<int64_t>>(key);
}

std::string data_format_entry(const ConfigReader& c) {
  return c.get<std::string>("data_format", "channels_last");
}

// The inner layer of a wrapper: {"class_name", "config"} under `key`.
Layer inner_layer(const ConfigReader& c, const std::string& key, const LayerSpecReader& read) {
  try {
    return read(c.at(key));
  } catch (const Error& e) {
    c.fail(key, fmt::format("does not describe a layer: {}", e.what()));
  }
}

}  // namespace layer_config
}  // namespace kiln
