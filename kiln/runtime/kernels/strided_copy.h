// Strided copies: the one data-movement primitive behind transpose, slice, pad, concat and
// broadcast-like copies. A copy visits every index of `shape` (row-major order) and moves one
// element of `elem_size` bytes from src[src_offset + sum(idx * src_strides)] to
// dst[dst_offset + sum(idx * dst_strides)]; strides and offsets count elements, not bytes.
//
// Contract: every visited source and destination position must be inside its buffer (the
// caller's job; nothing is read or written when the shape has a zero dimension), and distinct
// indices must map to distinct destination positions (no zero or overlapping destination
// strides), since chunks run in parallel. Source strides may be zero (broadcast) or negative.
// The copy is dtype-generic: only the element size matters. Work is spread over kiln's TBB
// arena for large copies, and the result never depends on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kiln/ir/dtype.h"

namespace kiln::runtime {

void strided_copy(size_t elem_size, std::span<const int64_t> shape, const void* src,
                  int64_t src_offset, std::span<const int64_t> src_strides, void* dst,
                  int64_t dst_offset, std::span<const int64_t> dst_strides);

// Same, into a contiguous row-major destination of `shape` (the gather of a view).
void strided_copy_to_contiguous(size_t elem_size, std::span<const int64_t> shape, const void* src,
                                int64_t src_offset, std::span<const int64_t> src_strides,
                                void* dst);

// memcpy / memset(0) of `bytes`, split over the arena when large.
void parallel_memcpy(void* dst, const void* src, size_t bytes);
void parallel_zero(void* dst, size_t bytes);

// Calls fn(TypeTag<W>{}) with an unsigned word type W of `elem_size` bytes (1, 2, 4 or 8), for
// kernels that only move elements. Throws (internal error) on any other size.
template <typename Fn>
decltype(auto) visit_word(size_t elem_size, Fn&& fn) {
  switch (elem_size) {
    case 1:
      return fn(TypeTag<uint8_t>{});
    case 2:
      return fn(TypeTag<uint16_t>{});
    case 4:
      return fn(TypeTag<uint32_t>{});
    case 8:
      return fn(TypeTag<uint64_t>{});
  }
  internal_error(__FILE__, __LINE__, "visit_word: unsupported element size");
}

}  // namespace kiln::runtime
