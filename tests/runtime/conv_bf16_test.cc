// The bf16 convolutions (runtime/kernels/conv_bf16.cc) through run_op, on every float32
// microkernel set and every bf16 kernel set this CPU runs, at 1 and 2 threads:
//  - bitwise the same at 1 and 2 threads;
//  - every element within the bound of a bf16 rounding of a float32 sum: |r - s| <= 2^-8 |s|
//    for the rounding, |s - exact| <= gamma_(2 * terms + 2) * sum |term| for the float32 sum in
//    any order (float64 reference written here; the bound holds on every CPU);
//  - on the float32 kernels, bitwise the float32 convolution of the widened operands, rounded
//    once, whichever plan (conv_bf16_plan) the pass takes;
//  - on the bf16 pair kernels (VDPBF16PS, its emulation and the AMX emulation), the float32
//    kernels' values for the forward pass and for gradients that both kernel sets run by the
//    same algorithm (im2col products, or the direct kernel: on bf16 pairs, on widened operands)
//    (the pairs keep the chain; a zero's sign aside); the real TDPBF16PS adds in an order of its
//    own (on Emerald Rapids its sums differ from the chain's in the last bit), so the AMX
//    kernels are held to the bound alone;
//  - float32 operands (a compiled group's fused cast) give the bits of the bf16 operands they
//    round to;
//  - the profile shows the plan that ran.
// The cases take each path of conv_bf16.cc on every kernel set (dilated columns and strided
// input gradients are im2col on the float32 kernels too): a 1x1 product, shallow and deep
// windows, forward chunks in parallel, input gradients by groups of small images and by chunks
// of a large one, filter gradients in several parts. Fixed seeds.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/kernels/conv_bf16.h"
#include "kiln/runtime/kernels/conv_direct.h"
#include "kiln/runtime/kernels/conv_geom.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/conv_test_util.h"
#include "tests/runtime/gemm_settings_guard.h"

