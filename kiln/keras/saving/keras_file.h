// Internal to keras/saving/: Keras 3's `.keras` files, read and written by load_model and
// save_model when the path ends in ".keras" (keras/saving/saving.h, docs/saving.md).
//
// A .keras file is a zip archive of
//   metadata.json     {"keras_version", "date_saved"} (kiln adds "kiln_version")
//   config.json       {"module", "class_name", "config", "registered_name", "build_config",
//                      "compile_config"}: Keras' serialized model, whose layer configs are the
//                      ones kiln's own saved models hold (builtin_layers.cc, model_config.cc)
//   model.weights.h5  HDF5: the variables at the places keras/saving/keras_weights.h names,
//                      and "optimizer/vars/<i>" (iterations, learning rate, slots)
//
// Reading maps Keras' configs onto kiln's factories (layer_from_config, compile_options_from_
// config) after checking what kiln cannot represent, each a kiln::Error naming the file, the
// entry and the value: an entry other than those three (assets of a preprocessing layer), a custom
// object (a module outside keras) without a factory, a call argument kiln does not replay, an
// optimizer, loss or metric setting kiln does not compute (use_ema, weight_decay on Adam,
// label_smoothing, ...), a dataset missing, extra, misshapen or of another dtype, an optimizer
// variable count that is not Keras' for that optimizer, a damaged zip archive or HDF5 file.
//
// Writing builds the whole archive in memory and writes it with io::write_file_atomically
// (temporary file, fsync, rename): a reader sees the old file or the new one.
#pragma once

#include <string>

#include "kiln/keras/saving/saving.h"

namespace kiln::saving_detail {

// True for a path whose file name ends in ".keras".
bool is_keras_file_path(const std::string& path);

void save_keras_file(const Model& model, const std::string& path, const SaveOptions& options);
Model load_keras_file(const std::string& path, const LoadOptions& options);

}  // namespace kiln::saving_detail
