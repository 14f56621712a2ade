// save_model / load_model (keras/saving/saving.h): the files of a saved model, the names of
// its variables by their place in the model, and the checks on everything read back.
#include "kiln/keras/saving/saving.h"

#include <fmt/ranges.h>

#include <map>
#include <set>

#include "kiln/frontend/function/trace_context.h"
#include "kiln/keras/io/file_util.h"
#include "kiln/keras/io/safetensors.h"
#include "kiln/keras/saving/from_config.h"
#include "kiln/keras/saving/keras_file.h"
#include "kiln/keras/saving/model_directory.h"
#include "kiln/version.h"

namespace kiln {
namespace {

using saving_detail::kConfigFile;
using saving_detail::kMetadataFile;
using saving_detail::kOptimizerFile;
using saving_detail::kWeightsFile;

// Every variable of the model with its entry name: "layers/<layer>/vars/<i>" over each layer's
// variables(), then "vars/<i>" for the model's own; a variable shared by layers appears once.
std::vector<std::pair<std::string, Variable>> variable_entries(const ModelImpl& model) {
  std::vector<std::pair<std::string, Variable>> out;
  std::set<const void*> seen;
  for (const Layer& layer : model.layers()) {
    int i = 0;
    for (const Variable& v : layer->variables()) {
      std::string key = fmt::format("layers/{}/vars/{}", layer->name(), i++);
      if (seen.insert(v.handle_id()).second) out.emplace_back(std::move(key), v);
    }
  }
  int i = 0;
  for (const Variable& v : model.variables())
    if (seen.insert(v.handle_id()).second) out.emplace_back(fmt::format("vars/{}", i++), v);
  return out;
}

std::string type_text(const Tensor& t) { return t.type().to_string(); }

// The tensors of a safetensors file in the file's order (the order they were saved in),
// checked against `expected` (entry -> variable): kiln::Error naming the file for missing
// entries, extra entries and wrong types.
NamedTensors read_tensors(const std::string& file,
                          const std::vector<std::pair<std::string, Variable>>& expected,
                          const std::function<bool(const std::string&)>& also_allowed = nullptr) {
  NamedTensors in_order = load_safetensors(file);
  std::map<std::string, Tensor> by_name(in_order.begin(), in_order.end());
  std::vector<std::string> missing, extra;
  std::set<std::string> known;
  for (const auto& [key, v] : expected) {
    known.insert(key);
    auto it = by_name.find(key);
    if (it == by_name.end()) {
      missing.push_back(fmt::format("{} ({}, {})", key, v.name(), v.value().type().to_string()));
      continue;
    }
    if (!(it->second.type() == v.value().type()))
      throw Error(fmt::format(
          "\"{}\": entry \"{}\" ({}) is {}, but the model's variable is {}; the file does not "
          "belong to this model's config: save the model again",
          file, key, v.name(), type_text(it->second), v.value().type().to_string()));
  }
  for (const auto& [name, t] : by_name)
    if (!known.count(name) && !(also_allowed && also_allowed(name))) extra.push_back(name);
  if (!missing.empty())
    throw Error(fmt::format(
        "\"{}\" has no entry for {} of the model's variables: {}; the file does not belong to "
        "this model's config: save the model again",
        file, missing.size(), fmt::join(missing, ", ")));
  if (!extra.empty())
    throw Error(fmt::format(
        "\"{}\" has {} entr{} the model does not have: {}; the file does not belong to this "
        "model's config: save the model again",
        file, extra.size(), extra.size() == 1 ? "y" : "ies", fmt::join(extra, ", ")));
  return in_order;
}

void assign_all(const std::vector<std::pair<std::string, Variable>>& entries,
                const NamedTensors& values) {
  std::map<std::string, Tensor> by_name(values.begin(), values.end());
  detail::InitScope eager;
  for (auto [key, v] : entries) v.assign(by_name.at(key));
}

// ---- the optimizer's state ----

std::string hyperparameter_name(const OptimizerImpl& opt, const Variable& v) {
  return v.name().substr(opt.name().size() + 1);  // "<optimizer>/<name>"
}

std::vector<std::pair<std::string, Variable>> optimizer_scalars(const OptimizerImpl& opt) {
  std::vector<std::pair<std::string, Variable>> out{{"iterations", opt.variables().front()}};
  for (const Variable& h : opt.hyperparameters())
    out.emplace_back("hyperparameters/" + hyperparameter_name(opt, h), h);
  return out;
}

void save_optimizer(const OptimizerImpl& opt,
                    const std::vector<std::pair<std::string, Variable>>& weights,
                    const std::string& file) {
  std::map<const void*, std::string> key_of;
  for (const auto& [key, v] : weights) key_of.emplace(v.handle_id(), key);
  NamedTensors tensors;
  std::map<std::string, std::string> metadata{{"format", "kiln.optimizer"},
                                              {"optimizer", opt.name()}};
  for (const auto& [key, v] : optimizer_scalars(opt)) {
    metadata[key] = v.name();
    tensors.emplace_back(key, v.value());
  }
  // Slots of variables outside this model (an optimizer shared with another model) stay out.
  for (const OptimizerImpl::Slot& s : opt.slots()) {
    auto it = key_of.find(s.owner.handle_id());
    if (it == key_of.end()) continue;
    std::string key = fmt::format("slots/{}/{}", it->second, s.name);
    metadata[key] = s.variable.name();
    tensors.emplace_back(std::move(key), s.variable.value());
  }
  save_safetensors(file, tensors, metadata);
}

void load_optimizer(OptimizerImpl& opt,
                    const std::vector<std::pair<std::string, Variable>>& weights,
                    const std::string& file) {
  std::map<std::string, Variable> by_key(weights.begin(), weights.end());
  auto scalars = optimizer_scalars(opt);
  NamedTensors values = read_tensors(
      file, scalars, [](const std::string& name) { return name.rfind("slots/", 0) == 0; });
  // Check every slot before changing anything; restore them in the saved order, which is the
  // order the first updates created them in (so variables() lists them as before).
  struct Restore {
    Variable owner;
    std::string slot;
    Tensor value;
  };
  std::vector<Restore> restores;
  for (const auto& [key, t] : values) {
    if (key.rfind("slots/", 0) != 0) continue;
    size_t slash = key.rfind('/');
    std::string owner = key.substr(6, slash - 6), slot = key.substr(slash + 1);
    auto it = by_key.find(owner);
    if (slash <= 6 || it == by_key.end())
      throw Error(
          fmt::format("\"{}\": entry \"{}\" is the slot of \"{}\", which is not a "
                      "variable of the model; save the model again",
                      file, key, owner));
    if (!(t.type() == it->second.value().type()))
      throw Error(fmt::format(
          "\"{}\": entry \"{}\" is {}, but its variable {} is {}; save the "
          "model again",
          file, key, type_text(t), it->second.name(), it->second.value().type().to_string()));
    restores.push_back({it->second, slot, t});
  }
  assign_all(scalars, values);
  for (const Restore& r : restores) {
    try {
      opt.restore_slot(r.owner, r.slot, r.value);
    } catch (const Error& e) {
      throw Error(fmt::format("\"{}\": {}", file, e.what()));
    }
  }
}

Json shapes_json(const std::vector<Shape>& shapes) {
  Json out = Json::array();
  for (const Shape& s : shapes) {
    Json dims = Json::array();
    for (int64_t d : s) dims.push_back(d == kUnknownDim ? Json(nullptr) : Json(d));
    out.push_back(dims);
  }
  return out;
}

// Builds a model whose config does not build it (a Sequential built by its first call) from
// the input shapes it was built with.
void build_from_config(ModelImpl& model, const Json& build_config, const std::string& file) {
  if (model.built() || !build_config.is_object() || !build_config.contains("input_shapes")) return;
  std::vector<Tensor> inputs;
  try {
    ConfigReader c(build_config, "build_config");
    const Json& shapes = c.at("input_shapes");
    if (!shapes.is_array()) c.fail("input_shapes", "should be a list of shapes");
    for (const Json& s : shapes) {
      const Json entry{{"shape", s}};
      ConfigReader one(entry, "build_config");
      inputs.push_back(
          Tensor::symbolic({DType::f32, layer_config::shape_entry(one, "shape")}, nullptr));
    }
    model.invoke(inputs, false);
  } catch (const Error& e) {
    throw Error(fmt::format("\"{}\": the model could not be built from \"build_config\": {}", file,
                            e.what()));
  }
}

}  // namespace

void save_model(const Model& model, const std::string& path, const SaveOptions& options) {
  if (saving_detail::is_keras_file_path(path))
    return saving_detail::save_keras_file(model, path, options);
  ModelImpl& m = model.get();
  Json config = serialize_layer(model);
  config["build_config"] = m.built() && !m.build_input_shapes().empty()
                               ? Json{{"input_shapes", shapes_json(m.build_input_shapes())}}
                               : Json(nullptr);
  config["compile_config"] =
      m.compiled() ? saving_detail::compile_config(m.compile_options()) : Json(nullptr);
  const Json metadata{{"format", saving_detail::kFormat},
                      {"format_version", saving_detail::kFormatVersion},
                      {"kiln_version", kVersion},
                      {"optimizer_state", m.compiled() && options.include_optimizer}};
  auto entries = variable_entries(m);

  saving_detail::DirectoryWriter dir(path, options.overwrite);
  NamedTensors tensors;
  std::map<std::string, std::string> names{{"format", "kiln.model.weights"}, {"model", m.name()}};
  for (const auto& [key, v] : entries) {
    tensors.emplace_back(key, v.value());
    names[key] = v.name();
  }
  save_safetensors(dir.file(kWeightsFile), tensors, names);
  if (m.compiled() && options.include_optimizer)
    save_optimizer(m.compile_options().optimizer.impl(), entries, dir.file(kOptimizerFile));
  io::write_file_atomically(dir.file(kConfigFile), config.dump(2) + "\n");
  io::write_file_atomically(dir.file(kMetadataFile), metadata.dump(2) + "\n");
  dir.commit();
}

Model load_model(const std::string& path, const LoadOptions& options) {
  if (saving_detail::is_keras_file_path(path)) return saving_detail::load_keras_file(path, options);
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec))
    throw Error(fmt::format(
        "load_model: \"{}\" is not a directory; a saved model is the directory model->save(path) "
        "writes (a weights file alone loads with load_weights)",
        path));
  const std::string base = path + "/";
  const Json metadata = saving_detail::read_json_file(base + kMetadataFile);
  if (!metadata.is_object() || metadata.value("format", "") != saving_detail::kFormat)
    throw Error(fmt::format("\"{}{}\": \"format\" should be \"{}\"; this is not a saved kiln model",
                            base, kMetadataFile, saving_detail::kFormat));
  if (!metadata.contains("format_version") || !metadata["format_version"].is_number_integer() ||
      metadata["format_version"].get<int64_t>() > saving_detail::kFormatVersion ||
      metadata["format_version"].get<int64_t>() < 1)
    throw Error(fmt::format(
        "\"{}{}\": format_version {} is not one this kiln ({}) reads (1 to {}); load it with the "
        "kiln that saved it ({})",
        base, kMetadataFile, metadata.value("format_version", Json(nullptr)).dump(), kVersion,
        saving_detail::kFormatVersion, metadata.value("kiln_version", Json("?")).dump()));

  const std::string config_file = base + kConfigFile;
  const Json config = saving_detail::read_json_file(config_file);
  Layer layer;
  try {
    layer = layer_from_config(config, options.custom_objects);
  } catch (const Error& e) {
    throw Error(fmt::format("\"{}\": {}", config_file, e.what()));
  }
  auto* impl = dynamic_cast<ModelImpl*>(layer.ptr().get());
  if (!impl)
    throw Error(fmt::format("\"{}\": class \"{}\" is a layer, not a model", config_file,
                            layer->class_name()));
  Model model(std::static_pointer_cast<ModelImpl>(layer.ptr()));
  build_from_config(*impl, config.value("build_config", Json(nullptr)), config_file);

  auto entries = variable_entries(*impl);
  assign_all(entries, read_tensors(base + kWeightsFile, entries));

  const Json compile = config.value("compile_config", Json(nullptr));
  if (options.compile && !compile.is_null()) {
    try {
      impl->compile(saving_detail::compile_options_from_config(compile));
    } catch (const Error& e) {
      throw Error(fmt::format("\"{}\": {}", config_file, e.what()));
    }
    if (metadata.value("optimizer_state", false))
      load_optimizer(impl->compile_options().optimizer.impl(), entries, base + kOptimizerFile);
  }
  return model;
}

}  // namespace kiln
