// Literal: the data of a constant node, row-major, with its type. Shares its bytes (a traced
// concrete tensor's storage is not copied); ir/ does not depend on runtime/, so the owner is
// type-erased.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kiln/ir/tensor_type.h"

namespace kiln::ir {

class Literal {
 public:
  // Wraps bytes owned by `owner` (type.shape must be fully known).
  Literal(TensorType type, std::shared_ptr<const void> owner, const void* data);
  // Copies `bytes` (num_elements * dtype size) into a new 64-byte aligned buffer.
  static std::shared_ptr<const Literal> copy_of(TensorType type, const void* bytes);

  const TensorType& type() const { return type_; }
  const void* data() const { return data_; }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data_);
  }
  int64_t num_elements() const { return type_.shape.num_elements(); }
  size_t byte_size() const { return size_t(num_elements()) * dtype_size(type_.dtype); }
  // True when every element equals the first (printed as one value).
  bool is_splat() const;
  // Element i as double (exact for every dtype kiln has except i64 beyond 2^53).
  double as_double(int64_t i) const;
  // Bitwise equality of type and data.
  bool equals(const Literal& other) const;

 private:
  TensorType type_;
  std::shared_ptr<const void> owner_;
  const void* data_;
};

}  // namespace kiln::ir
