// The im2col machinery of the 2-D convolutions (conv.cc for float32 and float64, conv_bf16.cc for
// bfloat16): the chunking of output pixels, the im2col matrix of a range of output pixels (one
// row per pixel (n, y, x), K = KH*KW*C columns ordered (kh, kw, c), so the HWIO filter is its
// K x O right-hand side), its adjoint col2im_add, and how a filter gradient is cut into parts.
// Everything depends on the shapes only, so results are bitwise equal on any number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kiln/runtime/kernels/conv_geom.h"
#include "kiln/runtime/kernels/vector_block.h"

namespace kiln::runtime::conv_im2col {

// Rows of an im2col chunk: enough for a good GEMM, few enough to keep the chunk near L2.
constexpr int64_t kTargetChunkBytes = int64_t{512} << 10;
constexpr int64_t kMinChunkRows = 128;
// Filter-gradient partial sums: at most this many, each worth at least kMinPartialFlops,
// holding at most kMaxPartialBytes of extra memory together. (2 MFLOP: a first layer of few
// channels is bound by its im2col, not its flops; 8 MFLOP left kiln bench's CNN's first filter
// gradient, 14.4 MFLOP, on one thread: 429 -> 264 us on two.)
constexpr int64_t kMaxPartials = 8;
constexpr int64_t kMinPartialFlops = int64_t{1} << 21;
constexpr int64_t kMaxPartialBytes = int64_t{64} << 20;
// Shallow windows: filter-gradient partials of at least kMinShallowPartFlops, at most
// kMaxShallowParts (a partial is only K x O values): kiln bench's first layer, 14.4 MFLOP,
// has 27 partials of 64 output lines (28 pixels each).
constexpr int64_t kMinShallowPartFlops = int64_t{1} << 19;
constexpr int64_t kMaxShallowParts = 32;

inline int64_t chunk_rows(const ConvGeom& g, size_t elem) {
  int64_t rows = kTargetChunkBytes / std::max<int64_t>(1, g.k() * int64_t(elem));
  return std::max(rows, kMinChunkRows);
}

// Output pixel r = (n*oh + y)*ow + x, walked incrementally.
struct Pixel {
  int64_t n, y, x;
  Pixel(const ConvGeom& g, int64_t r) : n(r / (g.oh * g.ow)), y(r / g.ow % g.oh), x(r % g.ow) {}
  void next(const ConvGeom& g) {
    if (++x < g.ow) return;
    x = 0;
    if (++y < g.oh) return;
    y = 0;
    ++n;
  }
};

// Calls fn(kernel_offset, input_offset, count) for the runs of the window of output pixel p
// that fall inside the image (offsets in elements within the K-row and the input), and
// zero(kernel_offset, count) for the padded runs.
template <typename F, typename Z>
inline void for_window(const ConvGeom& g, const Pixel& p, F&& fn, Z&& zero) {
  const int64_t C = g.c, row_len = g.kw * C;
  const int64_t x0 = p.x * g.sw - g.pw;
  // Taps j in [j0, j1) land inside the image row.
  int64_t j0 = 0, j1 = g.kw;
  if (x0 < 0) j0 = std::min(g.kw, (-x0 + g.dw - 1) / g.dw);
  if (x0 > g.w - 1)
    j1 = j0;
  else if (x0 + (g.kw - 1) * g.dw >= g.w)
    j1 = std::max(j0, (g.w - 1 - x0) / g.dw + 1);
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t iy = p.y * g.sh - g.ph + i * g.dh;
    const int64_t koff = i * row_len;
    if (iy < 0 || iy >= g.h) {
      zero(koff, row_len);
      continue;
    }
    const int64_t base = ((p.n * g.h + iy) * g.w) * C;
    if (j0 > 0) zero(koff, j0 * C);
    if (g.dw == 1) {
      if (j1 > j0) fn(koff + j0 * C, base + (x0 + j0) * C, (j1 - j0) * C);
    } else {
      for (int64_t j = j0; j < j1; ++j) fn(koff + j * C, base + (x0 + j * g.dw) * C, C);
    }
    if (j1 < g.kw) zero(koff + j1 * C, (g.kw - j1) * C);
  }
}

