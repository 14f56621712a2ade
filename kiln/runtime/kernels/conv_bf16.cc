// bfloat16 2-D convolutions (Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter with bf16
// operands and result): the op table's via-f32 values (each output the float32 sum of the exact
// products of the bf16 operands, rounded to bf16 once, nearest even).
//
// The plan (conv_bf16_plan, conv_bf16.h: by shapes and kernel sets only):
//  - where bf16 products run on pair kernels (gemm_bf16_kernels(): TDPBF16PS, VDPBF16PS or
//    their emulations), every pass is bf16 im2col chunks through runtime::gemm_bf16 (below),
//    so the products reach the bf16 units, except
//     - a pass that the direct kernels take, on the VDPBF16PS sets (not AMX: its A panels are
//       tiles) with an even count of summed channels (forward: c; input gradient: o) or of
//       pixels per output line (filter gradient): the direct kernel on bf16 pairs
//       (conv_direct.h), no im2col matrix nor packed A; on the Zen 4 VM the bf16 CNN's
//       3x3x16x32 convolution ran at 0.3-0.4 of the VDPBF16PS peak as im2col products
//       (docs/benchmarks.md);
//     - a shallow window's forward pass and filter gradient (ConvGeom::shallow: at most
//       kShallowDepth elements per window), which run the direct kernels on widened operands
//       as below: their products (depth k() in the forward pass, k() x o outputs in the filter
//       gradient) fill a fraction of a pair kernel's tile (an AMX tile is 32 x 32 outputs deep
//       in chunks of 32 elements). On Emerald Rapids the bf16 CNN's first layer (3 x 3 x 1) as
//       bf16 im2col products on AMX ran at 10-15 GFLOP/s, a fifth of its profile
//       (`KILN_PROFILE`, docs/benchmarks.md);
//  - on the float32 kernels, a pass that conv.cc runs as a direct kernel (conv_direct.h,
//    conv_shallow.h: no im2col matrix at all) runs that kernel on widened operands (the
//    via-f32 rule of registry.cc: profile events `bf16 widen` / `bf16 round`): on the Zen 3
//    VM the direct kernels beat bf16 im2col chunks by up to 2.3x (docs/benchmarks.md). The
//    other passes (strided input gradients, dilated or short rows, 1x1), im2col in float32 as
//    well, run below on bf16 chunks: half the bytes, no widening pass.
//
// The im2col passes, every product runtime::gemm_bf16 (on the bf16 kernels, or on the float32
// kernels with the operands widened as they are packed):
//  - forward: the im2col matrix of a chunk of output pixels (whole images where an image fits
//    in one) is built in bf16 (half the bytes of float32), multiplied by the HWIO filter into
//    float32 scratch and rounded into y while the chunk is in cache (a 1x1 stride-1
//    convolution: one product of the input itself);
//  - input gradient: dy * W^T per chunk into a float32 im2col matrix, col2im_add into a float32
//    image (an image's chunks in order on one thread, as conv.cc does), rounded per image group;
//  - in a compiled group (conv_bf16_by_images) both hand each chunk's or group's images to the
//    epilogue right after rounding them, where there are several chunks or groups;
//  - filter gradient: im2col(x)^T * dy accumulated in float32 over fixed parts of the pixels,
//    the parts added in order and rounded once.
// A float32 operand with a bf16 result is a compiled group's fused cast (ir/operand_prologue.h):
// it is rounded to bf16 where a bf16 operand would be read, into the scratch the pass would
// widen a bf16 one into (float32_values: one pass, in place of the cast's and the widening's),
// or into a bf16 scratch copy for the im2col passes (bf16_values). The same values as the cast.
//
// These are the im2col algorithms of conv.cc (conv_im2col.h), so on the float32 kernels every
// pass is bitwise the float32 convolution of the widened operands, rounded once. On the pair
// kernels the forward pass is too (the direct kernels keep the im2col product's chains,
// conv_direct.h), and so is an input gradient that both run directly; a gradient that one
// computes directly and the other by im2col sums the same terms in another order
// (tests/runtime/conv_bf16_test.cc holds it to the float32 dot-product bound). Work is cut by
// shapes only: results do not depend on the thread count.
#include <algorithm>
#include <functional>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/kernels/conv_bf16.h"
#include "kiln/runtime/kernels/conv_direct.h"
#include "kiln/runtime/kernels/conv_geom.h"
#include "kiln/runtime/kernels/conv_im2col.h"
#include "kiln/runtime/kernels/conv_partials.h"
#include "kiln/runtime/kernels/conv_shallow.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

