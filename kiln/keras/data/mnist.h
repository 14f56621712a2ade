// MNIST in its IDX files: images (magic 0x00000803, unsigned bytes, N x rows x cols) and labels
// (magic 0x00000801), big-endian sizes, each file optionally gzip-compressed. Images come back
// as float32 (N, rows, cols) scaled to [0, 1] (pixel / 255); labels as int64 (N,).
// Every malformed file is a kiln::Error naming it. Limits (keras/io/read_limits.h): the data
// must be in the file (the header's element count, checked for int64 overflow and against
// kMaxTensorElements, must equal the bytes after it) and a gzip file may expand to at most
// kMaxDecompressedBytes, so no read allocates more than that or the file's size.
#pragma once

#include <string>

#include "kiln/keras/data/dataset.h"

namespace kiln::data {

Tensor load_idx_images(const std::string& path);
Tensor load_idx_labels(const std::string& path);

// The same for a file's bytes (gzip-compressed or not); `what` names the source in errors.
Tensor decode_idx_images(std::string bytes, const std::string& what);
Tensor decode_idx_labels(std::string bytes, const std::string& what);

// DIR/NAME, or DIR/NAME.gz when only that exists; kiln::Error naming both (and the four files
// MNIST needs) when neither does.
std::string find_mnist_file(const std::string& dir, const std::string& name);

// Reads DIR/train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte (each optionally with .gz). Returns {train, test}. For a streamed
// form (one example in memory at a time) see mnist_datasets in loader_datasets.h.
std::pair<Examples, Examples> load_mnist(const std::string& dir);

}  // namespace kiln::data
