// The limits of kiln's readers of untrusted bytes (.npy, safetensors, MNIST IDX, the digits
// CSV and the gzip layer under IDX/CSV), in one place. A file beyond a limit is a kiln::Error
// that names the file, the value found and the limit, raised before anything of that size is
// allocated. docs/fuzzing.md lists them with the IR text limits (ir/parser.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "kiln/ir/dtype.h"

namespace kiln::io {

// Elements of one tensor read from a file (2^40: 4 TiB of f32, beyond any real weight file),
// counted over its non-zero dimensions. Keeps every byte count, stride and offset (elements x
// 8) far from int64 overflow, for empty tensors too.
inline constexpr int64_t kMaxTensorElements = int64_t(1) << 40;
// Bytes of a .npy header dict (numpy itself refuses more than 10,000 without an opt-in).
inline constexpr uint64_t kMaxNpyHeaderBytes = uint64_t(1) << 20;
// Bytes of a safetensors JSON header (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// Nesting depth of the safetensors JSON header (a valid one nests 3 deep:
// {"name": {"shape": [..]}}); deeper headers are rejected while parsing.
inline constexpr int kMaxSafetensorsJsonDepth = 16;
// Bytes a gzip-compressed IDX or CSV file may expand to (1 GiB; MNIST's largest file is 47 MB):
// a small "zip bomb" is an error, not an exhausted machine. Also the largest single record the
// streaming IDX reader (data::IdxRecordReader) allocates.
inline constexpr size_t kMaxDecompressedBytes = size_t(1) << 30;

// The number of elements of a tensor of shape `dims` (1 for a scalar). A negative dimension,
// or a product of the non-zero dimensions that overflows int64 or exceeds kMaxTensorElements
// (so an empty tensor's strides cannot overflow either), is a kiln::Error "WHAT: shape (..)
// ..." naming the dimensions and the limit; nothing is allocated.
int64_t checked_element_count(std::span<const int64_t> dims, const std::string& what);

// checked_element_count(dims) * dtype_size(dtype), the tensor's data size in bytes.
uint64_t checked_byte_size(std::span<const int64_t> dims, DType dtype, const std::string& what);

}  // namespace kiln::io
