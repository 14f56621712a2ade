// Array: a concrete, contiguous, row-major n-d buffer (dtype + shape + shared storage).
// Storage is 64-byte aligned and shared between copies; kernels write only into arrays they
// have just allocated, so a published Array is immutable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "kiln/ir/tensor_type.h"

namespace kiln::runtime {

class Storage {
 public:
  // Allocates `bytes` (rounded up to 64) with 64-byte alignment; contents uninitialised.
  static std::shared_ptr<Storage> allocate(size_t bytes);
  // A view of `bytes` at `data` inside memory that `owner` keeps alive (an executable's arena):
  // not counted as an allocation, never freed by the view.
  static std::shared_ptr<Storage> view(void* data, size_t bytes, std::shared_ptr<Storage> owner);
  // Memory owned outside kiln (a numpy array's buffer), kept alive by `keeper` until the last
  // Array using it is gone. Borrowed memory is only read: no kernel or executable writes into
  // it (no output overwrites it), even when the storage looks unshared.
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, std::shared_ptr<void> keeper);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  bool is_view() const { return owner_ != nullptr; }
  bool is_borrowed() const { return keeper_ != nullptr; }
  size_t bytes() const { return bytes_; }

  // Number of storage allocations made by this process (tests count allocations with it).
  static int64_t allocation_count();
  // Bytes currently held by live storages, and the high-water mark since the last reset.
  static int64_t live_bytes();
  static int64_t peak_bytes();
  static void reset_peak_bytes();

 private:
  Storage(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
  void* data_;
  size_t bytes_;
  std::shared_ptr<Storage> owner_;  // set for views: the storage that owns data_
  std::shared_ptr<void> keeper_;    // set for borrowed memory: what keeps data_ alive
};

inline constexpr size_t kAlignment = 64;

struct Array {
  DType dtype = DType::f32;
  Shape shape;
  std::shared_ptr<Storage> storage;

  // Uninitialised array of the given type.
  static Array empty(DType dtype, const Shape& shape);
  static Array empty(const TensorType& t) { return empty(t.dtype, t.shape); }
  static Array zeros(DType dtype, const Shape& shape);

  int64_t size() const { return shape.num_elements(); }
  size_t nbytes() const { return size_t(size()) * dtype_size(dtype); }
  TensorType type() const { return {dtype, shape}; }
  void* raw() const { return storage ? storage->data() : nullptr; }
  template <typename T>
  T* data() const {
    KILN_ASSERT(dtype_of<T>() == dtype, "Array::data<T>() with the wrong element type");
    return static_cast<T*>(raw());
  }
  // Same buffer, another shape with the same number of elements (no copy).
  Array reshaped(const Shape& s) const { return Array{dtype, s, storage}; }
};

}  // namespace kiln::runtime
