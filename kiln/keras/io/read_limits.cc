#include "kiln/keras/io/read_limits.h"

#include <fmt/format.h>

#include "kiln/ir/error.h"

namespace kiln::io {
namespace {

std::string dims_text(std::span<const int64_t> dims) {
  return fmt::format("({}{})", fmt::join(dims, ", "), dims.size() == 1 ? "," : "");
}

}  // namespace

int64_t checked_element_count(std::span<const int64_t> dims, const std::string& what) {
  // The product of the non-zero dimensions is what is limited: an empty tensor of shape
  // (0, 2^40, 2^40) has no elements, but its strides and offsets would overflow int64.
  int64_t n = 1;
  bool overflow = false, empty = false;
  for (int64_t d : dims) {
    if (d < 0)
      throw Error(
          fmt::format("{}: shape {} has the negative dimension {}", what, dims_text(dims), d));
    if (d == 0)
      empty = true;
    else
      overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  if (overflow)
    throw Error(fmt::format(
        "{}: shape {} has more elements than int64 can count (kiln reads at most {} = 2^40 "
        "elements into one tensor, kiln::io::kMaxTensorElements); the file is corrupt",
        what, dims_text(dims), kMaxTensorElements));
  if (n > kMaxTensorElements)
    throw Error(fmt::format(
        "{}: shape {} has {} elements{}, more than the limit of {} (2^40, "
        "kiln::io::kMaxTensorElements); the file is corrupt or not meant for kiln",
        what, dims_text(dims), n, empty ? " in its non-zero dimensions" : "", kMaxTensorElements));
  return empty ? 0 : n;
}

uint64_t checked_byte_size(std::span<const int64_t> dims, DType dtype, const std::string& what) {
  return uint64_t(checked_element_count(dims, what)) * dtype_size(dtype);
}

}  // namespace kiln::io
