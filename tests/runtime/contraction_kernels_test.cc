// Eager contraction kernels (matmul, conv2d and its two backprops) through
// kiln::runtime::run_op, against naive reference loops written here; conv backprops also
// against the adjoint identity in float64; bitwise determinism across thread counts for the
// parallel GEMM and the conv filter gradient (pooling: pool_kernels_test.cc). Fixed seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/contraction_test_util.h"

namespace kiln::runtime {
namespace {

using contraction_test::as_double;
using contraction_test::bitwise_equal;
using contraction_test::dot;
using contraction_test::expect_close;
using contraction_test::Ints;
using contraction_test::random_array;
using contraction_test::tf_window;

// Restores kiln's thread count at scope exit.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(num_threads()) {}
  ~ThreadCountGuard() { set_num_threads(saved_); }

 private:
  int saved_;
};

// ---------------------------------------------------------------- matmul

Attrs matmul_attrs(bool ta, bool tb) { return Attrs{{"transpose_a", ta}, {"transpose_b", tb}}; }

Array matmul(const Array& a, const Array& b, bool ta = false, bool tb = false) {
  const Array in[] = {a, b};
  return run_op(OpKind::MatMul, in, matmul_attrs(ta, tb));
}

// Naive batched matmul with numpy broadcasting of the batch axes, in double.
std::vector<double> matmul_ref(const Array& a, const Array& b, bool ta, bool tb, const Shape& out) {
  const std::vector<double> av = as_double(a), bv = as_double(b);
  const Shape &as = a.shape, &bs = b.shape;
  const int64_t m = out.dim(-2), n = out.dim(-1), k = ta ? as.dim(-2) : as.dim(-1);
  const int rb = out.rank() - 2;
  int64_t batch = 1;
  for (int i = 0; i < rb; ++i) batch *= out[i];
  auto offset = [&](const Shape& s, int64_t e) {  // matrix index in s for output entry e
    int64_t off = 0, stride = 1;
    for (int i = rb - 1; i >= 0; --i) {
      int64_t idx = e % out[i];
      e /= out[i];
      int si = i - (rb - (s.rank() - 2));
      if (si < 0) continue;
      if (s[si] != 1) off += idx * stride;
      stride *= s[si];
    }
    return off;
  };
  std::vector<double> c(size_t(batch * m * n));
  for (int64_t e = 0; e < batch; ++e) {
    const double* pa = av.data() + offset(as, e) * as.dim(-2) * as.dim(-1);
    const double* pb = bv.data() + offset(bs, e) * bs.dim(-2) * bs.dim(-1);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (ta ? pa[p * m + i] : pa[i * k + p]) * (tb ? pb[j * k + p] : pb[p * n + j]);
        c[size_t((e * m + i) * n + j)] = s;
      }
  }
  return c;
}

Shape stored(const Shape& batch, int64_t rows, int64_t cols, bool transposed) {
  Shape s = batch;
  s.push_back(transposed ? cols : rows);
  s.push_back(transposed ? rows : cols);
  return s;
}

void check_matmul(DType dt, const Shape& batch_a, const Shape& batch_b, int64_t m, int64_t k,
                  int64_t n, bool ta, bool tb, double tol, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Array a = random_array(dt, stored(batch_a, m, k, ta), rng);
  Array b = random_array(dt, stored(batch_b, k, n, tb), rng);
  Array c = matmul(a, b, ta, tb);
  std::string what = "matmul " + a.shape.to_string() + " x " + b.shape.to_string() +
                     " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
  EXPECT_EQ(c.shape.dim(-2), m) << what;
  EXPECT_EQ(c.shape.dim(-1), n) << what;
  expect_close(c, matmul_ref(a, b, ta, tb, c.shape), tol, what);
}

