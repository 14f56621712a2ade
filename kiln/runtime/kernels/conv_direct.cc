// Direct float32 convolutions on the GEMM microkernels (contract and scheme: conv_direct.h).
#include "kiln/runtime/kernels/conv_direct.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/kernels/conv_partials.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

using gemm_detail::APanels;
using gemm_detail::KBlocks;
using gemm_detail::MicroKernel;
using gemm_detail::MicroKernels;
using gemm_detail::MicroTile;

// The padded input rows of a band stay near L1 / L2 (the CNN's 14x14x16 images: one band of
// 16 KB per image).
constexpr int64_t kBandBytes = int64_t{96} << 10;
// Bands of at least this many flops per task.
constexpr double kMinTaskFlops = double(int64_t{1} << 19);
// Filter-gradient partial sums: at most this many, each of at least kMinPartFlops (the im2col
// path's numbers, conv.cc).
constexpr int64_t kMaxFilterParts = 8;
// A filter gradient's bands hold at least this many pixels (its tiles' k): each band is added
// into all of dW, which for a 3x3x512x512 filter is 9.4 MB.
constexpr int64_t kFilterBandPixels = 256;
constexpr double kMinPartFlops = double(int64_t{1} << 21);

// One direct convolution: the input read (x, or dy for an input gradient), its window and
// filter matrix b (K x o, K = kh * kw * c, rows in (kh, kw, c) order), the output's lines.
struct Direct {
  int64_t n, h, w, c;  // input NHWC
  int64_t kh, kw, o;   // window; o: output channels (b's columns)
  int64_t oh, ow;      // output lines per image, pixels per line
  int64_t sh, sw, dh;  // strides; kernel rows' dilation (columns are undilated)
  int64_t ph, pw;      // padding rows / columns before the input (may be negative)
  const float* b;
  // bf16 operands on a pair kernel set: every 32-bit unit above is a pair of consecutive
  // channels (c counts pairs, K pairs of k, b's rows pairs of filter rows), and the band rows
  // are copied with each pair's halves swapped (element k in the upper half, as VDPBF16PS
  // adds it first: gemm_microkernel.h's kDot layout).
  bool pairs = false;

  int64_t k() const { return kh * kw * c; }
  int64_t padded_width() const { return (ow - 1) * sw + kw; }  // pixels of a buffer row
  int64_t band_rows(int64_t lines) const { return (lines - 1) * sh + (kh - 1) * dh + 1; }
};

// The tile shape for output lines of `line` pixels, from kernel set `mk` whose blocking chose
// `chosen`: tiles never cross a line, so each line splits into ceil(line / mr) tiles of
// near-equal height (APanels). Of the shapes as wide as the chosen one (the same nr, so the
// channels tile as before), the one that covers a line in the fewest tiles; a tie keeps the
// chosen shape. Taller tiles read each B row for more FMAs and keep more chains in flight: a
// 14-pixel line as one 14-row tile instead of two of 7 (the shapes of a set all fit its
// registers). Every shape computes the same chains (gemm_microkernel.h), so the bits do not
// depend on the choice.
const MicroKernel* line_shape(const MicroKernels& mk, const MicroKernel* chosen, int64_t line) {
  const MicroKernel* best = chosen;
  auto tiles = [&](const MicroKernel* s) { return (line + s->mr - 1) / s->mr; };
  for (int32_t i = 0; i < mk.shape_count; ++i) {
    const MicroKernel* s = &mk.shapes[i];
    if (s->nr == chosen->nr && tiles(s) < tiles(best)) best = s;
  }
  return best;
}

// The microkernel tile shape, k blocking and prefetch distance a convolution runs with: the
// engine's blocking (derived or tuned, runtime/gemm_tuning.h) for the product it computes,
// `rows` x `cols` x `depth` with A read directly; over output lines (the forward pass and the
// input gradient), the shape line_shape picks for them.
struct Tiles {
  const MicroKernel* kernel;
  int64_t kc;
  int32_t b_ahead;
  // `depth` in elements of k (kc comes in the set's steps: pairs on a pair set).
  Tiles(const MicroKernels& mk, int64_t rows, int64_t cols, int64_t depth, bool ta) {
    gemm_detail::GemmShape shape{rows, cols, depth, ta, false};
    shape.a_bf16 = shape.b_bf16 = mk.k_per_step == 2;
    const gemm_detail::GemmParams& p = gemm_detail::gemm_params(mk, shape);
    kernel = &mk.shapes[p.kernel];
    kc = p.kc;
    b_ahead = p.b_ahead;
  }
  Tiles(const MicroKernels& mk, const Direct& d)
      : Tiles(mk, d.n * d.oh * d.ow, d.o, d.k() * mk.k_per_step, false) {
    kernel = line_shape(mk, kernel, d.ow);
  }
};

