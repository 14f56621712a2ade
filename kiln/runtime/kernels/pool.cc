// Eager 2-D pooling kernels on NHWC tensors, TensorFlow semantics: MaxPool2D, AvgPool2D,
// MaxPool2DGrad and AvgPool2DGrad. Padded positions are never read: max ignores them and
// average divides by the number of valid elements of each window. MaxPool2DGrad sends each
// output gradient to the first maximum of its window (row-major order); a NaN counts as the
// maximum (the forward pass propagates it). Loops run over channels innermost (vectorised).
// Forward passes and the max-pool gradient of non-overlapping windows run output rows in
// parallel; the other gradients run images in parallel and scatter within an image in a
// fixed order, so results do not depend on the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kiln/ir/shape_rules.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/kernels/visit_float.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

struct PoolGeom {
  int64_t n, h, w, c;      // input NHWC
  int64_t kh, kw;          // window
  int64_t oh, ow;          // output spatial size
  int64_t sh, sw, pt, pl;  // strides, padding before (top, left)

  // The window of output (y, x) clipped to the image: rows [y0, y1), columns [x0, x1).
  // Never empty: "same" padding is smaller than the window.
  void window(int64_t y, int64_t x, int64_t& y0, int64_t& y1, int64_t& x0, int64_t& x1) const {
    y0 = y * sh - pt;
    x0 = x * sw - pl;
    y1 = std::min(h, y0 + kh);
    x1 = std::min(w, x0 + kw);
    y0 = std::max<int64_t>(0, y0);
    x0 = std::max<int64_t>(0, x0);
  }
};

PoolGeom pool_geom(const Shape& input, const Attrs& attrs, const char* op) {
  const auto& pool = attrs.get_ints("pool_size", op);
  const auto& st = attrs.get_ints("strides", op);
  const auto& padding = attrs.get_string("padding", op);
  rules::WindowDim hd = rules::window_dim(input[1], pool[0], st[0], 1, padding, op);
  rules::WindowDim wd = rules::window_dim(input[2], pool[1], st[1], 1, padding, op);
  return {input[0], input[1], input[2], input[3], pool[0],       pool[1],
          hd.out,   wd.out,   st[0],    st[1],    hd.pad_before, wd.pad_before};
}

// Output rows (n, y) per parallel chunk for window work of this geometry.
int64_t row_grain(const PoolGeom& g) {
  int64_t per_row = std::max<int64_t>(1, g.ow * g.kh * g.kw * g.c);
  return std::max<int64_t>(1, kElementwiseGrain / per_row);
}

// v replaces the running maximum m: strictly greater, or the first NaN.
template <typename T>
inline bool takes_max(T v, T m) {
  return v > m || (v != v && m == m);
}

template <typename T>
void max_pool(const T* in, T* out, const PoolGeom& g) {
  const int64_t C = g.c;
  parallel_for(g.n * g.oh, row_grain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.oh, y = r % g.oh;
      const T* img = in + n * g.h * g.w * C;
      for (int64_t x = 0; x < g.ow; ++x) {
        T* dst = out + (r * g.ow + x) * C;
        int64_t y0, y1, x0, x1;
        g.window(y, x, y0, y1, x0, x1);
        std::copy_n(img + (y0 * g.w + x0) * C, C, dst);
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = (iy == y0 ? x0 + 1 : x0); ix < x1; ++ix) {
            const T* src = img + (iy * g.w + ix) * C;
            for (int64_t c = 0; c < C; ++c) dst[c] = takes_max(src[c], dst[c]) ? src[c] : dst[c];
          }
      }
    }
  });
}

template <typename T>
void avg_pool(const T* in, T* out, const PoolGeom& g) {
  const int64_t C = g.c;
  parallel_for(g.n * g.oh, row_grain(g), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.oh, y = r % g.oh;
      const T* img = in + n * g.h * g.w * C;
      for (int64_t x = 0; x < g.ow; ++x) {
        T* dst = out + (r * g.ow + x) * C;
        int64_t y0, y1, x0, x1;
        g.window(y, x, y0, y1, x0, x1);
        std::fill_n(dst, C, T(0));
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            const T* src = img + (iy * g.w + ix) * C;
            for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
          }
        const T count = T((y1 - y0) * (x1 - x0));
        for (int64_t c = 0; c < C; ++c) dst[c] /= count;
      }
    }
  });
}

