// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON mapping
// each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
// "__metadata__" string map), padded with spaces to a multiple of 8, then the row-major
// little-endian data. The reader checks every rule and names the file and the broken rule;
// writes are atomic (temporary file, then rename).
//
// Limits (keras/io/read_limits.h): a JSON header longer than kMaxSafetensorsHeaderBytes or
// nested deeper than kMaxSafetensorsJsonDepth, and a tensor of more than kMaxTensorElements
// elements (or whose element count overflows int64), are kiln::Errors raised before the
// tensor is allocated; every tensor's bytes must be in the file.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Tensors in the order of their data offsets.
NamedTensors load_safetensors(const std::string& path,
                              std::map<std::string, std::string>* metadata = nullptr);

std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata = {});
NamedTensors decode_safetensors(const std::string& bytes, const std::string& what,
                                std::map<std::string, std::string>* metadata = nullptr);

}  // namespace kiln