TEST(MatMulKernelTest, AllTransposeCombinationsNonSquare) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_matmul(DType::f64, {}, {}, 7, 5, 3, ta, tb, 1e-13, 1);
      check_matmul(DType::f64, {}, {}, 67, 45, 89, ta, tb, 1e-13, 2);
      check_matmul(DType::f32, {}, {}, 33, 130, 17, ta, tb, 1e-5, 3);
    }
}

TEST(MatMulKernelTest, SizeOne) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_matmul(DType::f32, {}, {}, 1, 1, 1, ta, tb, 1e-6, 4);
      check_matmul(DType::f64, {}, {}, 1, 300, 1, ta, tb, 1e-13, 5);  // dot product
      check_matmul(DType::f64, {}, {}, 40, 1, 30, ta, tb, 1e-13, 6);  // outer product
      check_matmul(DType::f64, {}, {}, 1, 50, 70, ta, tb, 1e-13, 7);  // vector x matrix
      check_matmul(DType::f64, {}, {}, 70, 50, 1, ta, tb, 1e-13, 8);  // matrix x vector
    }
}

TEST(MatMulKernelTest, ZeroSized) {
  std::mt19937_64 rng(9);
  // k == 0: the empty sum is zero.
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Array c = matmul(random_array(DType::f32, stored({}, 3, 0, ta), rng),
                       random_array(DType::f32, stored({}, 0, 4, tb), rng), ta, tb);
      ASSERT_EQ(c.shape, (Shape{3, 4}));
      for (double v : as_double(c)) EXPECT_EQ(v, 0.0);
    }
  Array ci =
      matmul(random_array(DType::i32, {2, 3, 0}, rng), random_array(DType::i32, {0, 5}, rng));
  ASSERT_EQ(ci.shape, (Shape{2, 3, 5}));
  for (double v : as_double(ci)) EXPECT_EQ(v, 0.0);
  // m == 0, n == 0, empty batch.
  EXPECT_EQ(
      matmul(random_array(DType::f32, {0, 4}, rng), random_array(DType::f32, {4, 5}, rng)).shape,
      (Shape{0, 5}));
  EXPECT_EQ(
      matmul(random_array(DType::f32, {3, 4}, rng), random_array(DType::f32, {4, 0}, rng)).shape,
      (Shape{3, 0}));
  EXPECT_EQ(
      matmul(random_array(DType::f64, {0, 3, 4}, rng), random_array(DType::f64, {4, 5}, rng)).shape,
      (Shape{0, 3, 5}));
}

TEST(MatMulKernelTest, BatchedWithBroadcasting) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_matmul(DType::f64, {2, 1, 3}, {4, 1}, 5, 6, 7, ta, tb, 1e-13, 10);
      check_matmul(DType::f64, {3}, {}, 5, 6, 7, ta, tb, 1e-13, 11);  // b shared
      check_matmul(DType::f64, {}, {3}, 5, 6, 7, ta, tb, 1e-13, 12);  // a shared
      check_matmul(DType::f32, {1, 4}, {3, 1}, 9, 33, 20, ta, tb, 1e-5, 13);
      check_matmul(DType::f32, {2, 3}, {2, 3}, 70, 60, 80, ta, tb, 1e-5, 14);
    }
  // Many small products (parallel over entries) and few large ones (parallel inside).
  check_matmul(DType::f32, {64}, {64}, 16, 24, 16, false, true, 1e-5, 15);
  check_matmul(DType::f32, {2}, {1}, 200, 150, 180, true, false, 1e-5, 16);
}

TEST(MatMulKernelTest, LargeEnoughToRunInParallel) {
  ThreadCountGuard guard;
  set_num_threads(2);
  ASSERT_GT(gemm_tasks<float>(300, 250, 200), 1);
  ASSERT_GT(gemm_tasks<double>(64, 256, 784), 1);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_matmul(DType::f32, {}, {}, 300, 200, 250, ta, tb, 1e-5, 20);
      check_matmul(DType::f64, {}, {}, 64, 784, 256, ta, tb, 1e-13, 21);
    }
  check_matmul(DType::f64, {3}, {}, 200, 100, 300, false, false, 1e-13, 22);  // merged rows
}