// count pairs of bf16 from src to dst with their halves swapped: the pair of memory order
// (element k in the lower half) in the VDPBF16PS layout (k in the upper half).
void copy_swapped_pairs(const float* src, float* dst, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    uint32_t u;
    std::memcpy(&u, src + i, sizeof(u));
    u = std::rotl(u, 16);
    std::memcpy(dst + i, &u, sizeof(u));
  }
}

// Copies the input rows that output lines [l0, l0 + lines) of image `img` read into `buf`
// (band_rows rows of padded_width x c values, `row_ld` values apart: at least padded_width x c),
// zeros where they fall outside the image. T: float (float32 values, or bf16 pairs, whose halves
// are swapped where d.pairs), or uint16_t (bf16 values as they are).
template <class T>
void fill_band(const Direct& d, const T* x, int64_t img, int64_t l0, int64_t lines, T* buf,
               int64_t row_ld) {
  const int64_t wp = d.padded_width();
  // Buffer columns q read input column q - pw: those in [q0, q1) lie inside the image.
  const int64_t q0 = std::clamp<int64_t>(d.pw, 0, wp), q1 = std::clamp<int64_t>(d.w + d.pw, q0, wp);
  for (int64_t r = 0; r < d.band_rows(lines); ++r) {
    T* dst = buf + r * row_ld;
    const int64_t iy = l0 * d.sh - d.ph + r;
    if (iy < 0 || iy >= d.h) {
      std::fill(dst, dst + row_ld, T{0});
      continue;
    }
    std::fill(dst, dst + q0 * d.c, T{0});
    const T* src = x + ((img * d.h + iy) * d.w + (q0 - d.pw)) * d.c;
    if constexpr (std::is_same_v<T, float>) {
      if (d.pairs) {
        copy_swapped_pairs(src, dst + q0 * d.c, (q1 - q0) * d.c);
        std::fill(dst + q1 * d.c, dst + row_ld, T{0});
        continue;
      }
    }
    std::memcpy(dst + q0 * d.c, src, size_t((q1 - q0) * d.c) * sizeof(T));
    std::fill(dst + q1 * d.c, dst + row_ld, T{0});
  }
}

// Output lines [l0, l0 + lines) of image `img` from their band.
void run_band(const Tiles& tiles, const Direct& d, const float* buf, int64_t img, int64_t l0,
              int64_t lines, float* y) {
  const int64_t K = d.k(), wp = d.padded_width(), run = d.kw * d.c;
  const KBlocks kb(K, tiles.kc);
  const MicroKernel& mk = *tiles.kernel;
  const APanels panels(0, d.ow, mk.mr);
  MicroTile t;
  t.b_ahead = tiles.b_ahead;
  t.lda = d.sw * d.c;
  t.ldb = d.o;
  t.ldc = d.o;
  t.seg_len = run;
  t.seg_jump = d.dh * wp * d.c - run;
  for (int64_t l = 0; l < lines; ++l) {
    const float* line = buf + l * d.sh * wp * d.c;
    float* out = y + ((img * d.oh + l0 + l) * d.ow) * d.o;
    for (int64_t q = 0; q < kb.count; ++q) {
      const int64_t k0 = kb.begin(q);
      t.kc = kb.depth(q, K);
      t.accumulate = q > 0;
      t.seg_first = run - k0 % run;
      // The block starts k0 % run floats into kernel row k0 / run of the window.
      const float* window = line + (k0 / run) * d.dh * wp * d.c + k0 % run;
      for (int64_t i = 0; i < panels.count; ++i) {
        const int64_t x0 = panels.start(i);
        t.rows = int32_t(panels.height(i));
        t.a = window + x0 * d.sw * d.c;
        for (int64_t j = 0; j < d.o; j += mk.nr) {
          t.cols = int32_t(std::min<int64_t>(mk.nr, d.o - j));
          t.b = d.b + k0 * d.o + j;
          t.c = out + x0 * d.o + j;
          mk.tile(t);
        }
      }
    }
  }
}

