// A model's files: ModelImpl::save (the whole model, which saving/saving.h writes) and
// save_weights / load_weights (its variables in safetensors, by name).
#include <fmt/format.h>

#include <map>

#include "kiln/keras/io/safetensors.h"
#include "kiln/keras/models/model.h"
#include "kiln/keras/saving/saving.h"

namespace kiln {

void ModelImpl::save(const std::string& path, const SaveOptions& options) const {
  save_model(Model(std::static_pointer_cast<ModelImpl>(
                 std::const_pointer_cast<LayerImpl>(shared_from_this()))),
             path, options);
}

void ModelImpl::save_weights(const std::string& path) const {
  NamedTensors tensors;
  for (const Variable& v : weights()) tensors.emplace_back(v.name(), v.value());
  save_safetensors(path, tensors, {{"format", "kiln"}, {"model", name()}});
}

void ModelImpl::load_weights(const std::string& path) {
  NamedTensors loaded = load_safetensors(path);
  std::map<std::string, Tensor> by_name(loaded.begin(), loaded.end());
  std::vector<Variable> ws = weights();
  if (ws.empty())
    throw Error(
        fmt::format("load_weights: model \"{}\" has no weights yet; build it first (call "
                    "it on data, or give it an input shape)",
                    name()));
  std::vector<std::string> missing;
  for (const Variable& v : ws)
    if (!by_name.count(v.name())) missing.push_back(v.name());
  if (!missing.empty())
    throw Error(fmt::format("load_weights: \"{}\" has no tensor for weight(s) {} of model \"{}\"",
                            path, fmt::join(missing, ", "), name()));
  if (by_name.size() != ws.size()) {
    std::vector<std::string> extra;
    for (const auto& [n, t] : by_name) {
      bool used = false;
      for (const Variable& v : ws) used = used || v.name() == n;
      if (!used) extra.push_back(n);
    }
    throw Error(fmt::format("load_weights: \"{}\" has tensor(s) {} that model \"{}\" does not have",
                            path, fmt::join(extra, ", "), name()));
  }
  for (const Variable& v : ws) {
    const Tensor& t = by_name.at(v.name());
    if (!(t.type() == v.value().type()))
      throw Error(fmt::format("load_weights: \"{}\" holds {} as {}, but the model's weight is {}",
                              path, v.name(), t.type().to_string(), v.value().type().to_string()));
  }
  for (Variable v : ws) v.assign(by_name.at(v.name()));
}

}  // namespace kiln