namespace kiln::runtime {
namespace {

using IntList = std::vector<int64_t>;

using Bf16ConvCase = conv_test::WindowCase;

std::string describe_conv_case(const Bf16ConvCase& c) { return conv_test::describe_window(c); }

const std::vector<Bf16ConvCase>& bf16_cases() {
  static const std::vector<Bf16ConvCase> all = {
      {{2, 14, 14, 16}, {3, 3, 16, 32}, {1, 1}, {1, 1}, "same"},  // one forward chunk
      {{2, 7, 9, 24}, {1, 1, 24, 40}, {1, 1}, {1, 1}, "same"},    // pointwise
      {{3, 20, 20, 3}, {3, 3, 3, 16}, {1, 1}, {1, 1}, "same"},    // shallow (K = 27)
      {{2, 9, 11, 1}, {3, 3, 1, 20}, {1, 1}, {1, 1}, "same"},     // shallow: a partial block
      {{2, 8, 9, 3}, {2, 3, 3, 10}, {2, 1}, {1, 1}, "valid"},     // shallow, strided: 10 of 16
      {{2, 21, 26, 5}, {4, 3, 5, 12}, {2, 2}, {1, 1}, "same"},    // strided
      {{2, 12, 15, 6}, {3, 5, 6, 40}, {1, 1}, {2, 1}, "valid"},   // dilated rows
      {{4, 24, 24, 16}, {3, 3, 16, 32}, {1, 1}, {1, 1}, "same"},  // chunks; filter in parts
      {{9, 14, 14, 16}, {3, 3, 16, 24}, {1, 1}, {1, 1}, "same"},  // input grad: image groups
      {{1, 40, 40, 16}, {3, 3, 16, 8}, {1, 1}, {1, 1}, "same"},   // input grad: image chunks
      {{2, 16, 16, 64}, {3, 3, 64, 8}, {1, 1}, {1, 1}, "valid"},  // K = 576
      // im2col on the float32 kernels too: dilated columns (forward chunks in parallel, filter
      // gradient in parts), strided input gradients (groups of images; chunks of one image)
      {{4, 24, 24, 16}, {3, 3, 16, 32}, {1, 1}, {1, 2}, "same"},
      {{9, 14, 14, 16}, {3, 3, 16, 24}, {2, 2}, {1, 1}, "same"},
      {{9, 14, 14, 64}, {3, 3, 64, 8}, {2, 2}, {1, 1}, "same"},  // groups of 4 images in parallel
      {{1, 60, 60, 32}, {3, 3, 32, 8}, {2, 2}, {1, 1}, "same"},
      // the direct kernels on bf16 pairs: k blocks of a deep window (1152 pairs), strides (the
      // forward pass and filter gradient), an odd count of output channels (the input gradient
      // then im2col)
      {{1, 10, 10, 256}, {3, 3, 256, 16}, {1, 1}, {1, 1}, "same"},
      {{2, 21, 28, 8}, {4, 3, 8, 12}, {2, 2}, {1, 1}, "same"},
      {{2, 14, 14, 16}, {3, 3, 16, 15}, {1, 1}, {1, 1}, "same"},
  };
  return all;
}

// (float32 set, bf16 set) pairs this CPU runs.
std::vector<std::pair<std::string, std::string>> bf16_conv_kernel_sets() {
  return runnable_kernel_set_pairs({"avx512", "avx2"});
}

// Values in [-1, 1] that bf16 holds exactly, as bf16 and widened to float32; `unrounded`: float32
// values that round to them (random low halves under a tie), the operand of a fused cast.
struct ConvOperand {
  Array bf16, f32, unrounded;
  std::vector<double> values;
};

ConvOperand random_conv_operand(const Shape& s, std::mt19937_64& rng) {
  ConvOperand o{
      Array::empty(DType::bf16, s), Array::empty(DType::f32, s), Array::empty(DType::f32, s), {}};
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<uint32_t> low(0, 0x7FFF);
  auto* b = static_cast<bfloat16*>(o.bf16.raw());
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    b[i] = bfloat16::from_double(u(rng));
    o.f32.data<float>()[i] = b[i].to_float();
    o.unrounded.data<float>()[i] = std::bit_cast<float>(uint32_t(b[i].bits) << 16 | low(rng));
    o.values.push_back(double(b[i].to_float()));
  }
  return o;
}

// Each element's exact (float64) sum and sum of |term|, and the length of its longest chain.
struct ExactSums {
  std::vector<double> sum, magnitude;
  double terms = 0;
  ExactSums(int64_t size, double t) : sum(size_t(size)), magnitude(size_t(size)), terms(t) {}
  void add(size_t e, double term) {
    sum[e] += term;
    magnitude[e] += std::abs(term);
  }
};

std::vector<uint16_t> conv_bits(const Array& a) {
  std::vector<uint16_t> v(size_t(a.size()));
  std::memcpy(v.data(), a.raw(), a.nbytes());
  return v;
}

// `f` (float32) rounded to bf16, as bits.
std::vector<uint16_t> rounded_conv_bits(const Array& f) {
  std::vector<uint16_t> v(size_t(f.size()));
  for (int64_t i = 0; i < f.size(); ++i)
    v[size_t(i)] = bfloat16::from_float(f.data<float>()[i]).bits;
  return v;
}

float bf16_value(uint16_t b) { return bfloat16::from_bits(b).to_float(); }

// One op on one case: the checks of the file comment.
void check_conv_op(OpKind op, const ConvGeom& g, std::span<const ConvOperand> operands,
                   const Attrs& attrs, const ExactSums& exact, const std::string& what) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double n = 2 * exact.terms + 2;
  const double gamma = n * u / (1 - n * u);
  std::vector<Array> in_bf16, in_f32;
  for (const ConvOperand& o : operands) {
    in_bf16.push_back(o.bf16);
    in_f32.push_back(o.f32);
  }
  std::vector<uint16_t> float32_set_bits;
  ConvBf16Plan float32_set_plan = ConvBf16Plan::kIm2colBf16;
  for (const auto& [f32_set, bf16_set] : bf16_conv_kernel_sets()) {
    const std::string where = what + " on " + f32_set + " / " + bf16_set;
    set_gemm_kernels(f32_set);
    set_gemm_bf16_kernels(bf16_set);
    set_num_threads(1);
    const std::vector<uint16_t> got = conv_bits(run_op(op, in_bf16, attrs));
    set_num_threads(2);
    ASSERT_EQ(conv_bits(run_op(op, in_bf16, attrs)), got) << where << ": 1 and 2 threads differ";
    // Float32 operands of a fused cast (either or both) are rounded by the kernel itself: the
    // same bits as from the rounded operands.
    for (int which = 1; which <= 3; ++which) {
      std::vector<Array> mixed = in_bf16;
      for (size_t i = 0; i < 2; ++i)
        if (which & (1 << i)) mixed[i] = operands[i].unrounded;
      Array out = Array::empty(DType::bf16, run_op(op, in_bf16, attrs).shape);
      kernel_for(op)(mixed, attrs, out);
      ASSERT_EQ(conv_bits(out), got) << where << ": float32 operands " << which << " rounded";
    }
    for (size_t e = 0; e < got.size(); ++e) {
      const double s_bound = gamma * exact.magnitude[e];
      const double bound = std::ldexp(std::abs(exact.sum[e]) + s_bound, -8) + s_bound;
      ASSERT_LE(std::abs(double(bf16_value(got[e])) - exact.sum[e]), bound)
          << where << " at " << e << ": " << bf16_value(got[e]) << " vs " << exact.sum[e];
    }
    if (bf16_set == "float32") {
      ASSERT_EQ(got, rounded_conv_bits(run_op(op, in_f32, attrs)))
          << where << ": not the float32 op's result rounded";
      float32_set_bits = got;
      float32_set_plan = conv_bf16_plan(op, g);
    } else if (bf16_set != "amx" &&
               (op == OpKind::Conv2D || (conv_bf16_plan(op, g) == ConvBf16Plan::kPairDirect) ==
                                            (float32_set_plan == ConvBf16Plan::kWidenedDirect))) {
      // Pair kernels keep the chains of the float32 kernels' im2col product (and of the
      // direct kernels: the forward pass, an input gradient that both run directly);
      // TDPBF16PS does not (file comment).
      ASSERT_FALSE(float32_set_bits.empty());
      for (size_t e = 0; e < got.size(); ++e)
        ASSERT_EQ(bf16_value(got[e]), bf16_value(float32_set_bits[e]))
            << where << " at " << e << ": not the float32 kernels' value";
    }
  }
}

