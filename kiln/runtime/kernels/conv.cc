// Eager 2-D convolution kernels (TensorFlow semantics: input NHWC, filter HWIO, "same" padding
// puts the odd pixel after): Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter.
//
// float32 runs the direct convolutions of conv_direct.h on the GEMM microkernels where they
// apply (undilated kernel columns, lines of at least half a tile; the input gradient at stride 1).
// A shallow window (K <= kShallowDepth: a first layer over one or three channels) runs its
// forward pass and filter gradient as the direct kernels of conv_shallow.h. A 1x1 stride-1
// convolution is one GEMM with the input as its matrix. Everything else (float64, dilated
// columns, short lines, strided input gradients) is im2col + runtime::gemm: the im2col matrix of
// a range of output pixels has one row per pixel (n, y, x) and K = KH*KW*C columns ordered
// (kh, kw, c), so the HWIO filter is already its K x O right-hand side.
// Work is cut into chunks whose sizes depend only on the shapes, so results are bitwise equal
// on any number of threads; the filter gradient sums per-chunk partials in chunk order.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/kernels/conv_direct.h"
#include "kiln/runtime/kernels/conv_geom.h"
#include "kiln/runtime/kernels/conv_partials.h"
#include "kiln/runtime/kernels/conv_shallow.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/kernels/vector_block.h"
#include "kiln/runtime/kernels/visit_float.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

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

int64_t chunk_rows(const ConvGeom& g, size_t elem) {
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
void for_window(const ConvGeom& g, const Pixel& p, F&& fn, Z&& zero) {
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
        [&](int64_t ko, int64_t n) { std::fill(dst + ko, dst + ko + n, T(0)); });
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
        for (int64_t j = 0; j < len; ++j, dst += K) std::fill(dst, dst + run, T(0));
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
              std::fill(dst + t * C, dst + (t + 1) * C, T(0));
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

// ---------------------------------------------------------------- forward

template <typename T>
void conv_forward(const T* x, const T* w, T* y, const ConvGeom& g) {
  const int64_t K = g.k(), O = g.o, rows = g.rows();
  if (g.pointwise()) return gemm<T>(false, false, rows, O, K, x, K, w, O, y, O);
  if (g.shallow()) {
    const double line_flops = 2.0 * double(g.ow * K * O);
    const int64_t grain = std::max<int64_t>(1, int64_t(double(kMinShallowPartFlops) / line_flops));
    return parallel_for(g.n * g.oh, grain, [&](int64_t l0, int64_t l1) {
      shallow_conv_forward<T>(x, w, y, g, l0, l1);
    });
  }
  if constexpr (std::is_same_v<T, float>)
    if (direct_conv_forward_applies(g)) return direct_conv_forward(x, w, y, g);
  const int64_t step = chunk_rows(g, sizeof(T));
  const int64_t chunks = (rows + step - 1) / step;
  if (chunks == 1) {
    Scratch col_buf(ScratchSlot::kConvColumns, size_t(rows * K) * sizeof(T));
    T* col = col_buf.as<T>();
    im2col(x, g, 0, rows, col);
    return gemm<T>(false, false, rows, O, K, col, K, w, O, y, O);
  }
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    Scratch col_buf(ScratchSlot::kConvColumns, size_t(step * K) * sizeof(T));
    T* col = col_buf.as<T>();
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * step, r1 = std::min(rows, r0 + step);
      im2col(x, g, r0, r1, col);
      gemm_serial<T>(false, false, r1 - r0, O, K, col, K, w, O, y + r0 * O, O);
    }
  });
}

// ---------------------------------------------------------------- input gradient

