// Internal to keras/saving/: writing a saved model's directory atomically and reading its
// files with errors that name them.
//
// A DirectoryWriter makes a temporary sibling "<path>.tmp.<pid>.<n>", takes the files, and on
// commit() renames it over `path`: when `path` already holds a saved model, the two are swapped
// atomically (renameat2 RENAME_EXCHANGE; two renames where the file system lacks it) and the
// old one is removed. Destroyed without commit() it removes the temporary. Temporaries left by
// killed writers (their pid gone, older than a few seconds) are removed by the next writer of
// the same path.
#pragma once

#include <string>

#include "kiln/keras/layers/layer.h"

namespace kiln::saving_detail {

class DirectoryWriter {
 public:
  // kiln::Error when `path` exists and is not a saved model (never replaced), when it is one
  // and !overwrite, or when the temporary cannot be made.
  DirectoryWriter(std::string path, bool overwrite);
  ~DirectoryWriter();
  DirectoryWriter(const DirectoryWriter&) = delete;
  DirectoryWriter& operator=(const DirectoryWriter&) = delete;
  // Where to write the file `name` (inside the temporary).
  std::string file(const std::string& name) const;
  void commit();

 private:
  std::string path_, tmp_;
  bool committed_ = false;
};

// The file names inside a saved model, and its format.
inline constexpr const char* kMetadataFile = "metadata.json";
inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kWeightsFile = "model.weights.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kFormat = "kiln.model";
inline constexpr int kFormatVersion = 1;

// True when `dir` holds a metadata.json whose "format" is kiln's.
bool is_saved_model(const std::string& dir);
// The JSON in `file` (a path); kiln::Error naming the file for a missing file or bad JSON.
Json read_json_file(const std::string& file);

}  // namespace kiln::saving_detail
