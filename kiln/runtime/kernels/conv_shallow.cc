#include "kiln/runtime/kernels/conv_shallow.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/runtime/kernels/vector_block.h"

namespace kiln::runtime {
namespace {

using vector_block::kLanes;
using vector_block::load;
using vector_block::store;
using vector_block::V;

// Values of storage type S as blocks of T (a bf16 S: float32 T, widened as loaded, rounded as
// stored).
template <bool kFull, typename T>
V<T> load_as(const T* p, int64_t n) {
  return load<kFull>(p, n);
}
template <bool kFull>
V<float> load_as(const bfloat16* p, int64_t n) {
  return vector_block::load_widened<kFull>(p, n);
}
template <bool kFull, typename T>
void store_as(T* p, const V<T>& v, int64_t n) {
  store<kFull>(p, v, n);
}
template <bool kFull>
void store_as(bfloat16* p, const V<float>& v, int64_t n) {
  vector_block::store_rounded<kFull>(p, v, n);
}

// Most taps per filter-gradient block: 12 vector registers of accumulators (12 chains cover two
// FMA pipes of 4 to 6 cycles' latency), whatever a block of 16 floats takes in this build's ISA:
// one AVX-512 register (12 taps of its 32), two AVX ones (6 taps of 16), four SSE ones (3 of 16).
// More taps would not fit the register file: their accumulators would live on the stack.
constexpr int kAccumulatorRegisters = 12;
constexpr int kMaxTaps = kAccumulatorRegisters / vector_block::kRegistersPerBlock;
// Pixels per forward block, in the same accumulator registers (12 with AVX-512, 6 with AVX2).
constexpr int kForwardPixels = kAccumulatorRegisters / vector_block::kRegistersPerBlock;
// Lines whose strips are built at once: about this many bytes, so they stay in L1/L2.
constexpr int64_t kStripChunkBytes = int64_t{32} << 10;

// The zero-padded input rows that lines [l0, l1) read, each copied once: a strip holds input
// row iy of an image from column -pw on, `width` pixels of c channels (zeros outside the image).
// Line l's kernel row i reads strip oy*sh - ph + i*dh of its image, row_step floats after the
// line's first strip, so tap (i, j, ch) of pixel ox is at line(l)[tap[t] + ox*sw*c] with
// tap[t] = i*row_step + j*dw*c + ch. Consecutive lines of an image share their strips (a 3x3
// window with unit strides copies each input row once, not three times).
template <typename T>
struct Strips {
  const ConvGeom& g;
  int64_t width;  // padded pixels per strip
  int64_t strip_stride, row_step;
  std::vector<T> data;
  std::vector<int64_t> first;  // line l0 + k's first strip: data offset
  // Tap t = (i*kw + j)*c + ch: its offset from a line's first strip, before the pixel's ox*sw*c.
  std::vector<int64_t> tap;

