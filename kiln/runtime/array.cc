#include "kiln/runtime/array.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "kiln/runtime/huge_alloc.h"

namespace kiln::runtime {
namespace {
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_live_bytes{0};
std::atomic<int64_t> g_peak_bytes{0};
}  // namespace

std::shared_ptr<Storage> Storage::allocate(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = aligned_alloc_huge(rounded);
  if (!p)
    throw Error(fmt::format("out of memory: could not allocate {} bytes for a tensor", rounded));
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  int64_t live =
      g_live_bytes.fetch_add(int64_t(rounded), std::memory_order_relaxed) + int64_t(rounded);
  int64_t peak = g_peak_bytes.load(std::memory_order_relaxed);
  while (live > peak &&
         !g_peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
  return std::shared_ptr<Storage>(new Storage(p, rounded));
}

std::shared_ptr<Storage> Storage::view(void* data, size_t bytes, std::shared_ptr<Storage> owner) {
  auto s = std::shared_ptr<Storage>(new Storage(data, bytes));
  s->owner_ = std::move(owner);
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, std::shared_ptr<void> keeper) {
  KILN_ASSERT(keeper != nullptr, "Storage::borrow without a keeper");
  auto s = std::shared_ptr<Storage>(new Storage(data, bytes));
  s->keeper_ = std::move(keeper);
  return s;
}

Storage::~Storage() {
  if (owner_ || keeper_) return;  // a view or borrowed memory: freed by its owner
  g_live_bytes.fetch_sub(int64_t(bytes_), std::memory_order_relaxed);
  std::free(data_);
}

int64_t Storage::allocation_count() { return g_allocations.load(); }
int64_t Storage::live_bytes() { return g_live_bytes.load(); }
int64_t Storage::peak_bytes() { return g_peak_bytes.load(); }
void Storage::reset_peak_bytes() { g_peak_bytes.store(g_live_bytes.load()); }

Array Array::empty(DType dtype, const Shape& shape) {
  if (!shape.is_fully_known())
    throw Error(fmt::format("cannot allocate a tensor of shape {}: a dimension is unknown",
                            shape.to_string()));
  size_t bytes = size_t(shape.num_elements()) * dtype_size(dtype);
  return Array{dtype, shape, Storage::allocate(bytes)};
}

Array Array::zeros(DType dtype, const Shape& shape) {
  Array a = empty(dtype, shape);
  std::memset(a.raw(), 0, a.nbytes());
  return a;
}

}  // namespace kiln::runtime