// Output lines cut into bands of whole lines of one image (band_lines each, the last one of an
// image shorter), whose padded rows fit kBandBytes.
struct Bands {
  int64_t lines, per_image, buf_floats;
  // `min_pixels`: at least this many output pixels per band where the image has them (a
  // filter gradient adds each band into all of dW: its bands must be deep enough to pay).
  // `max_lines`: at most this many lines per band (so that a small batch still has bands for
  // every part of a filter gradient).
  explicit Bands(const Direct& d, int64_t min_pixels = 1, int64_t max_lines = 0) {
    const int64_t line_bytes = d.sh * d.padded_width() * d.c * int64_t(sizeof(float));
    lines = std::max(kBandBytes / std::max<int64_t>(1, line_bytes),
                     gemm_detail::ceil_div(min_pixels, d.ow));
    if (max_lines > 0) lines = std::min(lines, max_lines);
    lines = std::clamp<int64_t>(lines, 1, d.oh);
    per_image = gemm_detail::ceil_div(d.oh, lines);
    buf_floats = d.band_rows(lines) * d.padded_width() * d.c;
  }
  // Unit u: image u / per_image, lines [l0, l0 + count).
  int64_t image(int64_t u) const { return u / per_image; }
  int64_t first_line(int64_t u) const { return (u % per_image) * lines; }
  int64_t count(const Direct& d, int64_t u) const { return std::min(lines, d.oh - first_line(u)); }
};

// Every output line of every image, bands in parallel; with on_images, whole images per task,
// each handed to on_images once all its bands are done.
void run_direct(const MicroKernels& mk, const Direct& d, const float* x, float* y,
                const ImagesDone* on_images) {
  const Tiles tiles(mk, d);
  const Bands bands(d);
  const double band_flops = 2.0 * double(bands.lines * d.ow) * double(d.k()) * double(d.o);
  const size_t buf_bytes = size_t(bands.buf_floats) * sizeof(float);
  auto unit = [&](int64_t u, float* buf) {
    const int64_t img = bands.image(u), l0 = bands.first_line(u), lines = bands.count(d, u);
    fill_band(d, x, img, l0, lines, buf, d.padded_width() * d.c);
    run_band(tiles, d, buf, img, l0, lines, y);
  };
  if (on_images != nullptr) {
    const double image_flops = band_flops * double(bands.per_image);
    const int64_t grain = std::max<int64_t>(1, int64_t(kMinTaskFlops / image_flops));
    return parallel_for(d.n, grain, [&](int64_t n0, int64_t n1) {
      Scratch buf(ScratchSlot::kConvColumns, buf_bytes);
      for (int64_t img = n0; img < n1; ++img) {
        for (int64_t b = 0; b < bands.per_image; ++b)
          unit(img * bands.per_image + b, buf.as<float>());
        (*on_images)(img, img + 1);
      }
    });
  }
  const int64_t grain = std::max<int64_t>(1, int64_t(kMinTaskFlops / band_flops));
  parallel_for(d.n * bands.per_image, grain, [&](int64_t u0, int64_t u1) {
    Scratch buf(ScratchSlot::kConvColumns, buf_bytes);
    for (int64_t u = u0; u < u1; ++u) unit(u, buf.as<float>());
  });
}

// The filter gradient of output lines [l0, l0 + lines) of image `img` from their band:
// out[K, o] (+)= window^T dy. Tile rows are taps of one kernel row, (kw, c) entries that are
// consecutive in every window; a tile's k steps are the band's pixels, a run per line.
void filter_band(const Tiles& tiles, const Direct& d, const float* buf, const float* dy,
                 int64_t img, int64_t l0, int64_t lines, float* out, bool accumulate) {
  const MicroKernel& mk = *tiles.kernel;
  const int64_t wp = d.padded_width(), run = d.kw * d.c;
  const APanels panels(0, run, mk.mr);
  MicroTile t;
  t.b_ahead = tiles.b_ahead;
  t.kc = lines * d.ow;
  t.lda_t = d.sw * d.c;
  t.ldb = d.o;
  t.ldc = d.o;
  t.seg_len = d.ow;
  t.seg_first = d.ow;
  t.seg_jump = d.sh * wp * d.c - d.ow * d.sw * d.c;
  t.accumulate = accumulate;
  const float* dy_band = dy + (img * d.oh + l0) * d.ow * d.o;
  for (int64_t ky = 0; ky < d.kh; ++ky)
    for (int64_t i = 0; i < panels.count; ++i) {
      const int64_t tap = ky * run + panels.start(i);  // first row of dW in the tile
      t.rows = int32_t(panels.height(i));
      t.a = buf + ky * d.dh * wp * d.c + panels.start(i);
      for (int64_t j = 0; j < d.o; j += mk.nr) {
        t.cols = int32_t(std::min<int64_t>(mk.nr, d.o - j));
        t.b = dy_band + j;
        t.c = out + tap * d.o + j;
        mk.tile(t);
      }
    }
}

