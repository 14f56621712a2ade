#include "tools/train_model_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "kiln/keras/io/file_util.h"

namespace kiln::tools {

Model load_model_for_training(const std::string& dir, const std::string& mode) {
  Model model = load_model(dir);
  // Recompiling with the same optimizer object keeps its restored iterations and slots.
  CompileOptions options = model->compile_options();
  options.run_eagerly = mode == "eager";
  model->compile(options);
  return model;
}

void save_trained_model(const Model& model, const std::string& dir, const Tensor& x,
                        const Tensor& y, int64_t batch_size) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < std::min(batch_size, x.shape()[0]); ++i) rows.push_back(i);
  const Tensor x_batch = data::take_rows(x, rows), y_batch = data::take_rows(y, rows);
  // As for the other files the command writes, missing parent directories are created.
  const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  model->save(dir, {.overwrite = true});
  const std::filesystem::path base(dir);
  const ConcreteFunction step = model->train_step_function(x_batch, y_batch);
  io::write_file_atomically((base / "train_step.kir").string(), step.ir_text());
  io::write_file_atomically((base / "train_step.optimized.kir").string(),
                            step.compiled_form({x_batch, y_batch}).ir_text(Stage::kOptimized));
  std::cout << "saved the model (architecture, weights, optimizer state) to " << dir
            << " and its training step's traced and optimized graphs to "
            << (base / "train_step.kir").string() << " and train_step.optimized.kir\n";
}

std::map<std::string, Tensor> saved_model_variables(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_regular_file(fs::path(dir) / "metadata.json"))
    throw Error(fmt::format(
        "--model {}: not a saved kiln model (no metadata.json); save one with kiln train "
        "--save-model DIR or Model::save",
        dir));
  std::map<std::string, Tensor> out;
  for (const char* file : {"model.weights.safetensors", "optimizer.safetensors"}) {
    const fs::path path = fs::path(dir) / file;
    if (std::string(file) == "optimizer.safetensors" && !fs::exists(path)) continue;
    std::map<std::string, std::string> names;  // entry -> variable name
    for (auto& [entry, value] : load_safetensors(path.string(), &names)) {
      auto it = names.find(entry);
      if (it == names.end())
        throw Error(fmt::format("{}: entry \"{}\" has no variable name in the file's metadata",
                                path.string(), entry));
      out[it->second] = value;
    }
  }
  return out;
}

}  // namespace kiln::tools
