// Broadcast iteration for elementwise kernels: an output shape and up to three inputs that
// broadcast to it (numpy rules) are collapsed to the fewest dimensions, then visited as
// contiguous runs of the innermost dimension, where each input's stride is 0 or 1.
#pragma once

#include <array>
#include <cstdint>

#include "kiln/ir/shape.h"

namespace kiln::runtime {

template <int N>
struct BroadcastPlan {
  int rank = 1;
  std::array<int64_t, kMaxRank> dims{};
  std::array<std::array<int64_t, kMaxRank>, N> strides{};  // element strides, 0 = broadcast
  int64_t total = 1;

  BroadcastPlan(const Shape& out, const std::array<const Shape*, N>& in) {
    int r = out.rank();
    std::array<int64_t, kMaxRank> d{};
    std::array<std::array<int64_t, kMaxRank>, N> s{};
    for (int i = 0; i < r; ++i) d[i] = out[i];
    for (int k = 0; k < N; ++k) {
      const Shape& x = *in[k];
      int64_t acc = 1;
      for (int i = r - 1; i >= 0; --i) {
        int xi = x.rank() - (r - i);
        int64_t xd = xi >= 0 ? x[xi] : 1;
        s[k][i] = (xd == 1 && d[i] != 1) ? 0 : acc;
        acc *= xd;
      }
    }
    total = out.num_elements();
    // Drop size-1 dimensions, then merge neighbours whose strides line up for every input.
    rank = 0;
    for (int i = 0; i < r; ++i) {
      if (d[i] == 1) continue;
      if (rank > 0) {
        bool merge = true;
        for (int k = 0; k < N; ++k) merge = merge && strides[k][rank - 1] == s[k][i] * d[i];
        if (merge) {
          dims[rank - 1] *= d[i];
          for (int k = 0; k < N; ++k) strides[k][rank - 1] = s[k][i];
          continue;
        }
      }
      dims[rank] = d[i];
      for (int k = 0; k < N; ++k) strides[k][rank] = s[k][i];
      ++rank;
    }
    if (rank == 0) {
      rank = 1;
      dims[0] = 1;
      for (int k = 0; k < N; ++k) strides[k][0] = 1;
    }
    // The innermost stride of every input is now 0 (broadcast) or 1 (contiguous).
  }

  int64_t inner() const { return dims[rank - 1]; }

  // Calls fn(out_offset, std::array<int64_t, N> in_offsets, std::array<int64_t, N> in_strides,
  // len) for each contiguous run of output elements in [begin, end).
  template <typename F>
  void for_each_run(int64_t begin, int64_t end, F&& fn) const {
    const int64_t L = inner();
    int64_t row = begin / L, col = begin % L;
    std::array<int64_t, kMaxRank> idx{};
    int64_t rem = row;
    for (int i = rank - 2; i >= 0; --i) {
      idx[i] = rem % dims[i];
      rem /= dims[i];
    }
    std::array<int64_t, N> inner_strides;
    for (int k = 0; k < N; ++k) inner_strides[k] = strides[k][rank - 1];
    int64_t pos = begin;
    while (pos < end) {
      std::array<int64_t, N> off;
      for (int k = 0; k < N; ++k) {
        int64_t o = col * inner_strides[k];
        for (int i = 0; i < rank - 1; ++i) o += idx[i] * strides[k][i];
        off[k] = o;
      }
      int64_t len = std::min(L - col, end - pos);
      fn(pos, off, inner_strides, len);
      pos += len;
      col = 0;
      for (int i = rank - 2; i >= 0; --i) {
        if (++idx[i] < dims[i]) break;
        idx[i] = 0;
      }
    }
  }
};

}  // namespace kiln::runtime