bool direct_applies(const MicroKernels* mk, const ConvGeom& g, int64_t line_pixels) {
  if (mk == nullptr || g.dw != 1 || g.pointwise() || g.shallow()) return false;
  return 2 * line_pixels >= Tiles(*mk, g.rows(), g.o, g.kh * g.kw * g.c, false).kernel->mr;
}

// The pair kernel set a bf16 pass runs directly on: VDPBF16PS's layout (an AMX set's A panels
// are tiles, not rows read in place), with an even channel count `channels` (so that no pair
// straddles two pixels).
const MicroKernels* pair_set(int64_t channels) {
  const MicroKernels* mk = gemm_detail::active_bf16_microkernels();
  if (mk == nullptr || mk->pair_layout != gemm_detail::PairLayout::kDot || channels % 2 != 0)
    return nullptr;
  return mk;
}

// The profile event of a direct pass over output lines: the set, its tile shape, the tiles of
// a line and the k blocks (in pairs on a pair set).
struct DirectEvent {
  ProfileScope scope;
  DirectEvent(const char* pass, const MicroKernels& mk, const Direct& d)
      : scope(pass, "conv",
              2.0 * double(d.n * d.oh * d.ow) * double(d.k() * mk.k_per_step) * double(d.o)) {
    if (!scope.recording()) return;
    const Tiles tiles(mk, d);
    const int64_t per_line = gemm_detail::ceil_div(d.ow, tiles.kernel->mr);
    scope.set_detail(fmt::format("{} {}{}, {} tile{} per {}-pixel line, kc {}{}", mk.isa,
                                 tiles.kernel->name, d.pairs ? " on bf16 pairs" : "", per_line,
                                 per_line == 1 ? "" : "s", d.ow, tiles.kc,
                                 d.pairs ? " pairs" : ""));
  }
};

}  // namespace

bool direct_conv_forward_applies(const ConvGeom& g) {
  return direct_applies(gemm_detail::active_microkernels(), g, g.ow);
}

bool direct_conv_backprop_filter_applies(const ConvGeom& g) {
  const MicroKernels* mk = gemm_detail::active_microkernels();
  if (mk == nullptr || g.dw != 1 || g.pointwise() || g.shallow()) return false;
  return 2 * g.kw * g.c >= Tiles(*mk, g.kh * g.kw * g.c, g.o, g.rows(), true).kernel->mr;
}

bool direct_conv_backprop_input_applies(const ConvGeom& g) {
  return g.sh == 1 && g.sw == 1 && direct_applies(gemm_detail::active_microkernels(), g, g.w);
}

bool direct_conv_forward_pairs_applies(const ConvGeom& g) {
  return direct_applies(pair_set(g.c), g, g.ow);
}

bool direct_conv_backprop_input_pairs_applies(const ConvGeom& g) {
  return g.sh == 1 && g.sw == 1 && direct_applies(pair_set(g.o), g, g.w);
}

void direct_conv_forward(const float* x, const float* w, float* y, const ConvGeom& g,
                         const ImagesDone* on_images) {
  const Direct d{g.n, g.h, g.w, g.c, g.kh, g.kw, g.o, g.oh, g.ow, g.sh, g.sw, g.dh, g.ph, g.pw, w};
  const MicroKernels& mk = *gemm_detail::active_microkernels();
  DirectEvent event("conv2d direct", mk, d);
  run_direct(mk, d, x, y, on_images);
}