  explicit Strips(const ConvGeom& geom) : g(geom) {
    width = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    strip_stride = width * g.c;
    row_step = g.dh * strip_stride;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j)
        for (int64_t ch = 0; ch < g.c; ++ch) tap.push_back(i * row_step + j * g.dw * g.c + ch);
  }
  // Lines per chunk: about kStripChunkBytes of their kh strips each, so a chunk's strips stay in
  // L1/L2. (A function of the geometry alone: the filter gradient's partial sums follow it.)
  int64_t lines_per_chunk() const {
    return std::max<int64_t>(1, kStripChunkBytes / (g.kh * strip_stride * int64_t(sizeof(T))));
  }
  void build(const T* x, int64_t l0, int64_t l1) {
    // The lines of each image in [l0, l1) read its input rows [lo, hi) (outside the image: zeros).
    auto rows_of = [&](int64_t oy0, int64_t oy1) {
      return std::pair{oy0 * g.sh - g.ph, (oy1 - 1) * g.sh - g.ph + (g.kh - 1) * g.dh + 1};
    };
    int64_t total = 0;
    for (int64_t a = l0; a < l1;) {
      const int64_t n = a / g.oh, b = std::min(l1, (n + 1) * g.oh);
      const auto [lo, hi] = rows_of(a % g.oh, (b - 1) % g.oh + 1);
      total += hi - lo;
      a = b;
    }
    data.resize(size_t(total * strip_stride));
    first.resize(size_t(l1 - l0));
    T* s = data.data();
    for (int64_t a = l0; a < l1;) {
      const int64_t n = a / g.oh, b = std::min(l1, (n + 1) * g.oh);
      const auto [lo, hi] = rows_of(a % g.oh, (b - 1) % g.oh + 1);
      for (int64_t l = a; l < b; ++l)
        first[size_t(l - l0)] = (s - data.data()) + ((l % g.oh) * g.sh - g.ph - lo) * strip_stride;
      for (int64_t iy = lo; iy < hi; ++iy, s += strip_stride) {
        if (iy < 0 || iy >= g.h) {
          std::fill(s, s + strip_stride, T(0));
          continue;
        }
        // Columns q in [0, width) hold input column q - pw.
        const int64_t q0 = std::min(width, g.pw), q1 = std::clamp(g.w + g.pw, q0, width);
        std::fill(s, s + q0 * g.c, T(0));
        if (q1 > q0)
          std::memcpy(s + q0 * g.c, x + ((n * g.h + iy) * g.w + (q0 - g.pw)) * g.c,
                      size_t((q1 - q0) * g.c) * sizeof(T));
        std::fill(s + q1 * g.c, s + strip_stride, T(0));
      }
      a = b;
    }
  }
  const T* line(int64_t l, int64_t l0) const { return data.data() + first[size_t(l - l0)]; }
};

// P pixels from ox on of one line, a block of channels: P accumulators, each tap's filter
// block loaded once for the P pixels (from L1; holding all of a 3x3 window's would not fit the
// registers). K > 0: K taps known at compile time (the tap loop unrolls), else st.tap.size().
template <typename T, typename Y, int P, int64_t K, bool kFull>
void forward_pixels(const T* strip, const Strips<T>& st, const int64_t* off, const V<T>* w, Y* y,
                    int64_t ox, int64_t cols) {
  const ConvGeom& g = st.g;
  const int64_t taps = K > 0 ? K : int64_t(st.tap.size());
  V<T> acc[P] = {};
  const int64_t step = g.sw * g.c;
  const T* base = strip + ox * step;
#pragma GCC unroll 32
  for (int64_t t = 0; t < taps; ++t) {
    const T* a = base + off[t];
    const V<T> wt = w[t];
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) acc[p].fma(a[p * step], wt);
  }
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) store_as<kFull>(y + (ox + p) * g.o, acc[p], cols);
}

// The last `left` (< P) pixels of a line from ox on, as one block.
template <typename T, typename Y, int P, int64_t K, bool kFull>
void forward_rest(int64_t left, const T* strip, const Strips<T>& st, const int64_t* off,
                  const V<T>* w, Y* y, int64_t ox, int64_t cols) {
  if constexpr (P > 0) {
    if (left == P) return forward_pixels<T, Y, P, K, kFull>(strip, st, off, w, y, ox, cols);
    forward_rest<T, Y, P - 1, K, kFull>(left, strip, st, off, w, y, ox, cols);
  }
}

// One output line, in blocks of kForwardPixels pixels. The same FMA chain per output whatever
// the blocks: its taps in order from zero.
template <typename T, typename Y, int64_t K, bool kFull>
void forward_line_taps(const T* strip, const Strips<T>& st, const V<T>* w, Y* y, int64_t cols) {
  const int64_t ow = st.g.ow;
  const int64_t* off = st.tap.data();
  int64_t ox = 0;
  for (; ox + kForwardPixels <= ow; ox += kForwardPixels)
    forward_pixels<T, Y, kForwardPixels, K, kFull>(strip, st, off, w, y, ox, cols);
  forward_rest<T, Y, kForwardPixels - 1, K, kFull>(ow - ox, strip, st, off, w, y, ox, cols);
}

// A 3x3 window over one or three channels (9 or 27 taps) has its tap count known at compile
// time.
template <typename T, typename Y, bool kFull>
void forward_line(const T* strip, const Strips<T>& st, const V<T>* w, Y* y, int64_t cols) {
  if (st.tap.size() == 9) return forward_line_taps<T, Y, 9, kFull>(strip, st, w, y, cols);
  if (st.tap.size() == 27) return forward_line_taps<T, Y, 27, kFull>(strip, st, w, y, cols);
  forward_line_taps<T, Y, 0, kFull>(strip, st, w, y, cols);
}