// Runs fn(n) for every image, images in parallel (each image's scatter stays on one thread).
template <typename F>
void for_images(const PoolGeom& g, F&& fn) {
  const int64_t per_image = std::max<int64_t>(1, g.oh * g.ow * g.kh * g.kw * g.c);
  parallel_for(g.n, std::max<int64_t>(1, kElementwiseGrain / per_image),
               [&](int64_t n0, int64_t n1) {
                 for (int64_t n = n0; n < n1; ++n) fn(n);
               });
}

// Channels handled together by the gradient kernels: the window's running maximum and the
// index of its first maximum (0 .. kh*kw-1, row-major in the window) per channel live in
// fixed-size arrays, so the compare / select loops over channels vectorise.
constexpr int64_t kChannelBlock = 64;

// For channels [c0, c0 + cb) of output position (y, x) of image `img`: arg[c] = index in the
// window of the channel's first maximum (takes_max order).
template <typename T>
inline void window_argmax(const T* img, const PoolGeom& g, int64_t y0, int64_t y1, int64_t x0,
                          int64_t x1, int64_t c0, int64_t cb, int32_t* arg) {
  T best[kChannelBlock];
  const T* first = img + (y0 * g.w + x0) * g.c + c0;
  for (int64_t c = 0; c < cb; ++c) {
    best[c] = first[c];
    arg[c] = 0;
  }
  int32_t k = 0;
  for (int64_t iy = y0; iy < y1; ++iy)
    for (int64_t ix = x0; ix < x1; ++ix, ++k) {
      if (k == 0) continue;
      const T* src = img + (iy * g.w + ix) * g.c + c0;
      for (int64_t c = 0; c < cb; ++c) {
        const bool take = takes_max(src[c], best[c]);
        best[c] = take ? src[c] : best[c];
        arg[c] = take ? k : arg[c];
      }
    }
}

// Calls fn(d, k) for each element of the window [y0, y1) x [x0, x1) of gradient image `dimg`:
// d points at its channel c0, k is its index in the window (row-major, as window_argmax's).
template <typename T, typename F>
inline void each_window_element(T* dimg, const PoolGeom& g, int64_t y0, int64_t y1, int64_t x0,
                                int64_t x1, int64_t c0, F&& fn) {
  int32_t k = 0;
  for (int64_t iy = y0; iy < y1; ++iy)
    for (int64_t ix = x0; ix < x1; ++ix, ++k) fn(dimg + (iy * g.w + ix) * g.c + c0, k);
}

// Windows that do not overlap (strides >= window): every input element is in at most one
// window, so output rows run in parallel, each writing the input rows it owns (its window's
// rows and, below them, those no window covers) exactly once: dy + 0 at the maximum (a zero
// gradient is +0, as accumulating into zeros gives), 0 elsewhere.
template <typename T>
void max_pool_grad_disjoint(const T* in, const T* dy, T* dx, const PoolGeom& g) {
  const int64_t C = g.c, image = g.h * g.w * C;
  parallel_for(g.n * g.oh, row_grain(g), [&](int64_t r0, int64_t r1) {
    int32_t arg[kChannelBlock];
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.oh, y = r % g.oh;
      const T* img = in + n * image;
      T* dimg = dx + n * image;
      // Input rows owned by output row y: from its window's first row (0 for the first output
      // row) to the next window's first row (the image's end for the last).
      const int64_t own0 = y == 0 ? 0 : std::clamp<int64_t>(y * g.sh - g.pt, 0, g.h);
      const int64_t own1 = y + 1 == g.oh ? g.h : std::clamp<int64_t>((y + 1) * g.sh - g.pt, 0, g.h);
      std::fill(dimg + own0 * g.w * C, dimg + own1 * g.w * C, T(0));
      for (int64_t x = 0; x < g.ow; ++x) {
        int64_t y0, y1, x0, x1;
        g.window(y, x, y0, y1, x0, x1);
        const T* g_out = dy + (r * g.ow + x) * C;
        for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
          const int64_t cb = std::min(kChannelBlock, C - c0);
          window_argmax(img, g, y0, y1, x0, x1, c0, cb, arg);
          each_window_element(dimg, g, y0, y1, x0, x1, c0, [&](T* d, int32_t k) {
            for (int64_t c = 0; c < cb; ++c) d[c] = arg[c] == k ? g_out[c0 + c] + T(0) : T(0);
          });
        }
      }
    }
  });
}