Attrs conv_window_attrs(const Bf16ConvCase& c) {
  return Attrs{{"strides", c.strides}, {"dilations", c.dilations}, {"padding", c.padding}};
}

TEST(ConvBf16, EveryPassIsItsFloat32SumRoundedOnce) {
  GemmSettingsGuard guard;
  uint64_t seed = 4100;
  for (const Bf16ConvCase& c : bf16_cases()) {
    const std::string what = describe_conv_case(c);
    SCOPED_TRACE(what);
    const ConvGeom g = conv_geom(Shape(c.input), Shape(c.filter), conv_window_attrs(c), "test");
    std::mt19937_64 rng(seed++);
    const ConvOperand x = random_conv_operand(Shape(c.input), rng);
    const ConvOperand w = random_conv_operand(Shape(c.filter), rng);
    const ConvOperand dy = random_conv_operand(Shape{g.n, g.oh, g.ow, g.o}, rng);

    ExactSums y(g.rows() * g.o, double(g.k()));
    ExactSums dx(g.n * g.h * g.w * g.c, double(g.kh * g.kw * g.o));
    ExactSums dw(g.k() * g.o, double(g.rows()));
    conv_test::for_each_multiply(g, [&](size_t xi, size_t wi, size_t yi) {
      y.add(yi, x.values[xi] * w.values[wi]);
      dx.add(xi, dy.values[yi] * w.values[wi]);
      dw.add(wi, x.values[xi] * dy.values[yi]);
    });

    const ConvOperand fwd[] = {x, w};
    check_conv_op(OpKind::Conv2D, g, fwd, conv_window_attrs(c), y, "conv2d " + what);

    Attrs input_attrs = conv_window_attrs(c);
    input_attrs.set("input_shape", c.input);
    const ConvOperand in_grad[] = {w, dy};
    check_conv_op(OpKind::Conv2DBackpropInput, g, in_grad, input_attrs, dx,
                  "conv2d_backprop_input " + what);

    Attrs filter_attrs = conv_window_attrs(c);
    filter_attrs.set("filter_shape", c.filter);
    const ConvOperand filter_grad[] = {x, dy};
    check_conv_op(OpKind::Conv2DBackpropFilter, g, filter_grad, filter_attrs, dw,
                  "conv2d_backprop_filter " + what);
  }
}