TEST(MatMulKernelTest, Integers) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_matmul(DType::i32, {}, {}, 13, 7, 9, ta, tb, 0, 30);
      check_matmul(DType::i32, {2, 1}, {3}, 40, 70, 50, ta, tb, 0, 31);
      check_matmul(DType::i64, {}, {}, 200, 90, 130, ta, tb, 0, 32);
    }
  // uint8 wraps modulo 256, like numpy.
  std::mt19937_64 rng(33);
  Array a = random_array(DType::u8, {5, 40}, rng), b = random_array(DType::u8, {40, 6}, rng);
  Array c = matmul(a, b);
  std::vector<double> want = matmul_ref(a, b, false, false, c.shape);
  for (double& w : want) w = double(uint64_t(w) % 256);
  expect_close(c, want, 0, "uint8 matmul");
}

TEST(MatMulKernelTest, BadInputThrows) {
  std::mt19937_64 rng(34);
  Array a = random_array(DType::f32, {3, 4}, rng), b = random_array(DType::f32, {5, 6}, rng);
  EXPECT_THROW(matmul(a, b), Error);
  EXPECT_THROW(matmul(a, random_array(DType::f64, {4, 6}, rng)), Error);
  EXPECT_THROW(
      matmul(random_array(DType::f32, {2, 3, 4}, rng), random_array(DType::f32, {3, 4, 5}, rng)),
      Error);
  float x = 0;
  EXPECT_THROW(gemm<float>(false, false, 2, 2, 2, &x, 1, &x, 2, &x, 2), Error);  // lda < k
}

TEST(MatMulKernelTest, BitwiseIdenticalOnOneAndTwoThreads) {
  ThreadCountGuard guard;
  std::mt19937_64 rng(40);
  Array a = random_array(DType::f32, {515, 384}, rng),
        b = random_array(DType::f32, {384, 641}, rng);
  Array at = random_array(DType::f32, {384, 515}, rng),
        bt = random_array(DType::f32, {641, 384}, rng);
  Array ab = random_array(DType::f32, {6, 96, 200}, rng),
        bb = random_array(DType::f32, {6, 200, 90}, rng);
  set_num_threads(2);
  ASSERT_GT(gemm_tasks<float>(515, 641, 384), 1);
  set_num_threads(1);
  Array c1 = matmul(a, b), d1 = matmul(at, bt, true, true), e1 = matmul(ab, bb);
  set_num_threads(2);
  Array c2 = matmul(a, b), d2 = matmul(at, bt, true, true), e2 = matmul(ab, bb);
  EXPECT_TRUE(bitwise_equal(c1, c2));
  EXPECT_TRUE(bitwise_equal(d1, d2));
  EXPECT_TRUE(bitwise_equal(e1, e2));
}

// ---------------------------------------------------------------- conv2d

struct ConvCase {
  Ints input;   // NHWC
  Ints filter;  // HWIO
  Ints strides, dilations;
  std::string padding;
};

Attrs conv_attrs(const ConvCase& c) {
  return Attrs{{"strides", c.strides}, {"dilations", c.dilations}, {"padding", c.padding}};
}

std::string describe(const ConvCase& c) {
  return "conv input " + Shape(c.input).to_string() + " filter " + Shape(c.filter).to_string() +
         " strides " + std::to_string(c.strides[0]) + "," + std::to_string(c.strides[1]) +
         " dilations " + std::to_string(c.dilations[0]) + "," + std::to_string(c.dilations[1]) +
         " " + c.padding;
}

