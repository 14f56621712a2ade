// The UCI digits data set shipped in data/digits.csv.gz (1,797 8x8 images of handwritten
// digits, 10 classes; see data/README.md): x is float32 (N, 64) scaled to [0, 1] (pixel / 16),
// y is int64 labels. The file is found in data_dir() (data_dir.h).
#pragma once

#include <string>

#include "kiln/keras/data/dataset.h"

namespace kiln::data {

// Path of the shipped file: data_dir()/digits.csv.gz.
std::string default_digits_path();
Examples load_digits(const std::string& path = default_digits_path());

// The same for a file's bytes (gzip-compressed or not, maybe_gunzip in dataset.h): rows of 64
// pixels 0..16 and a label 0..9, comma-separated. A malformed row is a kiln::Error naming
// `what`, the line and the value.
Examples decode_digits(std::string bytes, const std::string& what);

}  // namespace kiln::data
