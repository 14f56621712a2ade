// Whole-model saving and loading (Keras 3's model.save / keras.saving.load_model).
//
//   model->save("run/model.kiln");                       // or kiln::save_model(model, path)
//   kiln::Model m = kiln::load_model("run/model.kiln");  // compiled, optimizer state restored
//   m->fit(x, y, {.epochs = 4, .initial_epoch = 2});     // resumes where training stopped
//
// A saved model is a directory (docs/saving.md):
//   metadata.json              {"format": "kiln.model", "format_version": 1, "kiln_version"}
//   config.json                {"class_name", "config" (get_config), "build_config",
//                               "compile_config" (null when not compiled)}
//   model.weights.safetensors  every variable of the model (weights and seed-generator state)
//                              named by its place in the model: "layers/<layer>/vars/<i>",
//                              <i> counting the layer's variables() (the model's own variables,
//                              outside its layers: "vars/<i>"); the safetensors metadata maps
//                              each entry to the variable's name ("dense_1/kernel")
//   optimizer.safetensors      only for a compiled model: "iterations", "hyperparameters/<name>"
//                              (learning_rate, beta_1, ...) and "slots/<weight entry>/<slot>"
//                              ("slots/layers/dense/vars/0/momentum")
// The directory is written whole into a temporary sibling, then renamed over `path` (an
// existing saved model there is swapped out atomically): a reader or a killed writer sees the
// old model or the new one, never a mixture.
//
// load_model rebuilds the model from config.json (layer_from_config: built-in layers, the
// registry and custom_objects; keras/saving/serialization.h), builds it, assigns every
// variable, then (unless compile = false) compiles it with the saved compile configuration and
// restores the optimizer's iterations, hyperparameters and slots, so fit continues exactly as
// uninterrupted training would (bitwise at the same thread count; pass initial_epoch to fit
// for the same shuffling). Everything read is checked: a missing or unreadable file, bad JSON,
// an unknown format or layer class, a missing, extra, misshapen or mistyped tensor and a
// corrupt safetensors file are kiln::Errors naming the file, the entry and the values.
#pragma once

#include <string>

#include "kiln/keras/models/model.h"
#include "kiln/keras/saving/serialization.h"

namespace kiln {

struct LoadOptions {
  CustomObjects custom_objects{};  // factories for custom layer classes (Keras' custom_objects)
  bool compile = true;             // false: skip the compile configuration and the optimizer state
};

// Writes `model` to the directory `path` (see above). kiln::Error when a layer's get_config or
// the optimizer's schedule cannot be serialized, when `path` exists but is not a saved model (a
// file, or a directory without kiln's metadata.json: never replaced), when it is a saved model
// and options.overwrite is off, or when writing fails (nothing at `path` changes then).
void save_model(const Model& model, const std::string& path, const SaveOptions& options = {});
Model load_model(const std::string& path, const LoadOptions& options = {});

}  // namespace kiln