void direct_conv_forward_pairs(const bfloat16* x, const bfloat16* w, float* y, const ConvGeom& g,
                               const ImagesDone* on_images) {
  const MicroKernels* mk = pair_set(g.c);
  if (mk == nullptr || !direct_conv_forward_pairs_applies(g))
    throw Error("direct_conv_forward_pairs: not a direct bf16 convolution on VDPBF16PS pairs");
  // The filter's K x O matrix as K / 2 rows of pairs (rows 2q and 2q + 1), K even as c is.
  const int64_t K = g.k(), O = g.o;
  Scratch filter_buf(ScratchSlot::kConvFilter, size_t(K / 2 * O) * sizeof(float));
  gemm_detail::pair_interleave_avx2(reinterpret_cast<const uint16_t*>(w), O, O, K,
                                    filter_buf.as<float>(), O, true);
  const Direct d{g.n,  g.h,  g.w,  g.c / 2, g.kh,
                 g.kw, g.o,  g.oh, g.ow,    g.sh,
                 g.sw, g.dh, g.ph, g.pw,    filter_buf.as<float>(),
                 true};
  DirectEvent event("conv2d direct bf16", *mk, d);
  run_direct(*mk, d, reinterpret_cast<const float*>(x), y, on_images);
}

namespace {

// The filter turned by 180 degrees, in/out channels swapped, for an input gradient computed
// as a forward convolution of dy: turned[(i, j, u), c] = w[kh-1-i, kw-1-j, c, u] over w's
// `units` per (c) row (o floats, or o / 2 bf16 pairs: `swap` then puts each pair's halves in
// the VDPBF16PS layout). Each tap's C x units block transposed with the engine's AVX copy, taps
// in parallel, into a scratch slot (a 3x3x512x512 filter is 9.4 MB: a scalar loop into a fresh
// vector cost more than a third of that input gradient).
struct TurnedFilter {
  Scratch buf;
  TurnedFilter(const MicroKernels& mk, const float* w, const ConvGeom& g, int64_t units, bool swap)
      : buf(ScratchSlot::kConvFilter, size_t(g.kh * g.kw * units * g.c) * sizeof(float)) {
    const int64_t C = g.c, taps = g.kh * g.kw;
    float* turned = buf.as<float>();
    parallel_for(
        taps, std::max<int64_t>(1, kElementwiseGrain / (C * units)), [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t i = t / g.kw, j = t % g.kw;
            const float* src = w + ((g.kh - 1 - i) * g.kw + (g.kw - 1 - j)) * C * units;
            float* dst = turned + t * units * C;
            mk.transpose(src, units, C, units, dst, C);  // dst[u * C + c] = src[c * units + u]
            if (swap) copy_swapped_pairs(dst, dst, units * C);
          }
        });
  }
  // dx[iy, ix] = sum over (i, j, u) of dy[iy - ph' + i * dh, ix - pw' + j] turned[(i, j, u)]:
  // the forward convolution of dy (`units` per pixel) computing dx.
  Direct as_forward(const ConvGeom& g, int64_t units, bool pairs) const {
    return Direct{g.n,
                  g.oh,
                  g.ow,
                  units,
                  g.kh,
                  g.kw,
                  g.c,
                  g.h,
                  g.w,
                  1,
                  1,
                  g.dh,
                  (g.kh - 1) * g.dh - g.ph,
                  (g.kw - 1) - g.pw,
                  buf.as<float>(),
                  pairs};
  }
};

}  // namespace

void direct_conv_backprop_input(const float* w, const float* dy, float* dx, const ConvGeom& g,
                                const ImagesDone* on_images) {
  const MicroKernels& mk = *gemm_detail::active_microkernels();
  const TurnedFilter turned(mk, w, g, g.o, false);
  const Direct d = turned.as_forward(g, g.o, false);
  DirectEvent event("conv2d_backprop_input direct", mk, d);
  run_direct(mk, d, dy, dx, on_images);
}

void direct_conv_backprop_input_pairs(const bfloat16* w, const bfloat16* dy, float* dx,
                                      const ConvGeom& g, const ImagesDone* on_images) {
  const MicroKernels* mk = pair_set(g.o);
  if (mk == nullptr || !direct_conv_backprop_input_pairs_applies(g))
    throw Error(
        "direct_conv_backprop_input_pairs: not a direct bf16 input gradient on VDPBF16PS pairs");
  // Rows of the turned filter in pairs of consecutive output channels o: w[.., c, 2q] and
  // w[.., c, 2q + 1], adjacent in w, are one 32-bit unit.
  const int64_t P = g.o / 2;
  const TurnedFilter turned(*mk, reinterpret_cast<const float*>(w), g, P, true);
  const Direct d = turned.as_forward(g, P, true);
  DirectEvent event("conv2d_backprop_input direct bf16", *mk, d);
  run_direct(*mk, d, reinterpret_cast<const float*>(dy), dx, on_images);
}

}  // namespace kiln::runtime

