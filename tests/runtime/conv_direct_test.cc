// The direct float32 convolutions (runtime/kernels/conv_direct.h) through run_op, on every
// microkernel set this CPU runs, at 1 and 2 threads:
//  - the forward pass is bitwise the engine's GEMM of an im2col matrix built here (the same
//    FMA chain per output, conv_direct.h), so it cannot drift from the im2col path;
//  - the input gradient (one chain over the turned filter) and the filter gradient (per-part
//    chains over the pixels, the partials added in order) are within the a-priori bound of a
//    float32 dot product of its length of a float64 loop written here (gamma_(2K+2) times the
//    sum of |term|, any summation order: the bound holds on every CPU), and bitwise the same at
//    1 and 2 threads.
// A seeded random sweep checks all three passes (most of its geometries direct); the
// listed cases take the direct path (asserted through direct_conv_*_applies): strides, a
// dilated kernel row, k deeper than one k block (a block starting inside a kernel row), output
// channels in several and partial column tiles, "valid" padding. Fixed seeds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_microkernel.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/kernels/conv_direct.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/contraction_test_util.h"
#include "tests/runtime/conv_test_util.h"

namespace kiln::runtime {
namespace {

using contraction_test::bitwise_equal;
using contraction_test::dot;
using contraction_test::Ints;
using contraction_test::random_array;

using ConvDirectCase = conv_test::WindowCase;

std::string describe_conv_direct(const ConvDirectCase& c) { return conv_test::describe_window(c); }

Attrs attrs_of(const ConvDirectCase& c) {
  return Attrs{{"strides", c.strides}, {"dilations", c.dilations}, {"padding", c.padding}};
}

const std::vector<ConvDirectCase>& conv_direct_cases() {
  static const std::vector<ConvDirectCase> all = {
      {{3, 14, 14, 16}, {3, 3, 16, 32}, {1, 1}, {1, 1}, "same"},  // kiln bench's CNN conv2
      {{2, 11, 13, 8}, {3, 3, 8, 20}, {1, 1}, {1, 1}, "valid"},   // a partial column tile
      {{2, 12, 15, 6}, {3, 5, 6, 40}, {1, 1}, {2, 1}, "same"},    // dilated rows, 2.5 tiles
      {{2, 16, 16, 64}, {3, 3, 64, 8}, {1, 1}, {1, 1}, "same"},   // K = 576: two k blocks
      {{1, 10, 12, 32}, {5, 5, 32, 4}, {1, 1}, {1, 1}, "same"},   // K = 800, blocks mid-row
      {{2, 21, 26, 5}, {4, 3, 5, 12}, {2, 2}, {1, 1}, "same"},    // strided (forward only)
      {{1, 9, 30, 12}, {2, 2, 12, 3}, {1, 3}, {1, 1}, "valid"},   // strided columns
      {{1, 40, 60, 32}, {3, 3, 32, 24}, {1, 1}, {1, 1}, "same"},  // several bands per image
  };
  return all;
}

// Restores the kernel set and thread count at scope exit.
class SettingsGuard {
 public:
  SettingsGuard() : kernels_(gemm_kernels()), threads_(num_threads()) {}
  ~SettingsGuard() {
    set_gemm_kernels(kernels_);
    set_num_threads(threads_);
  }