// ---------------------------------------------------------------- one-channel rows
// A window over one channel with unit column stride and dilation (c == 1, sw == dw == 1) and a
// kernel row of KW taps (3 or 5, known at compile time): tap (i, j) of pixel ox is value ox + j
// of the line's strip i, so one value of a strip is tap j of up to KW pixels (ox = value - j).
// These kernels broadcast each value once for all of them (the general kernels above load one
// broadcast per FMA, which sets their pace), at addresses known at compile time. Each output's
// chain is unchanged: for a pixel, the values of strip i meet taps j = 0, 1, ... in order, and
// the strips are taken in kernel-row order, so the FMAs run over (i, j) as above; for the filter
// gradient, a tap meets the pixels of a line in order. Same bits as the general kernels.
bool one_channel_rows(const ConvGeom& g) {
  return g.c == 1 && g.sw == 1 && g.dw == 1 && (g.kw == 3 || g.kw == 5);
}

// P pixels of one line from `s` (strip 0 at the block's first pixel), all kernel rows.
template <typename T, typename Y, int P, int KW, bool kFull>
void forward_pixels_rows(const T* s, const Strips<T>& st, const V<T>* w, Y* y, int64_t cols) {
  V<T> acc[P] = {};
  for (int64_t i = 0; i < st.g.kh; ++i, s += st.row_step) {
    V<T> wr[KW];
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) wr[j] = w[i * KW + j];
#pragma GCC unroll 32
    for (int e = 0; e < P + KW - 1; ++e) {
      const T b = s[e];
#pragma GCC unroll 8
      for (int j = 0; j < KW; ++j)
        if (e - j >= 0 && e - j < P) acc[e - j].fma(b, wr[j]);
    }
  }
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) store_as<kFull>(y + p * st.g.o, acc[p], cols);
}

template <typename T, typename Y, int P, int KW, bool kFull>
void forward_rest_rows(int64_t left, const T* s, const Strips<T>& st, const V<T>* w, Y* y,
                       int64_t cols) {
  if constexpr (P > 0) {
    if (left == P) return forward_pixels_rows<T, Y, P, KW, kFull>(s, st, w, y, cols);
    forward_rest_rows<T, Y, P - 1, KW, kFull>(left, s, st, w, y, cols);
  }
}

template <typename T, typename Y, int KW, bool kFull>
void forward_line_rows_kw(const T* strip, const Strips<T>& st, const V<T>* w, Y* y, int64_t cols) {
  const int64_t ow = st.g.ow, o = st.g.o;
  int64_t ox = 0;
  for (; ox + kForwardPixels <= ow; ox += kForwardPixels)
    forward_pixels_rows<T, Y, kForwardPixels, KW, kFull>(strip + ox, st, w, y + ox * o, cols);
  forward_rest_rows<T, Y, kForwardPixels - 1, KW, kFull>(ow - ox, strip + ox, st, w, y + ox * o,
                                                         cols);
}

template <typename T, typename Y, bool kFull>
void forward_line_rows(const T* strip, const Strips<T>& st, const V<T>* w, Y* y, int64_t cols) {
  if (st.g.kw == 3) return forward_line_rows_kw<T, Y, 3, kFull>(strip, st, w, y, cols);
  forward_line_rows_kw<T, Y, 5, kFull>(strip, st, w, y, cols);
}

// Kernel rows [i0, i0 + R) x channels [o0, o0 + cols) of the filter gradient of lines [l0, l1)
// (strips built from sl0), added to dw or stored. Value e of a strip is tap j of pixel e - j:
// the dy blocks of pixels e, e - 1, ..., e - KW + 1 stay in registers (d[j]: pixel e - j).
template <typename T, typename DY, int R, int KW, bool kFull>
void filter_rows(const Strips<T>& st, int64_t l0, int64_t l1, int64_t sl0, const DY* dy, T* dw,
                 bool accumulate, int64_t i0, int64_t o0, int64_t cols) {
  const ConvGeom& g = st.g;
  const int64_t ow = g.ow;
  V<T> acc[R][KW] = {};
  for (int64_t l = l0; l < l1; ++l) {
    const T* s = st.line(l, sl0) + i0 * st.row_step;
    const DY* d_line = dy + l * ow * g.o + o0;
    V<T> d[KW] = {};
    // Values e of every strip, in order; pixel e - j exists for 0 <= e - j < ow.
    auto value = [&](int64_t e, auto all_pixels) __attribute__((always_inline)) {
#pragma GCC unroll 8
      for (int j = KW - 1; j > 0; --j) d[j] = d[j - 1];
      if (e < ow) d[0] = load_as<kFull>(d_line + e * g.o, cols);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const T b = s[r * st.row_step + e];
#pragma GCC unroll 8
        for (int j = 0; j < KW; ++j)
          if (decltype(all_pixels)::value || (e - j >= 0 && e - j < ow)) acc[r][j].fma(b, d[j]);
      }
    };
    const int64_t steady = std::min<int64_t>(KW - 1, ow);
    int64_t e = 0;
    for (; e < steady; ++e) value(e, std::false_type{});
    for (; e < ow; ++e) value(e, std::true_type{});
    for (; e < ow + KW - 1; ++e) value(e, std::false_type{});
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < KW; ++j) {
      T* out = dw + ((i0 + r) * KW + j) * g.o + o0;
      store<kFull>(out, accumulate ? load<kFull>(out, cols) + acc[r][j] : acc[r][j], cols);
    }
}