struct ConvRef {
  int64_t N, H, W, C, KH, KW, O, OH, OW, sh, sw, dh, dw, ph, pw;
  explicit ConvRef(const ConvCase& c)
      : N(c.input[0]),
        H(c.input[1]),
        W(c.input[2]),
        C(c.input[3]),
        KH(c.filter[0]),
        KW(c.filter[1]),
        O(c.filter[3]),
        sh(c.strides[0]),
        sw(c.strides[1]),
        dh(c.dilations[0]),
        dw(c.dilations[1]) {
    tf_window(H, KH, sh, dh, c.padding, OH, ph);
    tf_window(W, KW, sw, dw, c.padding, OW, pw);
  }
  // Calls fn(x_index, w_index, y_index) for every multiply of the convolution.
  template <typename F>
  void each(F&& fn) const {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x)
          for (int64_t i = 0; i < KH; ++i)
            for (int64_t j = 0; j < KW; ++j) {
              int64_t iy = y * sh - ph + i * dh, ix = x * sw - pw + j * dw;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              for (int64_t c = 0; c < C; ++c)
                for (int64_t o = 0; o < O; ++o)
                  fn(((n * H + iy) * W + ix) * C + c, ((i * KW + j) * C + c) * O + o,
                     ((n * OH + y) * OW + x) * O + o);
            }
  }
};

Array conv2d(const Array& x, const Array& w, const ConvCase& c) {
  const Array in[] = {x, w};
  return run_op(OpKind::Conv2D, in, conv_attrs(c));
}
Array conv2d_backprop_input(const Array& w, const Array& g, const ConvCase& c) {
  Attrs attrs = conv_attrs(c);
  attrs.set("input_shape", c.input);
  const Array in[] = {w, g};
  return run_op(OpKind::Conv2DBackpropInput, in, attrs);
}
Array conv2d_backprop_filter(const Array& x, const Array& g, const ConvCase& c) {
  Attrs attrs = conv_attrs(c);
  attrs.set("filter_shape", c.filter);
  const Array in[] = {x, g};
  return run_op(OpKind::Conv2DBackpropFilter, in, attrs);
}