namespace kiln::runtime {

namespace {

// The filter gradient's bands (deep, but at least kMaxFilterParts of them in all where the
// lines allow: a batch of 2 keeps 4 bands per image) and parts: fixed ranges of bands, each
// summing its own partial in band order; the partials are added in part order, so the bits do
// not depend on the thread count. `band(scratch, img, l0, lines, out, accumulate)` adds one
// band's product into out (K x O floats), from a per-task scratch of `scratch_bytes`.
template <class Band>
void filter_gradient_by_parts(const Direct& d, float* dw, size_t scratch_bytes, const Band& band) {
  const int64_t bands_per_image = gemm_detail::ceil_div(kMaxFilterParts, d.n);
  const Bands bands(d, kFilterBandPixels, std::max<int64_t>(1, d.oh / bands_per_image));
  const int64_t units = d.n * bands.per_image, size = d.k() * d.o;
  const double flops = 2.0 * double(d.n * d.oh * d.ow) * double(d.k()) * double(d.o);
  int64_t parts = std::min<int64_t>(kMaxFilterParts, int64_t(flops / kMinPartFlops));
  parts = std::clamp<int64_t>(parts, 1, units);
  const int64_t per_part = gemm_detail::ceil_div(units, parts);
  parts = gemm_detail::ceil_div(units, per_part);
  Scratch partial_buf(ScratchSlot::kConvPartials, size_t((parts - 1) * size) * sizeof(float));
  float* partials = partial_buf.as<float>();
  const size_t bytes = std::max(scratch_bytes, size_t(bands.buf_floats) * sizeof(float));
  parallel_tasks(parts, [&](int64_t p) {
    Scratch buf(ScratchSlot::kConvColumns, bytes);
    float* out = p == 0 ? dw : partials + (p - 1) * size;
    const int64_t u0 = p * per_part, u1 = std::min(units, u0 + per_part);
    for (int64_t u = u0; u < u1; ++u)
      band(buf.as<float>(), bands.image(u), bands.first_line(u), bands.count(d, u), out, u != u0);
  });
  add_partials(dw, partials, parts, size);
}

// The bands of a bf16 filter gradient on pairs of pixels: the band's rows of the input as bf16
// values (fill_band<uint16_t>: any c), rows of `pairs` PB[u][e] = the pair of the row's element
// e of pixel u (upper half) and of pixel u + sw (lower), and dy's rows interleaved in pairs of
// pixels.
struct PairBand {
  int64_t row_bf16;   // bf16 values per band row: padded_width * c (rounded up to even)
  int64_t row_pairs;  // pairs per PB row: (padded_width - sw) * c
  int64_t rows;       // band rows
  int64_t dy_pairs;   // pairs of dy rows per band (lines * ow / 2)
  explicit PairBand(const Direct& d, int64_t lines)
      : row_bf16((d.padded_width() * d.c + 1) / 2 * 2),
        row_pairs((d.padded_width() - d.sw) * d.c),
        rows(d.band_rows(lines)),
        dy_pairs(lines * d.ow / 2) {}
  size_t bytes(int64_t o) const {
    return size_t(rows * row_bf16) * 2 + size_t(rows * row_pairs + dy_pairs * o) * sizeof(float);
  }
};

}  // namespace

void direct_conv_backprop_filter(const float* x, const float* dy, float* dw, const ConvGeom& g) {
  const Direct d{g.n,  g.h,  g.w,  g.c,  g.kh, g.kw, g.o,    g.oh,
                 g.ow, g.sh, g.sw, g.dh, g.ph, g.pw, nullptr};
  // The product dW = window^T dy: K x O of depth n * oh * ow, A (the windows) read transposed.
  const Tiles tiles(*gemm_detail::active_microkernels(), d.k(), d.o, g.rows(), true);
  filter_gradient_by_parts(
      d, dw, 0,
      [&](float* buf, int64_t img, int64_t l0, int64_t lines, float* out, bool accumulate) {
        fill_band(d, x, img, l0, lines, buf, d.padded_width() * d.c);
        filter_band(tiles, d, buf, dy, img, l0, lines, out, accumulate);
      });
}

bool direct_conv_backprop_filter_pairs_applies(const ConvGeom& g) {
  const MicroKernels* mk = pair_set(g.ow);
  if (mk == nullptr || g.dw != 1 || g.pointwise() || g.shallow()) return false;
  return 2 * g.kw * g.c >= Tiles(*mk, g.kh * g.kw * g.c, g.o, g.rows(), true).kernel->mr;
}

void direct_conv_backprop_filter_pairs(const bfloat16* x, const bfloat16* dy, float* dw,
                                       const ConvGeom& g) {
  const MicroKernels* mk = pair_set(g.ow);
  if (mk == nullptr || !direct_conv_backprop_filter_pairs_applies(g))
    throw Error(
        "direct_conv_backprop_filter_pairs: not a direct bf16 filter gradient on VDPBF16PS pairs");
  // Bands and parts as the float32 kernel's (Direct in float32 values: the same sums).
  const Direct d{g.n,  g.h,  g.w,  g.c,  g.kh, g.kw, g.o,    g.oh,
                 g.ow, g.sh, g.sw, g.dh, g.ph, g.pw, nullptr};
  const Tiles tiles(*mk, d.k(), d.o, g.rows(), true);
  const MicroKernel& kernel = *tiles.kernel;
  const Bands sizing(d, kFilterBandPixels);
  const auto* x_bits = reinterpret_cast<const uint16_t*>(x);
  const auto* dy_bits = reinterpret_cast<const uint16_t*>(dy);
  const int64_t run = d.kw * d.c;
  ProfileScope event("conv2d_backprop_filter direct bf16", "conv",
                     2.0 * double(g.rows()) * double(d.k()) * double(d.o));
  if (event.recording())
    event.set_detail(fmt::format("{} {} on bf16 pairs of pixels", mk->isa, kernel.name));
  auto band = [&](float* scratch, int64_t img, int64_t l0, int64_t lines, float* out,
                  bool accumulate) {
    const PairBand pb(d, lines);
    auto* rows = reinterpret_cast<uint16_t*>(scratch);
    float* pairs = scratch + pb.rows * pb.row_bf16 / 2;
    float* dy_pairs = pairs + pb.rows * pb.row_pairs;
    fill_band(d, x_bits, img, l0, lines, rows, pb.row_bf16);
    const int64_t shift = d.sw * d.c;
    for (int64_t r = 0; r < pb.rows; ++r) {
      const uint16_t* row = rows + r * pb.row_bf16;
      float* dst = pairs + r * pb.row_pairs;
      for (int64_t e = 0; e < pb.row_pairs; ++e)
        dst[e] = std::bit_cast<float>(uint32_t(row[e]) << 16 | row[e + shift]);
    }
    gemm_detail::pair_interleave_avx2(dy_bits + (img * d.oh + l0) * d.ow * d.o, d.o, d.o,
                                      lines * d.ow, dy_pairs, d.o, true);
    // filter_band on the pairs: k steps are pairs of pixels, ow / 2 per line.
    const APanels panels(0, run, kernel.mr);
    MicroTile t;
    t.b_ahead = tiles.b_ahead;
    t.kc = pb.dy_pairs;
    t.lda_t = 2 * d.sw * d.c;
    t.ldb = d.o;
    t.ldc = d.o;
    t.seg_len = d.ow / 2;
    t.seg_first = d.ow / 2;
    t.seg_jump = d.sh * pb.row_pairs - d.ow * d.sw * d.c;
    t.accumulate = accumulate;
    for (int64_t ky = 0; ky < d.kh; ++ky)
      for (int64_t i = 0; i < panels.count; ++i) {
        t.rows = int32_t(panels.height(i));
        t.a = pairs + ky * d.dh * pb.row_pairs + panels.start(i);
        for (int64_t j = 0; j < d.o; j += kernel.nr) {
          t.cols = int32_t(std::min<int64_t>(kernel.nr, d.o - j));
          t.b = dy_pairs + j;
          t.c = out + (ky * run + panels.start(i)) * d.o + j;
          kernel.tile(t);
        }
      }
  };
  const PairBand largest(d, sizing.lines);
  filter_gradient_by_parts(d, dw, largest.bytes(d.o), band);
}

}  // namespace kiln::runtime
