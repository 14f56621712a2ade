// The direct kernels of shallow windows (runtime/kernels/conv_shallow.h) against their contract,
// bit for bit: every forward output is one chain of fused multiply-adds over its window's taps in
// (kh, kw, c) order from zero (padding taps multiplying zeros), and every filter-gradient value is
// one chain over the lines and pixels in order. The reference here is that chain written with
// std::fma (multiply then add where this build has no FMA, as the kernels do), so it covers both
// the one-channel kernels that broadcast each strip value once (c == 1, unit column stride and
// dilation, kw 3 or 5) and the general ones (three channels, column strides and dilations):
// pixel counts below, at and above a register block, partial channel blocks, row strides and
// dilations, "valid" padding, line ranges cut inside an image and ranges over several images.
// The geometries are small enough that their lines are one chunk of strips (the filter gradient
// then has no partial sums). Fixed seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/runtime/kernels/conv_geom.h"
#include "kiln/runtime/kernels/conv_shallow.h"
#include "tests/runtime/conv_test_util.h"

namespace kiln::runtime {
namespace {

using ShallowCase = conv_test::WindowCase;

float shallow_fma(float a, float b, float acc) {
#if defined(__FMA__) || defined(__AVX512F__)
  return std::fma(a, b, acc);
#else
  const float p = a * b;
  return p + acc;
#endif
}

std::vector<float> shallow_random(int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

bool shallow_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Input value of tap (i, j, ch) for output pixel (n, oy, ox); zero in the padding.
float shallow_tap(const std::vector<float>& x, const ConvGeom& g, int64_t n, int64_t oy, int64_t ox,
                  int64_t i, int64_t j, int64_t ch) {
  const int64_t iy = oy * g.sh - g.ph + i * g.dh, ix = ox * g.sw - g.pw + j * g.dw;
  if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) return 0.f;
  return x[size_t(((n * g.h + iy) * g.w + ix) * g.c + ch)];
}

TEST(ConvShallow, EveryOutputIsItsFmaChainInTapOrder) {
  const std::vector<ShallowCase> cases = {
      {{2, 9, 11, 1}, {3, 3, 1, 16}, {1, 1}, {1, 1}, "same"},    // one-channel rows, kw 3
      {{3, 7, 28, 1}, {3, 3, 1, 20}, {1, 1}, {1, 1}, "same"},    // 28 pixels: blocks and a rest
      {{2, 6, 2, 1}, {3, 3, 1, 16}, {1, 1}, {1, 1}, "same"},     // fewer pixels than kw
      {{2, 12, 13, 1}, {5, 5, 1, 9}, {1, 1}, {1, 1}, "same"},    // kw 5, a partial block
      {{2, 13, 12, 1}, {5, 5, 1, 33}, {2, 1}, {2, 1}, "valid"},  // row stride and dilation
      {{2, 10, 17, 1}, {2, 3, 1, 16}, {1, 1}, {1, 1}, "valid"},  // two kernel rows
      {{2, 9, 11, 1}, {3, 4, 1, 16}, {1, 1}, {1, 1}, "same"},    // kw 4: the general kernels
      {{2, 9, 11, 1}, {3, 3, 1, 16}, {1, 2}, {1, 1}, "same"},    // column stride: general
      {{2, 9, 11, 1}, {3, 3, 1, 16}, {1, 1}, {1, 2}, "same"},    // column dilation: general
      {{2, 8, 10, 3}, {3, 3, 3, 20}, {1, 1}, {1, 1}, "same"},    // three channels: general
  };
  std::mt19937_64 rng(71);
  for (const ShallowCase& c : cases) {
    const std::string what = conv_test::describe_window(c);
    const Attrs attrs{{"strides", c.strides}, {"dilations", c.dilations}, {"padding", c.padding}};
    const ConvGeom g = conv_geom(Shape(c.input), Shape(c.filter), attrs, "test");
    ASSERT_TRUE(g.shallow()) << what;
    const std::vector<float> x = shallow_random(g.n * g.h * g.w * g.c, rng);
    const std::vector<float> w = shallow_random(g.k() * g.o, rng);
    const std::vector<float> dy = shallow_random(g.rows() * g.o, rng);

    std::vector<float> y_ref(size_t(g.rows() * g.o)), dw_ref(size_t(g.k() * g.o), 0.f);
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox)
          for (int64_t o = 0; o < g.o; ++o) {
            float acc = 0.f;
            for (int64_t i = 0, t = 0; i < g.kh; ++i)
              for (int64_t j = 0; j < g.kw; ++j)
                for (int64_t ch = 0; ch < g.c; ++ch, ++t)
                  acc = shallow_fma(shallow_tap(x, g, n, oy, ox, i, j, ch), w[size_t(t * g.o + o)],
                                    acc);
            y_ref[size_t(((n * g.oh + oy) * g.ow + ox) * g.o + o)] = acc;
          }
    for (int64_t i = 0, t = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j)
        for (int64_t ch = 0; ch < g.c; ++ch, ++t)
          for (int64_t o = 0; o < g.o; ++o) {
            float acc = 0.f;
            for (int64_t n = 0; n < g.n; ++n)
              for (int64_t oy = 0; oy < g.oh; ++oy)
                for (int64_t ox = 0; ox < g.ow; ++ox)
                  acc = shallow_fma(shallow_tap(x, g, n, oy, ox, i, j, ch),
                                    dy[size_t(((n * g.oh + oy) * g.ow + ox) * g.o + o)], acc);
            dw_ref[size_t(t * g.o + o)] = acc;
          }

    const int64_t lines = g.n * g.oh;
    std::vector<float> y(y_ref.size(), -1.f), dw(dw_ref.size(), -1.f);
    shallow_conv_forward<float>(x.data(), w.data(), y.data(), g, 0, lines);
    EXPECT_TRUE(shallow_same_bits(y, y_ref)) << what << ": forward, all lines at once";
    shallow_conv_filter_gradient<float>(x.data(), dy.data(), dw.data(), g, 0, lines, false);
    EXPECT_TRUE(shallow_same_bits(dw, dw_ref)) << what << ": filter gradient";

    // Line ranges cut inside an image (the strips of a range start mid-image).
    const int64_t cut = g.oh / 2 + 1;
    std::fill(y.begin(), y.end(), -1.f);
    shallow_conv_forward<float>(x.data(), w.data(), y.data(), g, 0, cut);
    shallow_conv_forward<float>(x.data(), w.data(), y.data(), g, cut, lines);
    EXPECT_TRUE(shallow_same_bits(y, y_ref)) << what << ": forward in two ranges";
  }
}

}  // namespace
}  // namespace kiln::runtime