 private:
  std::string kernels_;
  int threads_;
};

std::vector<std::string> microkernel_sets() {
  std::vector<std::string> sets;
  for (const char* name : {"avx512", "avx2"}) {
    try {
      SettingsGuard guard;
      set_gemm_kernels(name);
      sets.push_back(name);
    } catch (const Error&) {  // this CPU cannot run them
    }
  }
  return sets;
}

// The im2col matrix [pixels, kh * kw * c] in (kh, kw, c) order, zeros for padding: the
// input value of each multiply with output channel 0.
std::vector<float> im2col(const Array& x, const ConvGeom& g) {
  const float* xp = x.data<float>();
  std::vector<float> col(size_t(g.rows() * g.k()), 0.0f);
  conv_test::for_each_multiply(g, [&](size_t xi, size_t wi, size_t yi) {
    if (wi % size_t(g.o) == 0) col[yi / size_t(g.o) * size_t(g.k()) + wi / size_t(g.o)] = xp[xi];
  });
  return col;
}

TEST(ConvDirect, ForwardIsBitwiseTheGemmOfItsIm2colMatrix) {
  SettingsGuard guard;
  uint64_t seed = 700;
  for (const ConvDirectCase& c : conv_direct_cases()) {
    const ConvGeom g = conv_geom(Shape(c.input), Shape(c.filter), attrs_of(c), "test");
    std::mt19937_64 rng(seed++);
    const Array x = random_array(DType::f32, Shape(c.input), rng);
    const Array w = random_array(DType::f32, Shape(c.filter), rng);
    const std::vector<float> col = im2col(x, g);
    for (const std::string& set : microkernel_sets()) {
      set_gemm_kernels(set);
      ASSERT_TRUE(direct_conv_forward_applies(g)) << describe_conv_direct(c);
      std::vector<float> want(size_t(g.rows() * g.o));
      gemm<float>(false, false, g.rows(), g.o, g.k(), col.data(), g.k(), w.data<float>(), g.o,
                  want.data(), g.o);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        const Array in[] = {x, w};
        const Array y = run_op(OpKind::Conv2D, in, attrs_of(c));
        ASSERT_EQ(y.size(), int64_t(want.size()));
        const float* yp = y.data<float>();
        for (size_t e = 0; e < want.size(); ++e)
          ASSERT_EQ(std::memcmp(&yp[e], &want[e], sizeof(float)), 0)
              << describe_conv_direct(c) << " " << set << " threads " << threads << " at " << e
              << ": " << yp[e] << " vs " << want[e];
      }
    }
  }
}

// A gradient's float64 reference: each element's sum and sum of |term|.
struct Reference {
  std::vector<double> want, magnitude;
  explicit Reference(int64_t size) : want(size_t(size)), magnitude(size_t(size)) {}
  void add(size_t e, double term) {
    want[e] += term;
    magnitude[e] += std::abs(term);
  }
};

// The result of `op` on `in` (a convolution or a gradient) on every microkernel set: bitwise the
// same at 1 and 2 threads, and every element within gamma_(2 * terms + 2) * sum |term| of the
// reference.
void expect_gradient(OpKind op, std::span<const Array> in, const Attrs& attrs, const Reference& ref,
                     double terms, const std::string& what) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double gamma = (2 * terms + 2) * u / (1 - (2 * terms + 2) * u);
  for (const std::string& set : microkernel_sets()) {
    set_gemm_kernels(set);
    set_num_threads(1);
    const Array got1 = run_op(op, in, attrs);
    set_num_threads(2);
    const Array got2 = run_op(op, in, attrs);
    EXPECT_TRUE(bitwise_equal(got1, got2)) << what << " " << set;
    const float* got = got1.data<float>();
    for (size_t e = 0; e < ref.want.size(); ++e)
      ASSERT_LE(std::abs(double(got[e]) - ref.want[e]), gamma * ref.magnitude[e])
          << what << " " << set << " at " << e << ": " << got[e] << " vs " << ref.want[e];
  }
}

TEST(ConvDirect, InputGradientWithinTheDotProductBoundAndThreadIndependent) {
  SettingsGuard guard;
  uint64_t seed = 800;
  for (const ConvDirectCase& c : conv_direct_cases()) {
    const ConvGeom g = conv_geom(Shape(c.input), Shape(c.filter), attrs_of(c), "test");
    if (g.sh != 1 || g.sw != 1) continue;  // strided input gradients take the im2col path
    for (const std::string& set : microkernel_sets()) {
      set_gemm_kernels(set);
      ASSERT_TRUE(direct_conv_backprop_input_applies(g)) << describe_conv_direct(c) << " " << set;
    }
    std::mt19937_64 rng(seed++);
    const Array w = random_array(DType::f32, Shape(c.filter), rng);
    const Array dy = random_array(DType::f32, Shape{g.n, g.oh, g.ow, g.o}, rng);
    const float *wp = w.data<float>(), *gp = dy.data<float>();
    Reference ref(g.n * g.h * g.w * g.c);
    conv_test::for_each_multiply(
        g, [&](size_t xi, size_t wi, size_t yi) { ref.add(xi, double(gp[yi]) * double(wp[wi])); });
    Attrs attrs = attrs_of(c);
    attrs.set("input_shape", c.input);
    const Array in[] = {w, dy};
    expect_gradient(OpKind::Conv2DBackpropInput, in, attrs, ref, double(g.kh * g.kw * g.o),
                    describe_conv_direct(c));
  }
}