// The profile shows the plan of each pass (conv_bf16_plan): bf16 im2col chunks have no
// `bf16 widen` / `bf16 round` events (the via-f32 rule's passes over memory) and GEMMs of bf16
// operands ("bf16 packed" in the plan); a direct float32 kernel has its operands widened and
// its result rounded, and no bf16 GEMM; the direct kernel on bf16 pairs neither, and one
// "conv" event naming the pair set. On the float32 kernels the first two plans occur in these
// cases, on the VDPBF16PS sets the first and the last, on the AMX sets im2col alone.
TEST(ConvBf16, TheProfileShowsThePlan) {
  GemmSettingsGuard guard;
  const std::vector<Bf16ConvCase> cases = {
      {{2, 14, 14, 16}, {3, 3, 16, 32}, {1, 1}, {1, 1}, "same"},
      {{2, 21, 26, 5}, {4, 3, 5, 12}, {2, 2}, {1, 1}, "same"},  // strided: im2col input grad
  };
  for (const auto& [f32_set, bf16_set] : bf16_conv_kernel_sets()) {
    set_gemm_kernels(f32_set);
    set_gemm_bf16_kernels(bf16_set);
    std::set<ConvBf16Plan> seen;
    for (const Bf16ConvCase& c : cases) {
      const ConvGeom g = conv_geom(Shape(c.input), Shape(c.filter), conv_window_attrs(c), "test");
      std::mt19937_64 rng(4200);
      const ConvOperand x = random_conv_operand(Shape(c.input), rng);
      const ConvOperand w = random_conv_operand(Shape(c.filter), rng);
      const ConvOperand dy = random_conv_operand(Shape{g.n, g.oh, g.ow, g.o}, rng);
      Attrs input_attrs = conv_window_attrs(c), filter_attrs = conv_window_attrs(c);
      input_attrs.set("input_shape", c.input);
      filter_attrs.set("filter_shape", c.filter);
      const std::vector<std::tuple<OpKind, std::vector<Array>, Attrs>> passes = {
          {OpKind::Conv2D, {x.bf16, w.bf16}, conv_window_attrs(c)},
          {OpKind::Conv2DBackpropInput, {w.bf16, dy.bf16}, input_attrs},
          {OpKind::Conv2DBackpropFilter, {x.bf16, dy.bf16}, filter_attrs}};
      for (const auto& [op, in, attrs] : passes) {
        const ConvBf16Plan plan = conv_bf16_plan(op, g);
        seen.insert(plan);
        start_profiling();
        run_op(op, in, attrs);
        int widen = 0, bf16_products = 0, pair_convs = 0;
        for (const ProfileEvent& e : stop_profiling()) {
          widen += e.category == "bf16";
          bf16_products +=
              e.category == "gemm" && e.detail.find("bf16 packed") != std::string::npos;
          pair_convs += e.category == "conv" && e.detail.find(bf16_set + " ") == 0 &&
                        e.detail.find("on bf16 pairs") != std::string::npos;
        }
        const std::string what = std::string(op_name(op)) + " " + describe_conv_case(c) + " on " +
                                 f32_set + " / " + bf16_set;
        EXPECT_EQ(widen > 0, plan == ConvBf16Plan::kWidenedDirect) << what;
        EXPECT_EQ(bf16_products > 0, plan == ConvBf16Plan::kIm2colBf16) << what;
        EXPECT_EQ(pair_convs, plan == ConvBf16Plan::kPairDirect ? 1 : 0) << what;
      }
    }
    if (bf16_set == "float32")
      EXPECT_EQ(seen,
                (std::set<ConvBf16Plan>{ConvBf16Plan::kIm2colBf16, ConvBf16Plan::kWidenedDirect}))
          << f32_set;
    else if (bf16_set.starts_with("avx512bf16"))
      EXPECT_EQ(seen,
                (std::set<ConvBf16Plan>{ConvBf16Plan::kIm2colBf16, ConvBf16Plan::kPairDirect}))
          << bf16_set;
    else
      EXPECT_EQ(seen, std::set<ConvBf16Plan>{ConvBf16Plan::kIm2colBf16}) << bf16_set;
  }
}

// A shallow window's forward pass and filter gradient run the direct kernels on widened
// operands on every kernel set (their products would fill a fraction of a pair kernel's tile);
// its input gradient and deeper windows' passes take bf16 im2col chunks on the pair kernels,
// but on the VDPBF16PS sets, where a deeper window's passes run the direct kernels on bf16
// pairs, unless the channels summed (or the pixels of an output line) are odd.
TEST(ConvBf16, ShallowWindowsRunDirectOnEveryKernelSet) {
  GemmSettingsGuard guard;
  const Attrs attrs = conv_window_attrs({{}, {}, {1, 1}, {1, 1}, "same"});
  const ConvGeom shallow = conv_geom(Shape{3, 20, 20, 3}, Shape{3, 3, 3, 16}, attrs, "test");
  const ConvGeom deep = conv_geom(Shape{2, 14, 14, 16}, Shape{3, 3, 16, 32}, attrs, "test");
  const ConvGeom odd = conv_geom(Shape{2, 15, 15, 17}, Shape{3, 3, 17, 31}, attrs, "test");
  ASSERT_TRUE(shallow.shallow());
  ASSERT_FALSE(deep.shallow());
  ASSERT_FALSE(odd.shallow());
  for (const auto& [f32_set, bf16_set] : bf16_conv_kernel_sets()) {
    set_gemm_kernels(f32_set);
    set_gemm_bf16_kernels(bf16_set);
    const std::string where = f32_set + " / " + bf16_set;
    EXPECT_EQ(conv_bf16_plan(OpKind::Conv2D, shallow), ConvBf16Plan::kWidenedDirect) << where;
    EXPECT_EQ(conv_bf16_plan(OpKind::Conv2DBackpropFilter, shallow), ConvBf16Plan::kWidenedDirect)
        << where;
    if (bf16_set != "float32") {
      EXPECT_EQ(conv_bf16_plan(OpKind::Conv2DBackpropInput, shallow), ConvBf16Plan::kIm2colBf16)
          << where;
      const ConvBf16Plan direct = bf16_set.starts_with("avx512bf16") ? ConvBf16Plan::kPairDirect
                                                                     : ConvBf16Plan::kIm2colBf16;
      for (OpKind op :
           {OpKind::Conv2D, OpKind::Conv2DBackpropInput, OpKind::Conv2DBackpropFilter}) {
        EXPECT_EQ(conv_bf16_plan(op, deep), direct) << where;
        EXPECT_EQ(conv_bf16_plan(op, odd), ConvBf16Plan::kIm2colBf16) << where;
      }
    }
  }
}

