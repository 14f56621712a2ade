// Keras 3's .keras files (keras/saving/keras_file.h): the archive, the weights file and the
// optimizer's variables; configs are converted by keras_config.cc.
#include "kiln/keras/saving/keras_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>

#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/io/file_util.h"
#include "kiln/keras/io/hdf5_file.h"
#include "kiln/keras/io/zip_archive.h"
#include "kiln/keras/saving/from_config.h"
#include "kiln/keras/saving/keras_config.h"
#include "kiln/keras/saving/keras_weights.h"
#include "kiln/version.h"

namespace kiln::saving_detail {
namespace {

constexpr const char* kKerasMetadata = "metadata.json";
constexpr const char* kKerasConfig = "config.json";
constexpr const char* kKerasWeights = "model.weights.h5";
// The Keras version whose file format kiln writes (metadata.json's "keras_version").
constexpr const char* kKerasFormatVersion = "3.15.1";

Json parse_entry(const io::ZipReader& zip, const std::string& entry) {
  const std::string text = zip.read(entry);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw Error(
        fmt::format("\"{}\": entry \"{}\" is not valid JSON ({})", zip.what(), entry, e.what()));
  }
}

std::vector<Variable> trainable_variables(const ModelImpl& model, const KerasWeightLayout& layout) {
  std::set<const void*> trainable;
  for (const Variable& v : model.trainable_weights()) trainable.insert(v.handle_id());
  std::vector<Variable> out;
  for (const auto& e : layout.variables)
    if (trainable.count(e.variable.handle_id())) out.push_back(e.variable);
  return out;
}

// Every dataset under `group` (recursively), as paths.
void datasets_under(const io::Hdf5Reader& h5, const std::string& group,
                    std::vector<std::string>& out) {
  for (const std::string& child : h5.children(group)) {
    const std::string path = group + "/" + child;
    switch (h5.kind(path)) {
      case io::Hdf5Reader::Kind::group:
        datasets_under(h5, path, out);
        break;
      case io::Hdf5Reader::Kind::dataset:
        out.push_back(path);
        break;
      default:
        throw Error(
            fmt::format("\"{}\": \"{}\" is neither a group nor a dataset", h5.what(), path));
    }
  }
}

std::string type_text(const Tensor& t) { return t.type().to_string(); }

// ---------------------------------------------------------------- reading

void load_weights(const ModelImpl& model, const io::Hdf5Reader& h5,
                  const KerasWeightLayout& layout) {
  const std::string& file = h5.what();
  // The layer names Keras keeps on the "vars" groups must be the model's (a different layer
  // order would otherwise put weights into the wrong layers).
  for (const auto& g : layout.groups) {
    if (g.name.empty() || h5.kind(g.path) != io::Hdf5Reader::Kind::group) continue;
    const std::string stored = h5.string_attribute(g.path, "name");
    if (!stored.empty() && stored != g.name && g.path.find("/cell/") == std::string::npos &&
        g.path.find("_dense/") == std::string::npos && g.path.find("/_") == std::string::npos)
      throw Error(fmt::format(
          "\"{}\": group \"{}\" holds the weights of layer \"{}\", but kiln's model has layer "
          "\"{}\" there; the weights do not belong to this config",
          file, g.path, stored, g.name));
  }
  std::vector<std::string> present;
  for (const char* top : {"layers", "vars"})
    if (h5.kind(top) == io::Hdf5Reader::Kind::group) datasets_under(h5, top, present);
  std::set<std::string> expected;
  std::vector<std::string> missing;
  std::vector<std::pair<Variable, Tensor>> values;
  for (const auto& e : layout.variables) {
    expected.insert(e.path);
    if (h5.kind(e.path) != io::Hdf5Reader::Kind::dataset) {
      missing.push_back(fmt::format("{} ({}, {})", e.path, e.variable.name(),
                                    e.variable.value().type().to_string()));
      continue;
    }
    Tensor t = h5.read(e.path);
    if (!(t.type() == e.variable.value().type()))
      throw Error(fmt::format(
          "\"{}\": dataset \"{}\" is {}, but kiln's variable {} is {}; the weights do not belong "
          "to this config",
          file, e.path, type_text(t), e.variable.name(), e.variable.value().type().to_string()));
    values.emplace_back(e.variable, std::move(t));
  }
  if (!missing.empty())
    throw Error(fmt::format("\"{}\" has no dataset for {} of the model's variables: {}", file,
                            missing.size(), fmt::join(missing, ", ")));
  std::vector<std::string> extra;
  for (const std::string& p : present)
    if (!expected.count(p)) extra.push_back(p);
  if (!extra.empty())
    throw Error(fmt::format(
        "\"{}\" has {} dataset{} that kiln's model has no variable for: {} (a layer kiln builds "
        "with fewer weights than Keras, or weights of another model)",
        file, extra.size(), extra.size() == 1 ? "" : "s", fmt::join(extra, ", ")));
  detail::InitScope eager;
  for (auto& [v, t] : values) Variable(v).assign(t);
}

void load_optimizer_variables(OptimizerImpl& opt, const io::Hdf5Reader& h5,
                              const std::vector<KerasOptimizerEntry>& layout) {
  const std::string& file = h5.what();
  std::vector<std::string> names = h5.children("optimizer/vars");
  const size_t n = names.size();
  for (size_t i = 0; i < n; ++i)
    if (h5.kind(fmt::format("optimizer/vars/{}", i)) != io::Hdf5Reader::Kind::dataset)
      throw Error(
          fmt::format("\"{}\": \"optimizer/vars\" should hold datasets 0 to {}, but has "
                      "no \"{}\" (it holds: {})",
                      file, n - 1, i, fmt::join(names, ", ")));
  // An optimizer Keras never built (no training step) holds its scalars only.
  size_t scalars = 0;
  while (scalars < layout.size() && layout[scalars].kind != KerasOptimizerEntry::Kind::slot)
    ++scalars;
  if (n != layout.size() && n != scalars) {
    std::vector<std::string> want;
    for (const auto& e : layout) want.push_back(e.describe());
    throw Error(fmt::format(
        "\"{}\": \"optimizer/vars\" holds {} variables, but Keras' {} over this model's {} "
        "trainable variables has {} ({}); the optimizer's settings or the model differ from "
        "the file's",
        file, n, opt.class_name(), layout.empty() ? 0 : layout.size() - scalars, layout.size(),
        fmt::join(want, ", ")));
  }
  struct Restore {
    const KerasOptimizerEntry* entry;
    Tensor value;
  };
  std::vector<Restore> restores;
  for (size_t i = 0; i < n; ++i) {
    const KerasOptimizerEntry& e = layout[i];
    const std::string path = fmt::format("optimizer/vars/{}", i);
    Tensor t = h5.read(path);
    const Tensor& like = e.kind == KerasOptimizerEntry::Kind::slot ? e.owner.value()
                         : e.kind == KerasOptimizerEntry::Kind::iterations
                             ? opt.variables().front().value()
                             : opt.hyperparameters().front().value();
    const bool scalar_ok =
        e.kind != KerasOptimizerEntry::Kind::slot && t.shape().rank() == 0 &&
        (e.kind == KerasOptimizerEntry::Kind::iterations ? is_integer(t.dtype())
                                                         : is_floating(t.dtype()));
    if (!scalar_ok && !(t.type() == like.type()))
      throw Error(fmt::format("\"{}\": dataset \"{}\" ({}) is {}, but kiln's is {}", file, path,
                              e.describe(), type_text(t), like.type().to_string()));
    restores.push_back({&e, std::move(t)});
  }
  detail::InitScope eager;
  for (const Restore& r : restores) {
    switch (r.entry->kind) {
      case KerasOptimizerEntry::Kind::iterations:
        opt.variables().front().assign(cast(r.value, opt.variables().front().dtype()));
        break;
      case KerasOptimizerEntry::Kind::learning_rate: {
        Variable lr = opt.hyperparameters().front();
        lr.assign(cast(r.value, lr.dtype()));
        break;
      }
      case KerasOptimizerEntry::Kind::slot:
        try {
          opt.restore_slot(r.entry->owner, r.entry->slot, r.value);
        } catch (const Error& e) {
          throw Error(fmt::format("\"{}\": {}", file, e.what()));
        }
        break;
    }
  }
}

// Keras' build_config: {"input_shape": shape or [shapes]} -> kiln's {"input_shapes"}.
void build_from_keras_config(ModelImpl& model, const Json& build, const std::string& where) {
  if (model.built() || !build.is_object() || !build.contains("input_shape") ||
      build["input_shape"].is_null())
    return;
  Json shapes = build["input_shape"];
  if (shapes.is_array() && !shapes.empty() && !shapes[0].is_array()) shapes = Json::array({shapes});
  std::vector<Tensor> inputs;
  try {
    for (const Json& s : shapes) {
      const Json entry{{"shape", s}};
      ConfigReader one(entry, "build_config");
      Shape batch = layer_config::shape_entry(one, "shape");
      if (batch.rank() == 0) one.fail("shape", "is empty; it should start with the batch axis");
      inputs.push_back(Tensor::symbolic(
          {DType::f32, Shape(std::vector<int64_t>(batch.begin() + 1, batch.end()))}, nullptr));
    }
    model.invoke(inputs, false);
  } catch (const Error& e) {
    throw Error(
        fmt::format("{}: the model could not be built from \"build_config\": {}", where, e.what()));
  }
}

// ---------------------------------------------------------------- writing

Json keras_build_config(const ModelImpl& m) {
  const auto& shapes = m.build_input_shapes();
  if (!m.built() || shapes.empty()) return Json{{"input_shape", nullptr}};
  auto one = [](const Shape& s) {
    Json dims = Json::array();
    for (int64_t d : s) dims.push_back(d == kUnknownDim ? Json(nullptr) : Json(d));
    return dims;
  };
  if (shapes.size() == 1) return Json{{"input_shape", one(shapes[0])}};
  Json list = Json::array();
  for (const Shape& s : shapes) list.push_back(one(s));
  return Json{{"input_shape", list}};
}

std::string weights_image(const ModelImpl& m, const KerasWeightLayout& layout, bool optimizer) {
  io::Hdf5Writer h5;
  h5.group("layers");
  for (const auto& g : layout.groups) h5.group(g.path, g.name);
  for (const auto& e : layout.variables) h5.dataset(e.path, e.variable.value());
  if (optimizer) {
    const OptimizerImpl& opt = m.compile_options().optimizer.impl();
    auto entries = keras_optimizer_layout(opt, trainable_variables(m, layout));
    std::map<std::pair<const void*, std::string>, Tensor> slots;
    for (const OptimizerImpl::Slot& s : opt.slots())
      slots.emplace(std::make_pair(s.owner.handle_id(), s.name), s.variable.value());
    h5.group("optimizer/vars", opt.name());
    for (size_t i = 0; i < entries.size(); ++i) {
      const KerasOptimizerEntry& e = entries[i];
      Tensor value;
      if (e.kind == KerasOptimizerEntry::Kind::iterations) {
        value = opt.variables().front().value();
      } else if (e.kind == KerasOptimizerEntry::Kind::learning_rate) {
        value = cast(opt.hyperparameters().front().value(), DType::f32);  // Keras' dtype
      } else if (auto it = slots.find({e.owner.handle_id(), e.slot}); it != slots.end()) {
        value = it->second;
      } else {
        // Not created yet (no update ran): the zeros the first update would start from.
        value = Tensor(runtime::Array::zeros(e.owner.dtype(), e.owner.value().shape()));
      }
      h5.dataset(fmt::format("optimizer/vars/{}", i), value);
    }
  }
  return h5.image();
}

}  // namespace