void check_conv(const ConvCase& cc, DType dt, double tol, uint64_t seed) {
  const std::string what = describe(cc) + " " + std::string(dtype_name(dt));
  std::mt19937_64 rng(seed);
  ConvRef r(cc);
  Array x = random_array(dt, Shape(cc.input), rng), w = random_array(dt, Shape(cc.filter), rng);
  Array g = random_array(dt, Shape{r.N, r.OH, r.OW, r.O}, rng);
  const std::vector<double> xv = as_double(x), wv = as_double(w), gv = as_double(g);

  std::vector<double> y_ref(size_t(r.N * r.OH * r.OW * r.O)), dx_ref(xv.size()), dw_ref(wv.size());
  r.each([&](int64_t xi, int64_t wi, int64_t yi) {
    y_ref[size_t(yi)] += xv[size_t(xi)] * wv[size_t(wi)];
    dx_ref[size_t(xi)] += gv[size_t(yi)] * wv[size_t(wi)];
    dw_ref[size_t(wi)] += gv[size_t(yi)] * xv[size_t(xi)];
  });

  Array y = conv2d(x, w, cc);
  ASSERT_EQ(y.shape, (Shape{r.N, r.OH, r.OW, r.O})) << what;
  expect_close(y, y_ref, tol, what + " forward");
  Array dx = conv2d_backprop_input(w, g, cc);
  ASSERT_EQ(dx.shape, Shape(cc.input)) << what;
  expect_close(dx, dx_ref, tol, what + " backprop_input");
  Array dw = conv2d_backprop_filter(x, g, cc);
  ASSERT_EQ(dw.shape, Shape(cc.filter)) << what;
  expect_close(dw, dw_ref, tol, what + " backprop_filter");

  if (dt == DType::f64) {
    // Adjoint identity: <conv(x, w), g> = <x, backprop_input(w, g)> = <w, backprop_filter(x, g)>.
    const double lhs = dot(as_double(y), gv);
    const double s = std::max(1.0, std::abs(lhs));
    EXPECT_NEAR(dot(xv, as_double(dx)), lhs, 1e-12 * s) << what;
    EXPECT_NEAR(dot(wv, as_double(dw)), lhs, 1e-12 * s) << what;
  }
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{1, 5, 5, 1}, {3, 3, 1, 1}, {1, 1}, {1, 1}, "same"},
      {{1, 5, 5, 1}, {3, 3, 1, 1}, {1, 1}, {1, 1}, "valid"},
      {{2, 7, 8, 3}, {3, 3, 3, 4}, {1, 1}, {1, 1}, "same"},
      {{2, 7, 8, 3}, {3, 3, 3, 4}, {1, 1}, {1, 1}, "valid"},
      {{2, 7, 8, 3}, {3, 3, 3, 4}, {2, 2}, {1, 1}, "same"},
      {{2, 7, 8, 3}, {3, 3, 3, 4}, {2, 2}, {1, 1}, "valid"},
      {{2, 8, 7, 3}, {2, 2, 3, 5}, {2, 2}, {1, 1}, "same"},  // even window: pad after
      {{2, 9, 10, 2}, {3, 3, 2, 3}, {1, 1}, {2, 2}, "same"},
      {{2, 9, 10, 2}, {3, 3, 2, 3}, {1, 1}, {2, 2}, "valid"},
      {{1, 11, 9, 2}, {3, 2, 2, 3}, {2, 1}, {2, 3}, "same"},
      {{2, 6, 9, 3}, {2, 3, 3, 2}, {1, 2}, {1, 1}, "same"},  // non-square kernels
      {{2, 6, 9, 3}, {1, 3, 3, 2}, {1, 1}, {1, 1}, "valid"},
      {{2, 6, 9, 3}, {3, 1, 3, 2}, {2, 1}, {1, 1}, "same"},
      {{2, 4, 5, 3}, {4, 5, 3, 2}, {1, 1}, {1, 1}, "valid"},        // window = image
      {{1, 3, 3, 2}, {5, 5, 2, 2}, {1, 1}, {1, 1}, "same"},         // window > image
      {{3, 5, 6, 4}, {1, 1, 4, 5}, {1, 1}, {1, 1}, "same"},         // pointwise: plain GEMM
      {{3, 5, 6, 4}, {1, 1, 4, 5}, {2, 2}, {1, 1}, "valid"},        // strided 1x1
      {{2, 16, 16, 64}, {3, 3, 64, 8}, {1, 1}, {1, 1}, "same"},     // several im2col chunks
      {{1, 24, 24, 40}, {3, 3, 40, 6}, {1, 1}, {1, 1}, "same"},     // one image, several chunks
      {{4, 16, 16, 32}, {3, 3, 32, 32}, {1, 1}, {1, 1}, "same"},    // filter-gradient partials
      {{16, 12, 12, 64}, {1, 1, 64, 64}, {1, 1}, {1, 1}, "valid"},  // pointwise partials
      // shallow windows (direct kernels, conv_shallow.h): several channel blocks and a partial
      // one, three channels with strides and dilations, the deepest window taken, the first
      // layer of kiln bench's CNN with its filter-gradient partials
      {{2, 9, 11, 1}, {3, 3, 1, 40}, {1, 1}, {1, 1}, "same"},
      {{2, 13, 12, 3}, {3, 3, 3, 20}, {2, 2}, {1, 1}, "same"},
      {{2, 13, 12, 3}, {3, 3, 3, 17}, {1, 2}, {2, 1}, "valid"},
      {{1, 8, 9, 2}, {4, 4, 2, 9}, {1, 1}, {1, 1}, "same"},  // K = 32
      {{1, 8, 9, 3}, {2, 5, 3, 16}, {3, 1}, {1, 2}, "same"},
      {{16, 28, 28, 1}, {3, 3, 1, 16}, {1, 1}, {1, 1}, "same"},
      // the input gradient's col2im summing a vector of channels at a time (C >= 16): a
      // partial vector, vertical strides, a window larger than the padding, images in groups
      {{2, 9, 10, 20}, {3, 3, 20, 6}, {2, 1}, {1, 1}, "same"},
      {{1, 7, 9, 16}, {2, 3, 16, 4}, {1, 1}, {1, 1}, "valid"},
      {{3, 6, 7, 32}, {5, 5, 32, 3}, {1, 1}, {1, 1}, "same"},
      {{9, 5, 5, 16}, {3, 3, 16, 8}, {1, 1}, {1, 1}, "same"},
  };
  return cases;
}

