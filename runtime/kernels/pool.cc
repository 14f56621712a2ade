// Eager 2-D pooling kernels on NHWC tensors, TensorFlow semantics: MaxPool2D, AvgPool2D,
// MaxPool2DGrad and AvgPool2DGrad. Padded positions are never read: max ignores them and
// average divides by the number of valid elements of each window. MaxPool2DGrad sends each
// output gradient to the first maximum of its window (row-major order); a NaN counts as the
// maximum (the forward pass propagates it). Loops run over channels innermost (vectorised).
// Forward passes run output rows in parallel; gradients run images in parallel and scatter
// within an image in a fixed order, so results do not depend on the thread count.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "ir/shape_rules.h"
#include "runtime/kernels/register.h"
#include "runtime/threading.h"

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

template <typename T>
void max_pool_grad(const T* in, const T* dy, T* dx, const PoolGeom& g) {
  const int64_t C = g.c, image = g.h * g.w * C;
  for_images(g, [&](int64_t n) {
    const T* img = in + n * image;
    T* dimg = dx + n * image;
    std::fill_n(dimg, image, T(0));
    std::vector<T> best(static_cast<size_t>(C));
    std::vector<int64_t> where(
        static_cast<size_t>(C));  // flat element index of the maximum in the image
    for (int64_t y = 0; y < g.oh; ++y)
      for (int64_t x = 0; x < g.ow; ++x) {
        int64_t y0, y1, x0, x1;
        g.window(y, x, y0, y1, x0, x1);
        const int64_t first = (y0 * g.w + x0) * C;
        for (int64_t c = 0; c < C; ++c) {
          best[c] = img[first + c];
          where[c] = first + c;
        }
        for (int64_t iy = y0; iy < y1; ++iy)
          for (int64_t ix = (iy == y0 ? x0 + 1 : x0); ix < x1; ++ix) {
            const int64_t base = (iy * g.w + ix) * C;
            for (int64_t c = 0; c < C; ++c) {
              const bool take = takes_max(img[base + c], best[c]);
              best[c] = take ? img[base + c] : best[c];
              where[c] = take ? base + c : where[c];
            }
          }
        const T* g_out = dy + ((n * g.oh + y) * g.ow + x) * C;
        for (int64_t c = 0; c < C; ++c) dimg[where[c]] += g_out[c];
      }
  });
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

template <typename F>
void visit_float(DType t, const char* op, F&& fn) {
  if (t == DType::f32) return fn(TypeTag<float>{});
  if (t == DType::f64) return fn(TypeTag<double>{});
  throw Error(fmt::format("{}: only float32 and float64 are supported, got {}", op, dtype_name(t)));
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