// Kernel rows per filter-gradient block: as many as kMaxTaps accumulators hold.
template <int KW>
constexpr int kMaxRows = std::max(1, kMaxTaps / KW);

template <typename T, typename DY, int KW, bool kFull, int R = kMaxRows<KW>>
void filter_rows_of(int rows, const Strips<T>& st, int64_t l0, int64_t l1, int64_t sl0,
                    const DY* dy, T* dw, bool accumulate, int64_t i0, int64_t o0, int64_t cols) {
  if constexpr (R >= 1) {
    if (rows == R)
      return filter_rows<T, DY, R, KW, kFull>(st, l0, l1, sl0, dy, dw, accumulate, i0, o0, cols);
    filter_rows_of<T, DY, KW, kFull, R - 1>(rows, st, l0, l1, sl0, dy, dw, accumulate, i0, o0,
                                            cols);
  }
}

// The filter gradient of lines [c0, c1) for one-channel rows: the kernel rows in near-equal
// blocks of at most kMaxRows<KW>.
template <typename T, typename DY, int KW>
void filter_gradient_rows(const Strips<T>& st, int64_t c0, int64_t c1, const DY* dy, T* dw,
                          bool accumulate) {
  const ConvGeom& g = st.g;
  const int64_t blocks = (g.kh + kMaxRows<KW> - 1) / kMaxRows<KW>;
  for (int64_t b = 0, i0 = 0; b < blocks; ++b) {
    const int rows = int((g.kh - i0 + (blocks - b) - 1) / (blocks - b));
    for (int64_t o0 = 0; o0 < g.o; o0 += kLanes<T>) {
      const int64_t cols = std::min(kLanes<T>, g.o - o0);
      if (cols == kLanes<T>)
        filter_rows_of<T, DY, KW, true>(rows, st, c0, c1, c0, dy, dw, accumulate, i0, o0, cols);
      else
        filter_rows_of<T, DY, KW, false>(rows, st, c0, c1, c0, dy, dw, accumulate, i0, o0, cols);
    }
    i0 += rows;
  }
}

// Taps [t0, t0 + N) x channels [o0, o0 + cols) of the gradient of lines [l0, l1) (strips built
// from l0), added to dw or stored.
template <typename T, typename DY, int N, bool kFull>
void filter_block(const Strips<T>& st, int64_t l0, int64_t l1, int64_t sl0, const DY* dy, T* dw,
                  bool accumulate, int64_t t0, int64_t o0, int64_t cols) {
  const ConvGeom& g = st.g;
  V<T> acc[N] = {};
  int64_t off[N];
  for (int i = 0; i < N; ++i) off[i] = st.tap[size_t(t0 + i)];
  const int64_t step = g.sw * g.c;
  for (int64_t l = l0; l < l1; ++l) {
    const T* strip = st.line(l, sl0);
    const DY* d = dy + l * g.ow * g.o + o0;
    for (int64_t ox = 0; ox < g.ow; ++ox, d += g.o) {
      const V<T> dv = load_as<kFull>(d, cols);
      const T* a = strip + ox * step;
      for (int i = 0; i < N; ++i) acc[i].fma(a[off[i]], dv);
    }
  }
  for (int i = 0; i < N; ++i) {
    T* out = dw + (t0 + i) * g.o + o0;
    store<kFull>(out, accumulate ? load<kFull>(out, cols) + acc[i] : acc[i], cols);
  }
}

template <typename T, typename DY, bool kFull, int N = kMaxTaps>
void filter_taps(int taps, const Strips<T>& st, int64_t l0, int64_t l1, int64_t sl0, const DY* dy,
                 T* dw, bool accumulate, int64_t t0, int64_t o0, int64_t cols) {
  if constexpr (N >= 1) {
    if (taps == N)
      return filter_block<T, DY, N, kFull>(st, l0, l1, sl0, dy, dw, accumulate, t0, o0, cols);
    filter_taps<T, DY, kFull, N - 1>(taps, st, l0, l1, sl0, dy, dw, accumulate, t0, o0, cols);
  }
}

}  // namespace