// dx = col2im(dy * W^T). Windows of different pixels of one image overlap, so an image's
// chunks run in order on one thread; images (or groups of small ones) run in parallel.
template <typename T>
void conv_backprop_input(const T* w, const T* dy, T* dx, const ConvGeom& g) {
  const int64_t K = g.k(), O = g.o, C = g.c;
  if (g.pointwise()) return gemm<T>(false, true, g.rows(), C, O, dy, O, w, O, dx, C);
  if constexpr (std::is_same_v<T, float>)
    if (direct_conv_backprop_input_applies(g)) return direct_conv_backprop_input(w, dy, dx, g);
  const int64_t pixels = g.oh * g.ow;
  const int64_t step = std::min(pixels, chunk_rows(g, sizeof(T)));
  // Small images go in groups that fill a chunk: one GEMM of a group's rows (the 14x14 images of
  // kiln bench's CNN: 4 images, 784 rows) runs nearer the engine's peak than one per image
  // (196 rows; 0.66 -> 0.7x of the peak) and packs W^T once per group.
  const int64_t group = std::max<int64_t>(1, step / pixels);
  const int64_t groups = (g.n + group - 1) / group;
  const int64_t image_size = g.h * g.w * C;
  // Images [n0, n1), one group or one image (chunk by chunk); `split`: a single task, whose
  // GEMMs use the whole arena.
  auto images = [&](int64_t n0, int64_t n1, T* col, bool split) {
    std::fill(dx + n0 * image_size, dx + n1 * image_size, T(0));
    const int64_t rows = (n1 - n0) * pixels;
    const int64_t chunk = group > 1 ? rows : step;
    for (int64_t p0 = 0; p0 < rows; p0 += chunk) {
      const int64_t r0 = n0 * pixels + p0, len = std::min(chunk, rows - p0);
      if (split)
        gemm<T>(false, true, len, K, O, dy + r0 * O, O, w, O, col, K);
      else
        gemm_serial<T>(false, true, len, K, O, dy + r0 * O, O, w, O, col, K);
      col2im_add(col, g, r0, r0 + len, dx);
    }
  };
  const size_t col_bytes = size_t(std::max(step, group * pixels) * K) * sizeof(T);
  if (groups == 1) {
    Scratch col(ScratchSlot::kConvColumns, col_bytes);
    return images(0, g.n, col.as<T>(), true);
  }
  // Windows of one image overlap, so an image's chunks run in order on one thread.
  const double group_flops = 2.0 * double(group * pixels) * double(K) * double(O);
  const int64_t grain = std::max<int64_t>(1, int64_t(double(kMinPartialFlops) / group_flops));
  parallel_for(groups, grain, [&](int64_t q0, int64_t q1) {
    Scratch col(ScratchSlot::kConvColumns, col_bytes);
    for (int64_t q = q0; q < q1; ++q)
      images(q * group, std::min(g.n, (q + 1) * group), col.as<T>(), false);
  });
}

// ---------------------------------------------------------------- filter gradient

// dW[K, O] = sum over pixels r of col[r, :]^T dy[r, :]. The pixels (for a shallow window: the
// output lines) are cut into `parts` fixed ranges; each accumulates its own partial (in chunk
// order), and the partials are added in range order.
template <typename T>
void conv_backprop_filter(const T* x, const T* dy, T* dw, const ConvGeom& g) {
  if constexpr (std::is_same_v<T, float>)
    if (direct_conv_backprop_filter_applies(g)) return direct_conv_backprop_filter(x, dy, dw, g);
  const int64_t K = g.k(), O = g.o, rows = g.rows();
  const int64_t units = g.shallow() ? g.n * g.oh : rows;
  const double flops = 2.0 * double(rows) * double(K) * double(O);
  int64_t parts =
      g.shallow()
          ? std::min<int64_t>(kMaxShallowParts, int64_t(flops / double(kMinShallowPartFlops)))
          : std::min<int64_t>(kMaxPartials, int64_t(flops / double(kMinPartialFlops)));
  parts = std::min(parts, 1 + kMaxPartialBytes / std::max<int64_t>(1, K * O * int64_t(sizeof(T))));
  parts = std::max<int64_t>(1, std::min(parts, units));
  const int64_t step = g.pointwise() || g.shallow() ? rows : chunk_rows(g, sizeof(T));

  // Units [r0, r1) into out (accumulating after the first chunk); `split` lets gemm use the
  // arena.
  auto range = [&](int64_t r0, int64_t r1, T* out, bool split, T* col) {
    if (g.shallow()) return shallow_conv_filter_gradient<T>(x, dy, out, g, r0, r1, false);
    if (r0 == r1) return std::fill(out, out + K * O, T(0));
    for (int64_t c0 = r0; c0 < r1; c0 += step) {
      const int64_t len = std::min(step, r1 - c0);
      const T* a = x + c0 * K;  // pointwise: the input rows are the im2col rows
      if (!g.pointwise()) {
        im2col(x, g, c0, c0 + len, col);
        a = col;
      }
      const bool acc = c0 != r0;
      if (split)
        gemm<T>(true, false, K, O, len, a, K, dy + c0 * O, O, out, O, acc);
      else
        gemm_serial<T>(true, false, K, O, len, a, K, dy + c0 * O, O, out, O, acc);
    }
  };
  const size_t col_bytes = g.pointwise() || g.shallow() ? 0 : size_t(step * K) * sizeof(T);
  if (parts == 1) {
    Scratch col(ScratchSlot::kConvColumns, col_bytes);
    return range(0, units, dw, true, col.as<T>());
  }
  const int64_t per_part = (units + parts - 1) / parts;
  Scratch partial_buf(ScratchSlot::kConvPartials, size_t((parts - 1) * K * O) * sizeof(T));
  T* partials = partial_buf.as<T>();
  parallel_tasks(parts, [&](int64_t p) {
    Scratch col(ScratchSlot::kConvColumns, col_bytes);
    T* out = p == 0 ? dw : partials + (p - 1) * K * O;
    range(std::min(units, p * per_part), std::min(units, (p + 1) * per_part), out, false,
          col.as<T>());
  });
  add_partials(dw, partials, parts, K * O);
}

