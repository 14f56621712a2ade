#include "kiln/keras/models/model.h"

#include <fmt/format.h>

#include "kiln/frontend/function/trace_context.h"
#include "kiln/keras/training/model_steps.h"

namespace kiln {

ModelImpl::ModelImpl(std::string class_name, std::string name)
    : LayerImpl(std::move(class_name), std::move(name)) {
  outputs_keep_masks_ = true;  // the masks of the layers that made the outputs
}

std::vector<Layer> ModelImpl::layers() const { return sublayers(); }

std::vector<std::string> ModelImpl::layer_output_shapes() const {
  std::vector<std::string> out;
  for (const Layer& layer : layers()) out.push_back(detail::layer_shape_text(layer));
  return out;
}

void ModelImpl::compile(CompileOptions options, std::source_location loc) {
  compile_origin_ = detail::user_location(loc);
  if (!options.loss.defined())
    throw Error(
        fmt::format("compile: model \"{}\" needs a loss, e.g. "
                    "{{.loss = \"sparse_categorical_crossentropy\"}}",
                    name()));
  if (!options.optimizer.defined())
    throw Error(fmt::format("compile: model \"{}\" needs an optimizer", name()));
  // Checks the per-output options against the outputs now when the model knows them.
  std::vector<std::string> outputs = output_names();
  std::optional<detail::OutputObjectives> objectives;
  if (!outputs.empty()) objectives.emplace(options, outputs, name());
  compiled_ = std::move(options);
  steps_.reset();  // traced steps belong to one compile
  if (objectives) ModelSteps::of(*this).resolved = std::move(objectives);
}

const CompileOptions& ModelImpl::compile_options() const {
  if (!compiled_)
    throw Error(
        fmt::format("model \"{}\" must be compiled before training or evaluation: call "
                    "compile({{.optimizer = ..., .loss = ...}}) first",
                    name()));
  return *compiled_;
}

ModelImpl& Model::get() const {
  auto* m = dynamic_cast<ModelImpl*>(&impl());
  if (!m) throw Error("Model: the handle does not hold a model");
  return *m;
}

}  // namespace kiln