template <typename T, typename Y>
void shallow_conv_forward(const T* x, const T* w, Y* y, const ConvGeom& g, int64_t l0, int64_t l1) {
  Strips<T> st(g);
  const int64_t K = g.k();
  std::vector<V<T>> wv(static_cast<size_t>(K));
  const bool rows = one_channel_rows(g);
  const int64_t chunk = st.lines_per_chunk();
  for (int64_t c0 = l0; c0 < l1; c0 += chunk) {
    const int64_t c1 = std::min(l1, c0 + chunk);
    st.build(x, c0, c1);
    for (int64_t o0 = 0; o0 < g.o; o0 += kLanes<T>) {
      const int64_t cols = std::min(kLanes<T>, g.o - o0);
      for (int64_t t = 0; t < K; ++t) wv[size_t(t)] = load<false>(w + t * g.o + o0, cols);
      for (int64_t l = c0; l < c1; ++l) {
        Y* yl = y + l * g.ow * g.o + o0;
        if (rows && cols == kLanes<T>)
          forward_line_rows<T, Y, true>(st.line(l, c0), st, wv.data(), yl, cols);
        else if (rows)
          forward_line_rows<T, Y, false>(st.line(l, c0), st, wv.data(), yl, cols);
        else if (cols == kLanes<T>)
          forward_line<T, Y, true>(st.line(l, c0), st, wv.data(), yl, cols);
        else
          forward_line<T, Y, false>(st.line(l, c0), st, wv.data(), yl, cols);
      }
    }
  }
}

template <typename T, typename DY>
void shallow_conv_filter_gradient(const T* x, const DY* dy, T* dw, const ConvGeom& g, int64_t l0,
                                  int64_t l1, bool accumulate) {
  Strips<T> st(g);
  const int64_t K = g.k();
  if (l0 == l1 && !accumulate) std::fill(dw, dw + K * g.o, T(0));
  // The taps in near-equal blocks of at most kMaxTaps (27 taps, AVX-512: 9 + 9 + 9; AVX2:
  // 6 + 6 + 5 + 5 + 5).
  const int64_t blocks = (K + kMaxTaps - 1) / kMaxTaps;
  const int64_t chunk = st.lines_per_chunk();
  for (int64_t c0 = l0; c0 < l1; c0 += chunk) {
    const int64_t c1 = std::min(l1, c0 + chunk);
    const bool acc = accumulate || c0 != l0;
    st.build(x, c0, c1);
    if (one_channel_rows(g)) {
      if (g.kw == 3)
        filter_gradient_rows<T, DY, 3>(st, c0, c1, dy, dw, acc);
      else
        filter_gradient_rows<T, DY, 5>(st, c0, c1, dy, dw, acc);
      continue;
    }
    for (int64_t b = 0, t0 = 0; b < blocks; ++b) {
      const int taps = int((K - t0 + (blocks - b) - 1) / (blocks - b));
      for (int64_t o0 = 0; o0 < g.o; o0 += kLanes<T>) {
        const int64_t cols = std::min(kLanes<T>, g.o - o0);
        if (cols == kLanes<T>)
          filter_taps<T, DY, true>(taps, st, c0, c1, c0, dy, dw, acc, t0, o0, cols);
        else
          filter_taps<T, DY, false>(taps, st, c0, c1, c0, dy, dw, acc, t0, o0, cols);
      }
      t0 += taps;
    }
  }
}

template void shallow_conv_forward<float>(const float*, const float*, float*, const ConvGeom&,
                                          int64_t, int64_t);
template void shallow_conv_forward<double>(const double*, const double*, double*, const ConvGeom&,
                                           int64_t, int64_t);
template void shallow_conv_forward<float, bfloat16>(const float*, const float*, bfloat16*,
                                                    const ConvGeom&, int64_t, int64_t);
template void shallow_conv_filter_gradient<float>(const float*, const float*, float*,
                                                  const ConvGeom&, int64_t, int64_t, bool);
template void shallow_conv_filter_gradient<float, bfloat16>(const float*, const bfloat16*, float*,
                                                            const ConvGeom&, int64_t, int64_t,
                                                            bool);
template void shallow_conv_filter_gradient<double>(const double*, const double*, double*,
                                                   const ConvGeom&, int64_t, int64_t, bool);

}  // namespace kiln::runtime
