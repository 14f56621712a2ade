// HDF5 files in memory (Debian's libhdf5, C API, core driver): the weights of Keras 3's
// `.keras` files (model.weights.h5) are read and written through these two classes only.
//
// Hdf5Reader opens a file image (the file's bytes) read-only and walks its groups and datasets
// by path ("layers/dense/vars/0"). read() returns a dataset as a kiln Tensor: float32, float64,
// int32, int64 and uint8 data (any byte order) become f32, f64, i32, i64 and u8; any other type
// (float16, bfloat16, strings, compounds, ...) is a kiln::Error naming the dataset and its type,
// as are bytes that are not an HDF5 file, a missing path, and a dataset whose shape declares more
// data than the image can hold (checked before allocating: kMaxTensorElements, and a contiguous
// dataset's bytes must fit in the image). HDF5's own error printing is switched off; its
// messages go into the kiln::Error.
//
// Hdf5Writer builds a new file image: groups (with a string attribute, as h5py writes them) and
// datasets of f32, f64, i32, i64 and u8 tensors; image() returns the file's bytes.
//
// libhdf5 is not thread-safe in Debian's serial build: every call into it here holds one
// process-wide lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln::io {

class Hdf5Reader {
 public:
  // `what` names the file in errors ("model.keras/model.weights.h5").
  Hdf5Reader(const std::string& bytes, std::string what);
  ~Hdf5Reader();
  Hdf5Reader(const Hdf5Reader&) = delete;
  Hdf5Reader& operator=(const Hdf5Reader&) = delete;

  enum class Kind { missing, group, dataset, other };
  Kind kind(const std::string& path) const;
  // The names of a group's members, sorted; kiln::Error when `path` is not a group.
  std::vector<std::string> children(const std::string& path) const;
  Tensor read(const std::string& path) const;
  // The string attribute `name` of the object at `path`; "" when it is absent or not a string.
  std::string string_attribute(const std::string& path, const std::string& name) const;
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  size_t image_size_ = 0;
  int64_t file_ = -1;  // hid_t
};

class Hdf5Writer {
 public:
  Hdf5Writer();
  ~Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  // Creates the group `path` (and its missing parents); with a non-empty `name`, sets its string
  // attribute "name" (Keras writes the layer's name there).
  void group(const std::string& path, const std::string& name = "");
  // Writes `value` as the dataset `path` (its parent group must exist).
  void dataset(const std::string& path, const Tensor& value);
  // Flushes and returns the file's bytes; the writer is closed afterwards.
  std::string image();

 private:
  int64_t file_ = -1;  // hid_t
};

}  // namespace kiln::io