using conv_im2col::chunk_rows;
using conv_im2col::col2im_add;
using conv_im2col::filter_gradient_parts;
using conv_im2col::im2col;

void round_rows(const float* src, bfloat16* dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i] = bfloat16::from_float(src[i]);
}

using ImagesFn = std::function<void(int64_t, int64_t)>;

// The forward pass's chunks of output pixels: cache-sized, and where an image fits in one, as
// many whole images as an even split of the images over that many chunks gives (so that a
// chunk's images are done when it is). The row count of a chunk changes no element's chain
// (each is one product row), so neither does this choice.
int64_t forward_chunk_rows(const ConvGeom& g) {
  const int64_t rows = g.rows(), pixels = g.oh * g.ow;
  if (g.pointwise()) return rows;
  const int64_t step = std::min(rows, chunk_rows(g, sizeof(bfloat16)));
  if (step < pixels) return step;
  const int64_t chunks = (g.n + step / pixels - 1) / (step / pixels);
  return (g.n + chunks - 1) / chunks * pixels;
}

// Whether conv_forward_bf16 can hand its images to on_images chunk by chunk: several chunks
// (one chunk is one product that the engine splits over the threads), each of whole images.
bool forward_by_images(const ConvGeom& g) {
  const int64_t step = forward_chunk_rows(g);
  return step < g.rows() && step % (g.oh * g.ow) == 0;
}

// y[rows, O] = im2col(x) * W, rounded; with on_images (forward_by_images), each chunk's images
// are handed to it right after they are rounded, on the thread that computed them.
void conv_forward_bf16(const bfloat16* x, const bfloat16* w, bfloat16* y, const ConvGeom& g,
                       const ImagesFn* on_images = nullptr) {
  const int64_t K = g.k(), O = g.o, rows = g.rows(), pixels = g.oh * g.ow;
  const int64_t step = forward_chunk_rows(g);
  const int64_t chunks = (rows + step - 1) / step;
  KILN_ASSERT(on_images == nullptr || forward_by_images(g),
              "conv2d bf16: image by image where the chunks are not whole images");
  if (chunks == 1) {  // one product, split by the engine, rounded by row blocks
    Scratch col_buf(ScratchSlot::kConvColumns, g.pointwise() ? 0 : size_t(rows * K) * 2);
    Scratch c_buf(ScratchSlot::kBf16Result, size_t(rows * O) * sizeof(float));
    const bfloat16* a = x;
    if (!g.pointwise()) {
      im2col(x, g, 0, rows, col_buf.as<bfloat16>());
      a = col_buf.as<bfloat16>();
    }
    float* c = c_buf.as<float>();
    const std::function<void(int64_t, int64_t)> rounded = [&](int64_t r0, int64_t r1) {
      round_rows(c + r0 * O, y + r0 * O, (r1 - r0) * O);
    };
    return gemm_bf16(false, false, rows, O, K, a, K, w, O, c, O, true, &rounded);
  }
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    Scratch col_buf(ScratchSlot::kConvColumns, g.pointwise() ? 0 : size_t(step * K) * 2);
    Scratch c_buf(ScratchSlot::kBf16Result, size_t(step * O) * sizeof(float));
    float* c = c_buf.as<float>();
    for (int64_t q = c0; q < c1; ++q) {
      const int64_t r0 = q * step, len = std::min(rows, r0 + step) - r0;
      const bfloat16* a = x + r0 * K;  // pointwise: the input rows are the im2col rows
      if (!g.pointwise()) {
        im2col(x, g, r0, r0 + len, col_buf.as<bfloat16>());
        a = col_buf.as<bfloat16>();
      }
      gemm_bf16(false, false, len, O, K, a, K, w, O, c, O, false);
      round_rows(c, y + r0 * O, len * O);
      if (on_images) (*on_images)(r0 / pixels, (r0 + len) / pixels);
    }
  });
}

// The input gradient's grouping (conv.cc's): small images go in groups that fill a chunk (one
// product per group), larger ones chunk by chunk (`step` rows); an image's chunks in order on
// one thread.
struct InputGradientGroups {
  int64_t step, group, count;
  explicit InputGradientGroups(const ConvGeom& g) {
    const int64_t pixels = g.oh * g.ow, rows_per_chunk = chunk_rows(g, sizeof(float));
    step = std::min(pixels, rows_per_chunk);
    group = std::max<int64_t>(1, rows_per_chunk / pixels);
    count = (g.n + group - 1) / group;
  }
};

