// numpy's .npy format: save (version 1.0 header, little-endian, C order) and load (versions
// 1.0, 2.0 and 3.0; C or Fortran order; float32/64, int32/64, uint8, bool). Malformed files
// raise kiln::Error naming the file and the problem. Writes go to a temporary file that is
// renamed into place, so an existing file is never left half-written.
//
// Limits (keras/io/read_limits.h): a header longer than kMaxNpyHeaderBytes or a shape of more
// than kMaxTensorElements elements (or whose element count overflows int64) is a kiln::Error
// raised before any allocation; the data must be in the file, so no read allocates more than
// the file's size.
#pragma once

#include <string>

#include "kiln/frontend/tensor.h"

namespace kiln {

// numpy has no bfloat16 type: a bfloat16 tensor is saved as float32 (its exact values, '<f4'),
// and load_npy has no bfloat16 path (a raw 2-byte '|V2' array is a kiln::Error).
void save_npy(const std::string& path, const Tensor& tensor);
Tensor load_npy(const std::string& path);

// The same for in-memory bytes (tests and tools); `what` names the source in errors.
std::string encode_npy(const Tensor& tensor);
Tensor decode_npy(const std::string& bytes, const std::string& what);

}  // namespace kiln