TEST(ConvDirect, FilterGradientWithinTheDotProductBoundAndThreadIndependent) {
  SettingsGuard guard;
  uint64_t seed = 900;
  for (const ConvDirectCase& c : conv_direct_cases()) {
    const ConvGeom g = conv_geom(Shape(c.input), Shape(c.filter), attrs_of(c), "test");
    for (const std::string& set : microkernel_sets()) {
      set_gemm_kernels(set);
      ASSERT_TRUE(direct_conv_backprop_filter_applies(g)) << describe_conv_direct(c) << " " << set;
    }
    std::mt19937_64 rng(seed++);
    const Array x = random_array(DType::f32, Shape(c.input), rng);
    const Array dy = random_array(DType::f32, Shape{g.n, g.oh, g.ow, g.o}, rng);
    const float *xp = x.data<float>(), *gp = dy.data<float>();
    Reference ref(g.k() * g.o);
    conv_test::for_each_multiply(
        g, [&](size_t xi, size_t wi, size_t yi) { ref.add(wi, double(xp[xi]) * double(gp[yi])); });
    Attrs attrs = attrs_of(c);
    attrs.set("filter_shape", c.filter);
    const Array in[] = {x, dy};
    expect_gradient(OpKind::Conv2DBackpropFilter, in, attrs, ref, double(g.rows()),
                    describe_conv_direct(c));
  }
}

// Seeded random geometries (strides, a dilated kernel row, "same" and "valid", kernels up to
// 5x5, channel counts around the vector width): whatever path each takes, its three passes
// hold the checks above; most take the direct path (counted).
TEST(ConvDirect, RandomGeometries) {
  SettingsGuard guard;
  std::mt19937_64 rng(1000);
  auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  int direct = 0, tried = 0;
  while (tried < 30) {
    ConvDirectCase c{{pick({1, 2, 3}), pick({3, 5, 8, 13, 20}), pick({3, 6, 9, 14, 21}),
                      pick({4, 8, 16, 20, 33})},
                     {pick({1, 2, 3, 5}), pick({1, 2, 3, 4}), 0, pick({5, 16, 32, 40})},
                     {pick({1, 1, 2}), pick({1, 1, 2})},
                     {pick({1, 1, 2}), 1},
                     rng() % 2 ? "same" : "valid"};
    c.filter[2] = c.input[3];
    ConvGeom g;
    try {
      g = conv_geom(Shape(c.input), Shape(c.filter), attrs_of(c), "test");
    } catch (const Error&) {  // the window does not fit
      continue;
    }
    ++tried;
    direct += direct_conv_forward_applies(g);
    const std::string what = describe_conv_direct(c);
    const Array x = random_array(DType::f32, Shape(c.input), rng);
    const Array w = random_array(DType::f32, Shape(c.filter), rng);
    const Array dy = random_array(DType::f32, Shape{g.n, g.oh, g.ow, g.o}, rng);
    const float *xp = x.data<float>(), *wp = w.data<float>(), *gp = dy.data<float>();
    Reference fwd(g.rows() * g.o), dx(g.n * g.h * g.w * g.c), dw(g.k() * g.o);
    conv_test::for_each_multiply(g, [&](size_t xi, size_t wi, size_t yi) {
      fwd.add(yi, double(xp[xi]) * double(wp[wi]));
      dx.add(xi, double(gp[yi]) * double(wp[wi]));
      dw.add(wi, double(xp[xi]) * double(gp[yi]));
    });
    const Array fwd_in[] = {x, w}, dx_in[] = {w, dy}, dw_in[] = {x, dy};
    Attrs dx_attrs = attrs_of(c), dw_attrs = attrs_of(c);
    dx_attrs.set("input_shape", c.input);
    dw_attrs.set("filter_shape", c.filter);
    expect_gradient(OpKind::Conv2D, fwd_in, attrs_of(c), fwd, double(g.k()), what + " forward");
    expect_gradient(OpKind::Conv2DBackpropInput, dx_in, dx_attrs, dx, double(g.kh * g.kw * g.o),
                    what + " input gradient");
    expect_gradient(OpKind::Conv2DBackpropFilter, dw_in, dw_attrs, dw, double(g.rows()),
                    what + " filter gradient");
  }
  EXPECT_GE(direct, 15) << "too few random geometries took the direct path";
}