bool is_keras_file_path(const std::string& path) {
  const std::string ext = ".keras";
  return path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}

Model load_keras_file(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(fmt::format("load_model: \"{}\" does not exist", path));
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(
        fmt::format("load_model: \"{}\" is not a file; a .keras file is the zip archive "
                    "Keras' model.save writes",
                    path));
  io::ZipReader zip(io::read_file(path), path);
  for (const std::string& name : zip.names())
    if (name != kKerasMetadata && name != kKerasConfig && name != kKerasWeights)
      throw Error(fmt::format(
          "\"{}\": entry \"{}\" is not one kiln reads (metadata.json, config.json, "
          "model.weights.h5): assets of a layer kiln does not have? kiln refuses it rather than "
          "ignore it",
          path, name));
  for (const char* needed : {kKerasConfig, kKerasWeights})
    if (!zip.contains(needed))
      throw Error(
          fmt::format("\"{}\" has no \"{}\"; it is not a complete .keras file (it holds: "
                      "{})",
                      path, needed, fmt::join(zip.names(), ", ")));
  const std::string config_where = fmt::format("\"{}\": {}", path, kKerasConfig);
  const Json keras_config = parse_entry(zip, kKerasConfig);
  Layer layer;
  try {
    CustomObjectScope scope(options.custom_objects);
    layer = layer_from_config(kiln_layer_spec_from_keras(keras_config, options.custom_objects),
                              options.custom_objects);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", config_where, e.what()));
  }
  auto* impl = dynamic_cast<ModelImpl*>(layer.ptr().get());
  if (!impl)
    throw Error(
        fmt::format("{}: class \"{}\" is a layer, not a model", config_where, layer->class_name()));
  Model model(std::static_pointer_cast<ModelImpl>(layer.ptr()));
  build_from_keras_config(*impl, keras_config.value("build_config", Json(nullptr)), config_where);

  io::Hdf5Reader h5(zip.read(kKerasWeights), path + "/" + kKerasWeights);
  for (const std::string& top : h5.children("/"))
    if (top != "layers" && top != "vars" && top != "optimizer")
      throw Error(fmt::format(
          "\"{}\": group \"{}\" is not one kiln reads (layers, vars, optimizer)", h5.what(), top));
  const KerasWeightLayout layout = keras_weight_layout(*impl);
  load_weights(*impl, h5, layout);

  const Json compile = keras_config.value("compile_config", Json(nullptr));
  // An uncompiled Keras model writes null or {} (Keras 3).
  if (options.compile && !compile.is_null() && !(compile.is_object() && compile.empty())) {
    try {
      impl->compile(compile_options_from_config(kiln_compile_config_from_keras(compile)));
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", config_where, e.what()));
    }
    if (h5.kind("optimizer/vars") == io::Hdf5Reader::Kind::group) {
      OptimizerImpl& opt = impl->compile_options().optimizer.impl();
      load_optimizer_variables(opt, h5,
                               keras_optimizer_layout(opt, trainable_variables(*impl, layout)));
    }
  }
  return model;
}