TEST(ConvKernelTest, Float64AgainstNaiveAndAdjoint) {
  uint64_t seed = 100;
  for (const ConvCase& c : conv_cases()) check_conv(c, DType::f64, 1e-12, seed++);
}

TEST(ConvKernelTest, Float32AgainstNaive) {
  uint64_t seed = 200;
  for (const ConvCase& c : conv_cases()) check_conv(c, DType::f32, 2e-5, seed++);
}

TEST(ConvKernelTest, BadInputThrows) {
  std::mt19937_64 rng(300);
  ConvCase c{{1, 5, 5, 3}, {3, 3, 4, 2}, {1, 1}, {1, 1}, "same"};  // channels differ
  EXPECT_THROW(conv2d(random_array(DType::f32, Shape(c.input), rng),
                      random_array(DType::f32, Shape(c.filter), rng), c),
               Error);
  ConvCase v{{1, 2, 2, 1}, {3, 3, 1, 1}, {1, 1}, {1, 1}, "valid"};  // window does not fit
  EXPECT_THROW(conv2d(random_array(DType::f32, Shape(v.input), rng),
                      random_array(DType::f32, Shape(v.filter), rng), v),
               Error);
  ConvCase p{{1, 5, 5, 1}, {3, 3, 1, 1}, {1, 1}, {1, 1}, "full"};
  EXPECT_THROW(conv2d(random_array(DType::f32, Shape(p.input), rng),
                      random_array(DType::f32, Shape(p.filter), rng), p),
               Error);
  ConvCase s{{1, 5, 5, 1}, {3, 3, 1, 1}, {1, 1}, {1, 1}, "same"};  // wrong gradient shape
  EXPECT_THROW(conv2d_backprop_filter(random_array(DType::f32, Shape(s.input), rng),
                                      random_array(DType::f32, {1, 4, 5, 1}, rng), s),
               Error);
}

TEST(ConvKernelTest, BitwiseIdenticalOnOneAndTwoThreads) {
  ThreadCountGuard guard;
  std::mt19937_64 rng(400);
  // im2col + GEMM, then a shallow window (direct kernels) with filter-gradient partials
  for (ConvCase c : {ConvCase{{8, 16, 16, 32}, {3, 3, 32, 32}, {1, 1}, {1, 1}, "same"},
                     ConvCase{{16, 28, 28, 3}, {3, 3, 3, 20}, {1, 1}, {1, 1}, "same"}}) {
    Array x = random_array(DType::f32, Shape(c.input), rng);
    Array w = random_array(DType::f32, Shape(c.filter), rng);
    Array g = random_array(DType::f32, {c.input[0], c.input[1], c.input[2], c.filter[3]}, rng);
    set_num_threads(1);
    Array dw1 = conv2d_backprop_filter(x, g, c), y1 = conv2d(x, w, c);
    Array dx1 = conv2d_backprop_input(w, g, c);
    set_num_threads(2);
    Array dw2 = conv2d_backprop_filter(x, g, c), y2 = conv2d(x, w, c);
    Array dx2 = conv2d_backprop_input(w, g, c);
    EXPECT_TRUE(bitwise_equal(dw1, dw2)) << describe(c);
    EXPECT_TRUE(bitwise_equal(y1, y2)) << describe(c);
    EXPECT_TRUE(bitwise_equal(dx1, dx2)) << describe(c);
  }
}

}  // namespace
}  // namespace kiln::runtime