// Overlapping windows: images in parallel, each image's windows in row-major order adding
// their gradient to their first maximum (a fixed order: results do not depend on threads).
template <typename T>
void max_pool_grad_overlapping(const T* in, const T* dy, T* dx, const PoolGeom& g) {
  const int64_t C = g.c, image = g.h * g.w * C;
  for_images(g, [&](int64_t n) {
    const T* img = in + n * image;
    T* dimg = dx + n * image;
    std::fill_n(dimg, image, T(0));
    int32_t arg[kChannelBlock];
    for (int64_t y = 0; y < g.oh; ++y)
      for (int64_t x = 0; x < g.ow; ++x) {
        int64_t y0, y1, x0, x1;
        g.window(y, x, y0, y1, x0, x1);
        const T* g_out = dy + ((n * g.oh + y) * g.ow + x) * C;
        for (int64_t c0 = 0; c0 < C; c0 += kChannelBlock) {
          const int64_t cb = std::min(kChannelBlock, C - c0);
          window_argmax(img, g, y0, y1, x0, x1, c0, cb, arg);
          // Adding +0 elsewhere leaves every partial sum unchanged (none is -0).
          each_window_element(dimg, g, y0, y1, x0, x1, c0, [&](T* d, int32_t k) {
            for (int64_t c = 0; c < cb; ++c) d[c] += arg[c] == k ? g_out[c0 + c] : T(0);
          });
        }
      }
  });
}

template <typename T>
void max_pool_grad(const T* in, const T* dy, T* dx, const PoolGeom& g) {
  if (g.sh >= g.kh && g.sw >= g.kw)
    max_pool_grad_disjoint(in, dy, dx, g);
  else
    max_pool_grad_overlapping(in, dy, dx, g);
}

template <typename T>
void avg_pool_grad(const T* dy, T* dx, const PoolGeom& g) {
  const int64_t C = g.c, image = g.h * g.w * C;
  for_images(g, [&](int64_t n) {
    T* dimg = dx + n * image;
    std::fill_n(dimg, image, T(0));
    std::vector<T> share(static_cast<size_t>(C));
    for (int64_t y = 0; y < g.oh; ++y)
      for (int64_t x = 0; x < g.ow; ++x) {
        int64_t y0, y1, x0, x1;
        g.window(y, x, y0, y1, x0, x1);
        const T count = T((y1 - y0) * (x1 - x0));
        const T* g_out = dy + ((n * g.oh + y) * g.ow + x) * C;
        for (int64_t c = 0; c < C; ++c) share[c] = g_out[c] / count;
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = x0; ix < x1; ++ix) {
            T* d = dimg + (iy * g.w + ix) * C;
            for (int64_t c = 0; c < C; ++c) d[c] += share[c];
          }
      }
  });
}

void max_pool2d_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const PoolGeom g = pool_geom(in[0].shape, attrs, "max_pool2d");
  if (out.size() == 0) return;
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      throw Error(fmt::format("max_pool2d: bool input {} is not supported; cast it first",
                              in[0].shape.to_string()));
    } else {
      max_pool(in[0].data<T>(), out.data<T>(), g);
    }
  });
}

void avg_pool2d_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const PoolGeom g = pool_geom(in[0].shape, attrs, "avg_pool2d");
  if (out.size() == 0) return;
  visit_float(out.dtype, "avg_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool(in[0].data<T>(), out.data<T>(), g);
  });
}

void max_pool2d_grad_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const PoolGeom g = pool_geom(in[0].shape, attrs, "max_pool2d_grad");
  if (out.size() == 0) return;
  visit_float(out.dtype, "max_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_grad(in[0].data<T>(), in[1].data<T>(), out.data<T>(), g);
  });
}

void avg_pool2d_grad_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const PoolGeom g = pool_geom(out.shape, attrs, "avg_pool2d_grad");
  if (out.size() == 0) return;
  visit_float(out.dtype, "avg_pool2d_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    avg_pool_grad(in[0].data<T>(), out.data<T>(), g);
  });
}

}  // namespace

void register_pool_kernels(KernelTable& t) {
  t[size_t(OpKind::MaxPool2D)] = max_pool2d_kernel;
  t[size_t(OpKind::AvgPool2D)] = avg_pool2d_kernel;
  t[size_t(OpKind::MaxPool2DGrad)] = max_pool2d_grad_kernel;
  t[size_t(OpKind::AvgPool2DGrad)] = avg_pool2d_grad_kernel;
}

}  // namespace kiln::runtime