// The pair passes (conv_direct.h) refuse, with a kiln::Error naming the pass, what they do not
// take: any geometry without a VDPBF16PS set, an odd count of summed channels (forward: c;
// input gradient: o) or of pixels per output line (filter gradient) with one.
TEST(ConvBf16, PairPassesRefuseWhatTheyDoNotTake) {
  GemmSettingsGuard guard;
  const Attrs attrs = conv_window_attrs({{}, {}, {1, 1}, {1, 1}, "same"});
  const ConvGeom even = conv_geom(Shape{2, 14, 14, 16}, Shape{3, 3, 16, 32}, attrs, "test");
  const ConvGeom odd = conv_geom(Shape{2, 15, 15, 17}, Shape{3, 3, 17, 31}, attrs, "test");
  std::vector<bfloat16> x(size_t(2 * 15 * 15 * 32)), w(size_t(3 * 3 * 32 * 32)),
      dy(size_t(2 * 15 * 15 * 32));
  std::vector<float> out(size_t(2 * 15 * 15 * 32 * 4));
  auto refused = [&](const ConvGeom& g, const std::string& where) {
    EXPECT_FALSE(direct_conv_forward_pairs_applies(g)) << where;
    EXPECT_FALSE(direct_conv_backprop_input_pairs_applies(g)) << where;
    EXPECT_FALSE(direct_conv_backprop_filter_pairs_applies(g)) << where;
    auto expect_error = [&](const char* pass, const std::function<void()>& call) {
      try {
        call();
        ADD_FAILURE() << pass << " ran " << where;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(pass), std::string::npos) << e.what();
      }
    };
    expect_error("direct_conv_forward_pairs",
                 [&] { direct_conv_forward_pairs(x.data(), w.data(), out.data(), g); });
    expect_error("direct_conv_backprop_input_pairs",
                 [&] { direct_conv_backprop_input_pairs(w.data(), dy.data(), out.data(), g); });
    expect_error("direct_conv_backprop_filter_pairs",
                 [&] { direct_conv_backprop_filter_pairs(x.data(), dy.data(), out.data(), g); });
  };
  set_gemm_bf16_kernels("float32");
  refused(even, "on the float32 kernels");
  for (const auto& [f32_set, bf16_set] : bf16_conv_kernel_sets()) {
    if (!bf16_set.starts_with("avx512bf16")) continue;
    set_gemm_kernels(f32_set);
    set_gemm_bf16_kernels(bf16_set);
    EXPECT_TRUE(direct_conv_forward_pairs_applies(even)) << bf16_set;
    refused(odd, "with odd channels and lines on " + bf16_set);
  }
}

// Empty operands give zeros (or an empty result), like the float32 kernels.
TEST(ConvBf16, EmptyOperandsGiveZeros) {
  const Attrs attrs{
      {"strides", IntList{1, 1}}, {"dilations", IntList{1, 1}}, {"padding", std::string("same")}};
  const Array x = Array::zeros(DType::bf16, Shape{2, 5, 5, 0});
  const Array w = Array::zeros(DType::bf16, Shape{3, 3, 0, 4});
  const Array in[] = {x, w};
  const Array y = run_op(OpKind::Conv2D, in, attrs);
  ASSERT_EQ(y.shape, (Shape{2, 5, 5, 4}));
  ASSERT_EQ(y.dtype, DType::bf16);
  for (uint16_t b : conv_bits(y)) EXPECT_EQ(b, 0u);
}

}  // namespace
}  // namespace kiln::runtime