// Whether conv_backprop_input_bf16 can hand its images to on_images group by group: several
// groups (one group's products are split over the threads by the engine).
bool input_gradient_by_images(const ConvGeom& g) {
  return !g.pointwise() && InputGradientGroups(g).count > 1;
}

// dx = col2im(dy * W^T), in float32 per group of images, rounded per group; with on_images
// (input_gradient_by_images), each group is handed to it right after it is rounded, on the
// thread that computed it.
void conv_backprop_input_bf16(const bfloat16* w, const bfloat16* dy, bfloat16* dx,
                              const ConvGeom& g, const ImagesFn* on_images = nullptr) {
  const int64_t K = g.k(), O = g.o, C = g.c;
  const int64_t pixels = g.oh * g.ow, image_size = g.h * g.w * C;
  KILN_ASSERT(on_images == nullptr || input_gradient_by_images(g),
              "conv2d_backprop_input bf16: image by image with a single group of images");
  if (g.pointwise()) {
    const int64_t rows = g.rows();
    Scratch c_buf(ScratchSlot::kBf16Result, size_t(rows * C) * sizeof(float));
    float* c = c_buf.as<float>();
    const std::function<void(int64_t, int64_t)> rounded = [&](int64_t r0, int64_t r1) {
      round_rows(c + r0 * C, dx + r0 * C, (r1 - r0) * C);
    };
    return gemm_bf16(false, true, rows, C, O, dy, O, w, O, c, C, true, &rounded);
  }
  const InputGradientGroups grouping(g);
  const int64_t step = grouping.step, group = grouping.group, groups = grouping.count;
  const size_t col_bytes = size_t(std::max(step, group * pixels) * K) * sizeof(float);
  const size_t image_bytes = size_t(group * image_size) * sizeof(float);
  // Images [n0, n1) into the float32 image buffer `img` (image n0 at its start), then rounded.
  auto images = [&](int64_t n0, int64_t n1, float* col, float* img, bool split) {
    std::fill(img, img + (n1 - n0) * image_size, 0.0f);
    const int64_t rows = (n1 - n0) * pixels;
    const int64_t chunk = group > 1 ? rows : step;
    for (int64_t p0 = 0; p0 < rows; p0 += chunk) {
      const int64_t r0 = n0 * pixels + p0, len = std::min(chunk, rows - p0);
      gemm_bf16(false, true, len, K, O, dy + r0 * O, O, w, O, col, K, split);
      // Rows counted from image n0, so that the windows land in `img`.
      col2im_add(col, g, p0, p0 + len, img);
    }
    round_rows(img, dx + n0 * image_size, (n1 - n0) * image_size);
    if (on_images) (*on_images)(n0, n1);
  };
  if (groups == 1) {
    Scratch col(ScratchSlot::kConvColumns, col_bytes);
    Scratch img(ScratchSlot::kBf16Result, image_bytes);
    return images(0, g.n, col.as<float>(), img.as<float>(), true);
  }
  const double group_flops = 2.0 * double(group * pixels) * double(K) * double(O);
  const int64_t grain =
      std::max<int64_t>(1, int64_t(double(conv_im2col::kMinPartialFlops) / group_flops));
  parallel_for(groups, grain, [&](int64_t q0, int64_t q1) {
    Scratch col(ScratchSlot::kConvColumns, col_bytes);
    Scratch img(ScratchSlot::kBf16Result, image_bytes);
    for (int64_t q = q0; q < q1; ++q)
      images(q * group, std::min(g.n, (q + 1) * group), col.as<float>(), img.as<float>(), false);
  });
}