// The forward pass and the input gradient run each output line in the fewest tiles a shape of
// the set as wide as the one they report can: their profile events name the shape and the tiles
// per line (the CNN's 14-pixel lines: one 14-row tile on AVX-512, where 12-row tiles split them
// in two). Lines of 14, 28 and 9 pixels, on every set this CPU runs.
TEST(ConvDirect, LinesRunInTheFewestTilesOfTheirWidth) {
  SettingsGuard guard;
  set_num_threads(1);
  std::mt19937_64 rng(760);
  for (const std::string& set : microkernel_sets()) {
    set_gemm_kernels(set);
    const gemm_detail::MicroKernels& mk = *gemm_detail::active_microkernels();
    for (int64_t width : {14, 28, 9}) {
      const ConvDirectCase c{{2, 6, width, 16}, {3, 3, 16, 32}, {1, 1}, {1, 1}, "same"};
      const ConvGeom g = conv_geom(Shape(c.input), Shape(c.filter), attrs_of(c), "test");
      ASSERT_TRUE(direct_conv_forward_applies(g) && direct_conv_backprop_input_applies(g));
      const Array x = random_array(DType::f32, Shape(c.input), rng);
      const Array w = random_array(DType::f32, Shape(c.filter), rng);
      const Array dy = random_array(DType::f32, Shape({2, 6, width, 32}), rng);
      Attrs dx_attrs = attrs_of(c);
      dx_attrs.set("input_shape", c.input);
      start_profiling();
      const Array fwd_in[] = {x, w};
      run_op(OpKind::Conv2D, fwd_in, attrs_of(c));
      const Array dx_in[] = {w, dy};
      run_op(OpKind::Conv2DBackpropInput, dx_in, dx_attrs);
      const std::vector<ProfileEvent> events = stop_profiling();
      int passes = 0;
      for (const ProfileEvent& e : events) {
        if (e.name != "conv2d direct" && e.name != "conv2d_backprop_input direct") continue;
        ++passes;
        const std::string what = set + " " + std::to_string(width) + ": " + e.detail;
        const gemm_detail::MicroKernel* used = nullptr;
        for (int32_t i = 0; i < mk.shape_count; ++i)
          if (e.detail.find(std::string(" ") + mk.shapes[i].name + ",") != std::string::npos)
            used = &mk.shapes[i];
        ASSERT_NE(used, nullptr) << what;
        const int64_t tiles = (width + used->mr - 1) / used->mr;
        EXPECT_NE(e.detail.find(fmt::format(" {} tile{} per {}-pixel line", tiles,
                                            tiles == 1 ? "" : "s", width)),
                  std::string::npos)
            << what;
        for (int32_t i = 0; i < mk.shape_count; ++i) {
          if (mk.shapes[i].nr == used->nr) {
            EXPECT_GE((width + mk.shapes[i].mr - 1) / mk.shapes[i].mr, tiles)
                << what << " vs " << mk.shapes[i].name;
          }
        }
      }
      EXPECT_EQ(passes, 2) << set << " " << width;
    }
  }
}

// A line narrower than half a tile, a dilated kernel column, a shallow window and a strided
// input gradient are not taken (their own paths, conv.cc).
TEST(ConvDirect, GeometriesItDoesNotTake) {
  auto geom = [](Ints in, Ints f, Ints s, Ints d) {
    return conv_geom(Shape(in), Shape(f),
                     Attrs{{"strides", s}, {"dilations", d}, {"padding", std::string("same")}},
                     "test");
  };
  EXPECT_FALSE(direct_conv_forward_applies(geom({1, 9, 2, 16}, {3, 3, 16, 8}, {1, 1}, {1, 1})));
  EXPECT_FALSE(direct_conv_forward_applies(geom({1, 9, 9, 16}, {3, 3, 16, 8}, {1, 1}, {1, 2})));
  EXPECT_FALSE(direct_conv_forward_applies(geom({1, 9, 9, 3}, {3, 3, 3, 8}, {1, 1}, {1, 1})));
  EXPECT_FALSE(
      direct_conv_backprop_input_applies(geom({1, 9, 9, 16}, {3, 3, 16, 8}, {2, 1}, {1, 1})));
}

}  // namespace
}  // namespace kiln::runtime
