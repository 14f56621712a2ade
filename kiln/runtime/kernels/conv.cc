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
#include "kiln/runtime/kernels/conv_bf16.h"
#include "kiln/runtime/kernels/conv_direct.h"
#include "kiln/runtime/kernels/conv_geom.h"
#include "kiln/runtime/kernels/conv_im2col.h"
#include "kiln/runtime/kernels/conv_partials.h"
#include "kiln/runtime/kernels/conv_shallow.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/kernels/vector_block.h"
#include "kiln/runtime/kernels/visit_float.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

using namespace conv_im2col;

// ---------------------------------------------------------------- forward

// A shallow window's forward pass in parallel: by lines, or by whole images each handed to
// on_images (when set) right after it.
template <typename T, typename Y>
void shallow_forward(const T* x, const T* w, Y* y, const ConvGeom& g,
                     const std::function<void(int64_t, int64_t)>* on_images) {
  const double line_flops = 2.0 * double(g.ow * g.k() * g.o);
  if (on_images == nullptr) {
    const int64_t grain = std::max<int64_t>(1, int64_t(double(kMinShallowPartFlops) / line_flops));
    return parallel_for(g.n * g.oh, grain, [&](int64_t l0, int64_t l1) {
      shallow_conv_forward<T, Y>(x, w, y, g, l0, l1);
    });
  }
  const double image_flops = line_flops * double(g.oh);
  const int64_t grain = std::max<int64_t>(1, int64_t(double(kMinShallowPartFlops) / image_flops));
  parallel_for(g.n, grain, [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      shallow_conv_forward<T, Y>(x, w, y, g, n * g.oh, (n + 1) * g.oh);
      (*on_images)(n, n + 1);
    }
  });
}

template <typename T>
void conv_forward(const T* x, const T* w, T* y, const ConvGeom& g) {
  const int64_t K = g.k(), O = g.o, rows = g.rows();
  if (g.pointwise()) return gemm<T>(false, false, rows, O, K, x, K, w, O, y, O);
  if (g.shallow()) return shallow_forward<T, T>(x, w, y, g, nullptr);
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
  const int64_t rows_per_chunk = chunk_rows(g, sizeof(T));
  const int64_t step = std::min(pixels, rows_per_chunk);
  // Small images go in groups that fill a chunk: one GEMM of a group's rows (the 14x14 images of
  // kiln bench's CNN: 4 images, 784 rows) runs nearer the engine's peak than one per image
  // (196 rows; 0.66 -> 0.7x of the peak) and packs W^T once per group.
  const int64_t group = std::max<int64_t>(1, rows_per_chunk / pixels);
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
// order), and the partials are added in range order. DY: T, or bfloat16 for a shallow window's
// float32 pass (dy widened as the kernel loads it).
template <typename T, typename DY = T>
void conv_backprop_filter(const T* x, const DY* dy, T* dw, const ConvGeom& g) {
  constexpr bool kSameTypes = std::is_same_v<T, DY>;
  KILN_ASSERT(kSameTypes || g.shallow(), "conv_backprop_filter: bf16 dy for a shallow window only");
  if constexpr (std::is_same_v<T, float> && kSameTypes)
    if (direct_conv_backprop_filter_applies(g)) return direct_conv_backprop_filter(x, dy, dw, g);
  const int64_t K = g.k(), O = g.o, rows = g.rows();
  const int64_t units = g.shallow() ? g.n * g.oh : rows;
  const int64_t parts = filter_gradient_parts(g, units, sizeof(T));
  const int64_t step = g.pointwise() || g.shallow() ? rows : chunk_rows(g, sizeof(T));

  // Units [r0, r1) into out (accumulating after the first chunk); `split` lets gemm use the
  // arena.
  auto range = [&](int64_t r0, int64_t r1, T* out, bool split, T* col) {
    if (g.shallow()) return shallow_conv_filter_gradient<T, DY>(x, dy, out, g, r0, r1, false);
    if (r0 == r1) return std::fill(out, out + K * O, T(0));
    if constexpr (kSameTypes) {
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
  if (out.dtype == DType::bf16) return conv_bf16_by_images(kind, in, attrs, out, on_images);
  if (out.dtype != DType::f32 || out.size() == 0 || in[0].size() == 0 || in[1].size() == 0)
    return false;
  if (kind == OpKind::Conv2D) {
    const ConvGeom g = conv_geom(in[0].shape, in[1].shape, attrs, "conv2d");
    const float *x = in[0].data<float>(), *w = in[1].data<float>();
    float* y = out.data<float>();
    if (g.shallow()) {
      shallow_forward<float, float>(x, w, y, g, &on_images);
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

void shallow_conv_forward_rounded(const float* x, const float* w, bfloat16* y, const ConvGeom& g,
                                  const std::function<void(int64_t, int64_t)>* on_images) {
  shallow_forward<float, bfloat16>(x, w, y, g, on_images);
}

void shallow_conv_backprop_filter_bf16_dy(const float* x, const bfloat16* dy, float* dw,
                                          const ConvGeom& g) {
  if (!g.shallow())
    throw Error("shallow_conv_backprop_filter_bf16_dy: the window is not shallow (a kernel bug)");
  conv_backprop_filter<float, bfloat16>(x, dy, dw, g);
}

void register_conv_kernels(KernelTable& t) {
  t[size_t(OpKind::Conv2D)] = conv2d_kernel;
  t[size_t(OpKind::Conv2DBackpropInput)] = conv2d_backprop_input_kernel;
  t[size_t(OpKind::Conv2DBackpropFilter)] = conv2d_backprop_filter_kernel;
}

}  // namespace kiln::runtime
