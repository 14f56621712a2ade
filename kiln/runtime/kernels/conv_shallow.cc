#include "kiln/runtime/kernels/conv_shallow.h"

#include <algorithm>
#include <cstring>
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

// The zero-padded input rows of lines [l0, l1): strip (line, i) holds input row
// oy*sh - ph + i*dh of the line's image, from column -pw on, `width` pixels of c channels (zeros
// outside the image), so tap (i, j, ch) of pixel ox is at strip(line, i)[(ox*sw + j*dw)*c + ch].
template <typename T>
struct Strips {
  const ConvGeom& g;
  int64_t width;  // padded pixels per strip
  int64_t line_stride, strip_stride;
  std::vector<T> data;
  // Tap t = (i*kw + j)*c + ch: its offset in a line's strips, before the pixel's ox*sw*c.
  std::vector<int64_t> tap;

  explicit Strips(const ConvGeom& geom) : g(geom) {
    width = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    strip_stride = width * g.c;
    line_stride = g.kh * strip_stride;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j)
        for (int64_t ch = 0; ch < g.c; ++ch) tap.push_back(i * strip_stride + j * g.dw * g.c + ch);
  }
  int64_t lines_per_chunk() const {
    return std::max<int64_t>(1, kStripChunkBytes / (line_stride * int64_t(sizeof(T))));
  }
  void build(const T* x, int64_t l0, int64_t l1) {
    data.resize(size_t((l1 - l0) * line_stride));
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t n = l / g.oh, oy = l % g.oh;
      for (int64_t i = 0; i < g.kh; ++i) {
        T* s = data.data() + (l - l0) * line_stride + i * strip_stride;
        const int64_t iy = oy * g.sh - g.ph + i * g.dh;
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
    }
  }
  const T* line(int64_t l, int64_t l0) const { return data.data() + (l - l0) * line_stride; }
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
    for (int p = 0; p < P; ++p) acc[p] += a[p * step] * wt;
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
      for (int i = 0; i < N; ++i) acc[i] += a[off[i]] * dv;
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
  const int64_t chunk = st.lines_per_chunk();
  for (int64_t c0 = l0; c0 < l1; c0 += chunk) {
    const int64_t c1 = std::min(l1, c0 + chunk);
    st.build(x, c0, c1);
    for (int64_t o0 = 0; o0 < g.o; o0 += kLanes<T>) {
      const int64_t cols = std::min(kLanes<T>, g.o - o0);
      for (int64_t t = 0; t < K; ++t) wv[size_t(t)] = load<false>(w + t * g.o + o0, cols);
      for (int64_t l = c0; l < c1; ++l) {
        Y* yl = y + l * g.ow * g.o + o0;
        if (cols == kLanes<T>)
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
