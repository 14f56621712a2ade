// Shape: the dimensions of a tensor, rank 0 to kMaxRank, stored inline (no allocation).
// A dimension may be kUnknownDim (-1) only in symbolic (traced) shapes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace kiln {

inline constexpr int kMaxRank = 6;
inline constexpr int64_t kUnknownDim = -1;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims)
      : Shape(std::span<const int64_t>(dims.data(), dims.size())) {}

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  // Python-style index: dim(-1) is the last dimension. Throws on a bad axis.
  int64_t dim(int axis) const;
  std::span<const int64_t> dims() const { return {dims_.data(), size_t(rank_)}; }
  std::vector<int64_t> to_vector() const { return {dims_.begin(), dims_.begin() + rank_}; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  void push_back(int64_t d);
  bool is_fully_known() const;
  // Product of the dimensions (1 for a scalar). Throws if a dimension is unknown.
  int64_t num_elements() const;
  // Row-major strides in elements.
  std::array<int64_t, kMaxRank> strides() const;

  // numpy-style text: "()", "(5,)", "(2, 3)"; unknown dimensions print as "None".
  std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.dims_[i] != b.dims_[i]) return false;
    return true;
  }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// Normalises a possibly negative axis against `rank`; throws kiln::Error naming `op`.
int normalize_axis(int64_t axis, int rank, const char* op);

// numpy broadcasting of two shapes; throws kiln::Error naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// True if `from` can be broadcast to `to` (numpy rules, `to` fixed).
bool broadcastable_to(const Shape& from, const Shape& to);

}  // namespace kiln