// dW[K, O] = sum over pixels of im2col(x)^T dy, in float32 parts added in order, rounded once.
void conv_backprop_filter_bf16(const bfloat16* x, const bfloat16* dy, bfloat16* dw,
                               const ConvGeom& g) {
  const int64_t K = g.k(), O = g.o, rows = g.rows();
  const int64_t parts = filter_gradient_parts(g, rows, sizeof(float));
  const int64_t step = g.pointwise() ? rows : chunk_rows(g, sizeof(bfloat16));
  const size_t col_bytes = g.pointwise() ? 0 : size_t(step * K) * sizeof(bfloat16);
  Scratch sum_buf(ScratchSlot::kConvPartials, size_t(parts * K * O) * sizeof(float));
  float* sums = sum_buf.as<float>();
  // Pixels [r0, r1) into out (accumulating after the first chunk).
  auto range = [&](int64_t r0, int64_t r1, float* out, bool split, bfloat16* col) {
    if (r0 == r1) return std::fill(out, out + K * O, 0.0f);
    for (int64_t c0 = r0; c0 < r1; c0 += step) {
      const int64_t len = std::min(step, r1 - c0);
      const bfloat16* a = x + c0 * K;
      if (!g.pointwise()) {
        im2col(x, g, c0, c0 + len, col);
        a = col;
      }
      gemm_bf16(true, false, K, O, len, a, K, dy + c0 * O, O, out, O, split, nullptr, c0 != r0);
    }
  };
  if (parts == 1) {
    Scratch col(ScratchSlot::kConvColumns, col_bytes);
    range(0, rows, sums, true, col.as<bfloat16>());
  } else {
    const int64_t per_part = (rows + parts - 1) / parts;
    parallel_tasks(parts, [&](int64_t p) {
      Scratch col(ScratchSlot::kConvColumns, col_bytes);
      range(std::min(rows, p * per_part), std::min(rows, (p + 1) * per_part), sums + p * K * O,
            false, col.as<bfloat16>());
    });
    add_partials(sums, sums + K * O, parts, K * O);
  }
  parallel_for(K * O, kElementwiseGrain,
               [&](int64_t e0, int64_t e1) { round_rows(sums + e0, dw + e0, e1 - e0); });
}

// A pass of plan kPairDirect: the direct kernel on bf16 pairs into float32 scratch, rounded
// into `out`: image by image right after each is computed when on_images is given (which then
// sees the image), else in one pass after all of them (the kernel then splits bands, not
// images, over the threads). The same bits either way.
void conv_pairs_direct(OpKind kind, const bfloat16* a, const bfloat16* b, Array& out,
                       const ConvGeom& g, const std::function<void(int64_t, int64_t)>* on_images) {
  Array product = scratch_f32(ScratchSlot::kBf16Result, out.shape);
  const float* f = product.data<float>();
  bfloat16* y = out.data<bfloat16>();
  const int64_t per_image = out.size() / out.shape[0];
  const std::function<void(int64_t, int64_t)> rounded = [&](int64_t n0, int64_t n1) {
    round_rows(f + n0 * per_image, y + n0 * per_image, (n1 - n0) * per_image);
    (*on_images)(n0, n1);
  };
  const ImagesDone* by_images = on_images != nullptr ? &rounded : nullptr;
  if (kind == OpKind::Conv2D)
    direct_conv_forward_pairs(a, b, product.data<float>(), g, by_images);
  else if (kind == OpKind::Conv2DBackpropInput)
    direct_conv_backprop_input_pairs(a, b, product.data<float>(), g, by_images);
  else
    direct_conv_backprop_filter_pairs(a, b, product.data<float>(), g);
  if (on_images == nullptr)
    parallel_for(out.size(), kElementwiseGrain,
                 [&](int64_t e0, int64_t e1) { round_rows(f + e0, y + e0, e1 - e0); });
}

template <OpKind kKind>
ConvGeom geometry(std::span<const Array> in, const Attrs& attrs, const Array& out) {
  if constexpr (kKind == OpKind::Conv2D)
    return conv_geom(in[0].shape, in[1].shape, attrs, "conv2d");
  else if constexpr (kKind == OpKind::Conv2DBackpropInput)
    return conv_geom(out.shape, in[0].shape, attrs, "conv2d_backprop_input");
  else
    return conv_geom(in[0].shape, out.shape, attrs, "conv2d_backprop_filter");
}

// ---- operands: bf16, or float32 of a fused cast (ir/operand_prologue.h), rounded here

// A bf16 result from operands that are each bf16, or float32 that a compiled group's fused cast
// hands over to be rounded to bf16 here (never stored as bf16 in the arena).
bool bf16_convolution(std::span<const Array> in, const Array& out) {
  auto readable = [](const Array& x) { return x.dtype == DType::bf16 || x.dtype == DType::f32; };
  return out.dtype == DType::bf16 && in.size() == 2 && readable(in[0]) && readable(in[1]);
}

