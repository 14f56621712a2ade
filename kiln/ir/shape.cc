#include "kiln/ir/shape.h"

#include <fmt/format.h>

#include "kiln/ir/error.h"

namespace kiln {
namespace {

void check_rank(size_t rank) {
  if (rank > size_t(kMaxRank))
    throw Error(fmt::format("shape of rank {} is not supported: kiln tensors have rank 0 to {}",
                            rank, kMaxRank));
}

void check_dim(int64_t d) {
  if (d < 0 && d != kUnknownDim)
    throw Error(
        fmt::format("invalid dimension {}: dimensions must be >= 0 (or -1 for unknown)", d));
}

}  // namespace

Shape::Shape(std::initializer_list<int64_t> dims) {
  check_rank(dims.size());
  for (int64_t d : dims) {
    check_dim(d);
    dims_[rank_++] = d;
  }
}

Shape::Shape(std::span<const int64_t> dims) {
  check_rank(dims.size());
  for (int64_t d : dims) {
    check_dim(d);
    dims_[rank_++] = d;
  }
}

int64_t Shape::dim(int axis) const { return dims_[normalize_axis(axis, rank_, "Shape::dim")]; }

void Shape::push_back(int64_t d) {
  check_rank(size_t(rank_) + 1);
  check_dim(d);
  dims_[rank_++] = d;
}

bool Shape::is_fully_known() const {
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] == kUnknownDim) return false;
  return true;
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] == kUnknownDim)
      throw Error(
          fmt::format("shape {} has an unknown dimension; its size is not known", to_string()));
    // An overflowing product is not a size either (only hand-built or hostile shapes get
    // there: the readers limit what they create).
    if (__builtin_mul_overflow(n, dims_[i], &n)) {
      for (int j = i + 1; j < rank_; ++j)
        if (dims_[j] == 0) return 0;
      throw Error(fmt::format("shape {} has more elements than int64 can count", to_string()));
    }
  }
  return n;
}

std::array<int64_t, kMaxRank> Shape::strides() const {
  std::array<int64_t, kMaxRank> s{};
  int64_t acc = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    s[i] = acc;
    // Only a shape with no elements (a zero further left) or too many to count can overflow
    // here; its strides address nothing: wrap instead of undefined behaviour.
    acc = int64_t(uint64_t(acc) * uint64_t(dims_[i]));
  }
  return s;
}

std::string Shape::to_string() const {
  std::string s = "(";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += dims_[i] == kUnknownDim ? std::string("None") : std::to_string(dims_[i]);
  }
  if (rank_ == 1) s += ",";
  return s + ")";
}

int normalize_axis(int64_t axis, int rank, const char* op) {
  if (axis < -rank || axis >= rank || (rank == 0))
    throw Error(
        fmt::format("{}: axis {} is out of range for a tensor of rank {} "
                    "(valid axes are {} to {})",
                    op, axis, rank, -rank, rank - 1));
  return int(axis < 0 ? axis + rank : axis);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  int rank = std::max(a.rank(), b.rank());
  std::array<int64_t, kMaxRank> out{};
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else if (da == kUnknownDim || db == kUnknownDim)
      out[i] = da == kUnknownDim ? db : da;
    else
      throw Error(
          fmt::format("{}: shapes {} and {} do not broadcast: dimension {} (from the "
                      "right) is {} in one and {} in the other; they must be equal or 1",
                      op, a.to_string(), b.to_string(), rank - i, da, db));
  }
  return Shape(std::span<const int64_t>(out.data(), size_t(rank)));
}

bool broadcastable_to(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  for (int i = 0; i < from.rank(); ++i) {
    int64_t f = from[from.rank() - 1 - i], t = to[to.rank() - 1 - i];
    if (f != 1 && f != t) return false;
  }
  return true;
}

}  // namespace kiln
