// The data loaders' data as pipeline Datasets (pipeline.h): the digits and text windows from
// their in-memory tensors, MNIST streamed from its IDX files one example at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/keras/data/digits.h"
#include "kiln/keras/data/pipeline.h"

namespace kiln::data {

// load_digits(path) as examples: x float32 (64,), y int64 scalar.
Dataset digits_dataset(const std::string& path = default_digits_path());

// text_windows(ids, seq_len, stride) as examples: x and y int32 (seq_len,).
Dataset text_dataset(const std::vector<int32_t>& ids, int64_t seq_len, int64_t stride);

// MNIST read lazily: x float32 (rows, cols) scaled to [0, 1], y int64 scalar, one example per
// record, the same values as load_idx_images / load_idx_labels. The headers are read and
// checked here (kiln::Error naming the file, as IdxRecordReader in idx_stream.h describes, or
// both files when their counts differ); each pass opens the files anew and holds one record of
// each. cardinality() is the number of examples.
Dataset mnist_dataset(const std::string& images_path, const std::string& labels_path);
// DIR's train and test files (names as load_mnist finds them, .gz or not): {train, test}.
std::pair<Dataset, Dataset> mnist_datasets(const std::string& dir);

}  // namespace kiln::data
