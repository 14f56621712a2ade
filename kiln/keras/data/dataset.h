// In-memory examples (Examples: x and y tensors) and the deterministic helpers used to feed them
// to models: a seeded shuffle that gives the same order on every machine, train/test splits
// and batching. The streaming pipeline (data::Dataset) is in keras/data/pipeline.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/keras/io/read_limits.h"

namespace kiln::data {

// Examples along axis 0 of both tensors.
struct Examples {
  Tensor x, y;
  int64_t size() const { return x.shape()[0]; }
};

// 0..n-1 in a seeded random order: the order a ShuffleBuffer (shuffle_buffer.h) holding all n
// yields, which is what Dataset::shuffle(buffer_size >= n, seed) gives (identical everywhere).
std::vector<int64_t> permutation(int64_t n, uint64_t seed);
// Rows `rows` of `x` (axis 0), in that order.
Tensor take_rows(const Tensor& x, const std::vector<int64_t>& rows);
Examples take(const Examples& d, const std::vector<int64_t>& rows);
// Shuffles with `seed`, then puts the last `test_fraction` of the examples in the test set.
std::pair<Examples, Examples> train_test_split(const Examples& d, double test_fraction,
                                               uint64_t seed);
// Index lists of consecutive batches of `batch_size` (the last, partial batch is kept),
// over a seeded permutation when `shuffle`.
std::vector<std::vector<int64_t>> batch_indices(int64_t n, int64_t batch_size, bool shuffle,
                                                uint64_t seed);

// `bytes` decompressed when they are gzip (detected by the magic bytes 1f 8b), else `bytes`
// unchanged. Corrupt or truncated gzip data, or data that would expand beyond `max_bytes`
// (default io::kMaxDecompressedBytes, keras/io/read_limits.h), is a kiln::Error naming
// `what`; no more than about `max_bytes` is ever allocated.
std::string maybe_gunzip(std::string bytes, const std::string& what,
                         size_t max_bytes = io::kMaxDecompressedBytes);

// Reads a file, decompressing it when it is gzip (maybe_gunzip); kiln::Error naming the path
// when it is missing or corrupt.
std::string read_maybe_gzip(const std::string& path);

}  // namespace kiln::data