void save_keras_file(const Model& model, const std::string& path, const SaveOptions& options) {
  const ModelImpl& m = model.get();
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    if (!std::filesystem::is_regular_file(path, ec))
      throw Error(
          fmt::format("save_model: \"{}\" exists and is not a file; kiln does not replace "
                      "it: choose another path or remove it",
                      path));
    if (!options.overwrite)
      throw Error(
          fmt::format("save_model: \"{}\" exists and overwrite is off; choose another path "
                      "or save with overwrite = true",
                      path));
  }
  Json config = keras_layer_spec_from_kiln(serialize_layer(model));
  config["build_config"] = keras_build_config(m);
  config["compile_config"] =
      m.compiled() ? keras_compile_config_from_kiln(compile_config(m.compile_options()))
                   : Json(nullptr);
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &utc);
  const Json metadata{
      {"keras_version", kKerasFormatVersion}, {"date_saved", date}, {"kiln_version", kVersion}};
  const KerasWeightLayout layout = keras_weight_layout(m);
  std::string weights = weights_image(m, layout, m.compiled() && options.include_optimizer);
  const std::string archive = io::zip_bytes({{kKerasMetadata, metadata.dump()},
                                             {kKerasConfig, config.dump()},
                                             {kKerasWeights, std::move(weights)}});
  io::write_file_atomically(path, archive);
}

}  // namespace kiln::saving_detail