// x as bf16 values: itself, or its float32 values rounded (nearest even, as the cast) into the
// calling thread's scratch `slot`.
Array bf16_values(const Array& x, ScratchSlot slot) {
  if (x.dtype == DType::bf16) return x;
  const size_t bytes = size_t(std::max<int64_t>(x.size(), 1)) * sizeof(bfloat16);
  auto scratch = std::make_shared<Scratch>(slot, bytes);
  auto* dst = scratch->as<bfloat16>();
  const float* src = x.data<float>();
  parallel_for(x.size(), kElementwiseGrain,
               [&](int64_t b, int64_t e) { round_rows(src + b, dst + b, e - b); });
  return Array{DType::bf16, x.shape, Storage::borrow(dst, bytes, std::move(scratch))};
}

// x as the float32 values the widened-direct kernels multiply: bf16 widened (exact), or float32
// rounded to bf16 and held as float32; one pass over x either way.
Array float32_values(const Array& x, ScratchSlot slot) {
  if (x.dtype == DType::bf16) return widened_bf16(x, slot);
  Array w = scratch_f32(slot, x.shape);
  const float* src = x.data<float>();
  float* dst = w.data<float>();
  parallel_for(x.size(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = bfloat16::from_float(src[i]).to_float();
  });
  return w;
}

// A shallow window's forward pass or filter gradient under kWidenedDirect (false for any other
// pass): conv_shallow.h's float32 kernels reading the small operands widened (x, w) and the
// large one as it is: the forward pass rounds each output as it stores it (no float32 result
// and no rounding pass over it), the filter gradient loads dy's bf16 values (no widened copy).
bool shallow_widened(OpKind kind, std::span<const Array> in, Array& out, const ConvGeom& g,
                     const std::function<void(int64_t, int64_t)>* on_images) {
  if (!g.shallow() || (kind != OpKind::Conv2D && kind != OpKind::Conv2DBackpropFilter))
    return false;
  const Array x = float32_values(in[0], ScratchSlot::kBf16Input0);
  if (kind == OpKind::Conv2D) {
    const Array w = float32_values(in[1], ScratchSlot::kBf16Input1);
    shallow_conv_forward_rounded(x.data<float>(), w.data<float>(), out.data<bfloat16>(), g,
                                 on_images);
    return true;
  }
  const Array dy = bf16_values(in[1], ScratchSlot::kBf16Input1);
  Array dw = scratch_f32(ScratchSlot::kBf16Result, out.shape);
  shallow_conv_backprop_filter_bf16_dy(x.data<float>(), dy.data<bfloat16>(), dw.data<float>(), g);
  round_rows(dw.data<float>(), out.data<bfloat16>(), out.size());
  return true;
}

// The three kernels: bf16 results by the plan of the file comment (from bf16 operands, or
// float32 ones rounded first: a fused cast), any other dtypes through the float32 table's
// kernel under the via-f32 rule (which passes float32 and float64 through unchanged).
template <OpKind kKind>
void conv_bf16_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  if (!bf16_convolution(in, out)) return run_via_f32_kernel(kKind, in, attrs, out);
  if (out.size() == 0) return;
  if (in[0].size() == 0 || in[1].size() == 0) {
    std::fill_n(out.data<bfloat16>(), out.size(), bfloat16{});
    return;
  }
  const ConvGeom g = geometry<kKind>(in, attrs, out);
  if (conv_bf16_plan(kKind, g) == ConvBf16Plan::kWidenedDirect) {
    if (shallow_widened(kKind, in, out, g, nullptr)) return;
    const Array wide[2] = {float32_values(in[0], ScratchSlot::kBf16Input0),
                           float32_values(in[1], ScratchSlot::kBf16Input1)};
    return run_via_f32_kernel(kKind, wide, attrs, out);
  }
  const Array operands[2] = {bf16_values(in[0], ScratchSlot::kBf16Input0),
                             bf16_values(in[1], ScratchSlot::kBf16Input1)};
  const bfloat16* a = operands[0].data<bfloat16>();
  const bfloat16* b = operands[1].data<bfloat16>();
  if (conv_bf16_plan(kKind, g) == ConvBf16Plan::kPairDirect)
    return conv_pairs_direct(kKind, a, b, out, g, nullptr);
  bfloat16* o = out.data<bfloat16>();
  if constexpr (kKind == OpKind::Conv2D)
    conv_forward_bf16(a, b, o, g);
  else if constexpr (kKind == OpKind::Conv2DBackpropInput)
    conv_backprop_input_bf16(a, b, o, g);
  else
    conv_backprop_filter_bf16(a, b, o, g);
}

}  // namespace