// dst[0, n) = src[0, n) in copies of constant sizes, which the compiler inlines: the runs of a
// window are short (3 floats for a 3x3 filter over one channel), and a call to memcpy per run
// cost more than the whole GEMM of a first convolution layer.
template <typename T>
void copy_run(T* dst, const T* src, int64_t n) {
  constexpr int64_t kChunk = 32 / int64_t(sizeof(T));
  for (; n >= kChunk; n -= kChunk, dst += kChunk, src += kChunk) std::memcpy(dst, src, 32);
  if (n >= kChunk / 2) {
    std::memcpy(dst, src, 16);
    n -= kChunk / 2, dst += kChunk / 2, src += kChunk / 2;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// col[r - r0, :] = window of output pixel r, for r in [r0, r1). Undilated windows go a kernel
// row at a time: rows of the window outside the image are zeros, and a window inside the image
// horizontally is one run of kw*C values; only the pixels at the left and right edges walk
// their taps (for_window).
template <typename T>
void im2col(const T* x, const ConvGeom& g, int64_t r0, int64_t r1, T* col) {
  const int64_t K = g.k();
  auto generic = [&](const Pixel& p, T* dst) {
    for_window(
        g, p, [&](int64_t ko, int64_t xo, int64_t n) { copy_run(dst + ko, x + xo, n); },
        [&](int64_t ko, int64_t n) { std::fill(dst + ko, dst + ko + n, T{}); });
  };
  Pixel p(g, r0);
  if (g.dh != 1 || g.dw != 1) {
    for (int64_t r = r0; r < r1; ++r, p.next(g)) generic(p, col + (r - r0) * K);
    return;
  }
  const int64_t C = g.c, run = g.kw * C;
  for (int64_t r = r0; r < r1;) {
    // Pixels r .. r + len of one output row (n, y).
    const int64_t len = std::min(r1 - r, g.ow - p.x);
    T* row0 = col + (r - r0) * K;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t iy = p.y * g.sh - g.ph + i;
      T* dst = row0 + i * run;
      if (iy < 0 || iy >= g.h) {
        for (int64_t j = 0; j < len; ++j, dst += K) std::fill(dst, dst + run, T{});
        continue;
      }
      const T* src_row = x + (p.n * g.h + iy) * g.w * C;
      for (int64_t j = 0; j < len; ++j, dst += K) {
        const int64_t x0 = (p.x + j) * g.sw - g.pw;
        if (x0 >= 0 && x0 + g.kw <= g.w) {
          copy_run(dst, src_row + x0 * C, run);
        } else {
          for (int64_t t = 0; t < g.kw; ++t) {
            const int64_t ix = x0 + t;
            if (ix < 0 || ix >= g.w)
              std::fill(dst + t * C, dst + (t + 1) * C, T{});
            else
              copy_run(dst + t * C, src_row + ix * C, C);
          }
        }
      }
    }
    for (int64_t j = 0; j < len; ++j) p.next(g);
    r += len;
  }
}

// dst[0, n) += src[0, n) in 64-byte steps the compiler turns into vector adds (a 3x3 window's
// run over 16 channels is 3 of them).
template <typename T>
void add_run(T* __restrict dst, const T* __restrict src, int64_t n) {
  constexpr int64_t kChunk = 64 / int64_t(sizeof(T));
  for (; n >= kChunk; n -= kChunk, dst += kChunk, src += kChunk)
    for (int64_t e = 0; e < kChunk; ++e) dst[e] += src[e];
  for (int64_t e = 0; e < n; ++e) dst[e] += src[e];
}

// dx[window of pixel r] += col[r - r0, :], for r in [r0, r1), in order (each dx element takes
// its terms in pixel order).
template <typename T>
void col2im_add(const T* col, const ConvGeom& g, int64_t r0, int64_t r1, T* dx) {
  using V = vector_block::V<T>;
  using vector_block::load;
  using vector_block::store;
  constexpr int64_t kLanes = vector_block::kLanes<T>;
  const int64_t K = g.k();
  Pixel p(g, r0);
  if (g.dh != 1 || g.dw != 1 || g.sw != 1 || g.c < kLanes) {
    for (int64_t r = r0; r < r1; ++r, p.next(g)) {
      const T* src = col + (r - r0) * K;
      for_window(
          g, p, [&](int64_t ko, int64_t xo, int64_t n) { add_run(dx + xo, src + ko, n); },
          [](int64_t, int64_t) {});
    }
    return;
  }
  // Undilated, horizontally unstrided, at least a vector of channels: the pixels [xb, xe) of
  // one output row, a kernel row at a time, each block of channels of the input row summing its
  // (up to kw) terms in a register before one store. The terms come in pixel order (x up, so
  // tap j down), as above. The read-modify-writes of neighbouring pixels' overlapping runs cost
  // kiln bench's CNN 10% of its conv2 input gradient.
  const int64_t C = g.c;
  for (int64_t r = r0; r < r1;) {
    const int64_t xb = p.x, xe = p.x + std::min(r1 - r, g.ow - p.x);
    const T* strip = col + (r - r0) * K;  // pixel xb's row
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t iy = p.y * g.sh - g.ph + i;
      if (iy < 0 || iy >= g.h) continue;
      T* dst = dx + (p.n * g.h + iy) * g.w * C;
      const int64_t lo = std::max<int64_t>(0, xb - g.pw), hi = std::min(g.w, xe - g.pw + g.kw - 1);
      for (int64_t ix = lo; ix < hi; ++ix) {
        // Taps j with pixel x = ix + pw - j in [xb, xe), from the highest j.
        const int64_t j_hi = std::min(g.kw - 1, ix + g.pw - xb);
        const int64_t j_lo = std::max<int64_t>(0, ix + g.pw - (xe - 1));
        T* d = dst + ix * C;
        int64_t c0 = 0;
        for (; c0 + kLanes <= C; c0 += kLanes) {
          V acc = load<true>(d + c0, kLanes);
          for (int64_t j = j_hi; j >= j_lo; --j)
            acc += load<true>(strip + (ix + g.pw - j - xb) * K + (i * g.kw + j) * C + c0, kLanes);
          store<true>(d + c0, acc, kLanes);
        }
        for (int64_t j = j_hi; c0 < C && j >= j_lo; --j) {  // the channels after the blocks
          const T* s = strip + (ix + g.pw - j - xb) * K + (i * g.kw + j) * C;
          for (int64_t c = c0; c < C; ++c) d[c] += s[c];
        }
      }
    }
    for (int64_t x = xb; x < xe; ++x) p.next(g);
    r += xe - xb;
  }
}

// How many fixed parts a filter gradient over `units` (output pixels, or output lines of a
// shallow window) is cut into: enough work in each, the extra partials (of `partial_elem`
// bytes per value) within kMaxPartialBytes.
inline int64_t filter_gradient_parts(const ConvGeom& g, int64_t units, size_t partial_elem) {
  const double flops = 2.0 * double(g.rows()) * double(g.k()) * double(g.o);
  int64_t parts =
      g.shallow()
          ? std::min<int64_t>(kMaxShallowParts, int64_t(flops / double(kMinShallowPartFlops)))
          : std::min<int64_t>(kMaxPartials, int64_t(flops / double(kMinPartialFlops)));
  parts = std::min(
      parts, 1 + kMaxPartialBytes / std::max<int64_t>(1, g.k() * g.o * int64_t(partial_elem)));
  return std::max<int64_t>(1, std::min(parts, units));
}

}  // namespace kiln::runtime::conv_im2col