// ---------------------------------------------------------------- kernels

void conv2d_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const ConvGeom g = conv_geom(in[0].shape, in[1].shape, attrs, "conv2d");
  if (out.size() == 0) return;
  visit_float(out.dtype, "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (in[0].size() == 0 || in[1].size() == 0) {
      std::fill_n(out.data<T>(), out.size(), T(0));
      return;
    }
    conv_forward(in[0].data<T>(), in[1].data<T>(), out.data<T>(), g);
  });
}

void conv2d_backprop_input_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const ConvGeom g = conv_geom(out.shape, in[0].shape, attrs, "conv2d_backprop_input");
  if (out.size() == 0) return;
  visit_float(out.dtype, "conv2d_backprop_input", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (in[0].size() == 0 || in[1].size() == 0) {
      std::fill_n(out.data<T>(), out.size(), T(0));
      return;
    }
    conv_backprop_input(in[0].data<T>(), in[1].data<T>(), out.data<T>(), g);
  });
}

void conv2d_backprop_filter_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const ConvGeom g = conv_geom(in[0].shape, out.shape, attrs, "conv2d_backprop_filter");
  if (out.size() == 0) return;
  visit_float(out.dtype, "conv2d_backprop_filter", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (in[0].size() == 0 || in[1].size() == 0) {
      std::fill_n(out.data<T>(), out.size(), T(0));
      return;
    }
    conv_backprop_filter(in[0].data<T>(), in[1].data<T>(), out.data<T>(), g);
  });
}

}  // namespace

bool conv_by_images(OpKind kind, std::span<const Array> in, const Attrs& attrs, Array& out,
                    const std::function<void(int64_t, int64_t)>& on_images) {
  if (out.dtype != DType::f32 || out.size() == 0 || in[0].size() == 0 || in[1].size() == 0)
    return false;
  if (kind == OpKind::Conv2D) {
    const ConvGeom g = conv_geom(in[0].shape, in[1].shape, attrs, "conv2d");
    const float *x = in[0].data<float>(), *w = in[1].data<float>();
    float* y = out.data<float>();
    if (g.shallow()) {
      const double image_flops = 2.0 * double(g.oh * g.ow * g.k() * g.o);
      const int64_t grain =
          std::max<int64_t>(1, int64_t(double(kMinShallowPartFlops) / image_flops));
      parallel_for(g.n, grain, [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          shallow_conv_forward<float>(x, w, y, g, n * g.oh, (n + 1) * g.oh);
          on_images(n, n + 1);
        }
      });
      return true;
    }
    if (!direct_conv_forward_applies(g)) return false;
    direct_conv_forward(x, w, y, g, &on_images);
    return true;
  }
  if (kind == OpKind::Conv2DBackpropInput) {
    const ConvGeom g = conv_geom(out.shape, in[0].shape, attrs, "conv2d_backprop_input");
    if (!direct_conv_backprop_input_applies(g)) return false;
    direct_conv_backprop_input(in[0].data<float>(), in[1].data<float>(), out.data<float>(), g,
                               &on_images);
    return true;
  }
  return false;
}

void register_conv_kernels(KernelTable& t) {
  t[size_t(OpKind::Conv2D)] = conv2d_kernel;
  t[size_t(OpKind::Conv2DBackpropInput)] = conv2d_backprop_input_kernel;
  t[size_t(OpKind::Conv2DBackpropFilter)] = conv2d_backprop_filter_kernel;
}

}  // namespace kiln::runtime