ConvBf16Plan conv_bf16_plan(OpKind kind, const ConvGeom& g) {
  if (gemm_bf16_kernels() != "float32") {
    if (g.shallow() && kind != OpKind::Conv2DBackpropInput) return ConvBf16Plan::kWidenedDirect;
    const bool pairs = kind == OpKind::Conv2D ? direct_conv_forward_pairs_applies(g)
                       : kind == OpKind::Conv2DBackpropInput
                           ? direct_conv_backprop_input_pairs_applies(g)
                           : direct_conv_backprop_filter_pairs_applies(g);
    return pairs ? ConvBf16Plan::kPairDirect : ConvBf16Plan::kIm2colBf16;
  }
  bool direct = false;
  // conv.cc's order of choices: a 1x1 forward pass or input gradient is one GEMM there.
  if (kind == OpKind::Conv2D)
    direct = !g.pointwise() && (g.shallow() || direct_conv_forward_applies(g));
  else if (kind == OpKind::Conv2DBackpropInput)
    direct = !g.pointwise() && direct_conv_backprop_input_applies(g);
  else
    direct = g.shallow() || direct_conv_backprop_filter_applies(g);
  return direct ? ConvBf16Plan::kWidenedDirect : ConvBf16Plan::kIm2colBf16;
}

bool conv_bf16_by_images(OpKind kind, std::span<const Array> in, const Attrs& attrs, Array& out,
                         const std::function<void(int64_t, int64_t)>& on_images) {
  if (kind != OpKind::Conv2D && kind != OpKind::Conv2DBackpropInput) return false;
  if (!bf16_convolution(in, out) || out.size() == 0 || in[0].size() == 0 || in[1].size() == 0)
    return false;
  const ConvGeom g = kind == OpKind::Conv2D ? geometry<OpKind::Conv2D>(in, attrs, out)
                                            : geometry<OpKind::Conv2DBackpropInput>(in, attrs, out);
  const ConvBf16Plan plan = conv_bf16_plan(kind, g);
  if (plan == ConvBf16Plan::kPairDirect) {
    const Array operands[2] = {bf16_values(in[0], ScratchSlot::kBf16Input0),
                               bf16_values(in[1], ScratchSlot::kBf16Input1)};
    conv_pairs_direct(kind, operands[0].data<bfloat16>(), operands[1].data<bfloat16>(), out, g,
                      &on_images);
    return true;
  }
  if (plan == ConvBf16Plan::kIm2colBf16) {
    // The im2col chunks (forward) or image groups (input gradient) hand over their images as
    // they are done, where there are several of them (else the one product is split over the
    // threads, and its epilogue is better run after it, in parallel).
    const bool forward = kind == OpKind::Conv2D;
    if (!(forward ? forward_by_images(g) : input_gradient_by_images(g))) return false;
    const Array operands[2] = {bf16_values(in[0], ScratchSlot::kBf16Input0),
                               bf16_values(in[1], ScratchSlot::kBf16Input1)};
    const bfloat16* a = operands[0].data<bfloat16>();
    const bfloat16* b = operands[1].data<bfloat16>();
    if (forward)
      conv_forward_bf16(a, b, out.data<bfloat16>(), g, &on_images);
    else
      conv_backprop_input_bf16(a, b, out.data<bfloat16>(), g, &on_images);
    return true;
  }
  if (shallow_widened(kind, in, out, g, &on_images)) return true;
  // The via-f32 rule of conv_bf16_kernel, with the rounding moved into the image loop: the
  // same float32 kernel on the same widened operands, each image rounded once (the same bits).
  const Array wide[2] = {float32_values(in[0], ScratchSlot::kBf16Input0),
                         float32_values(in[1], ScratchSlot::kBf16Input1)};
  Array product = scratch_f32(ScratchSlot::kBf16Result, out.shape);
  const int64_t per_image = out.size() / out.shape[0];
  const float* f = product.data<float>();
  bfloat16* y = out.data<bfloat16>();
  return conv_by_images(kind, wide, attrs, product, [&](int64_t n0, int64_t n1) {
    round_rows(f + n0 * per_image, y + n0 * per_image, (n1 - n0) * per_image);
    on_images(n0, n1);
  });
}

void register_conv_bf16_kernels(KernelTable& t) {
  t[size_t(OpKind::Conv2D)] = conv_bf16_kernel<OpKind::Conv2D>;
  t[size_t(OpKind::Conv2DBackpropInput)] = conv_bf16_kernel<OpKind::Conv2DBackpropInput>;
  t[size_t(OpKind::Conv2DBackpropFilter)] = conv_bf16_kernel<OpKind::Conv2DBackpropFilter>;
}

}  // namespace kiln::runtime
