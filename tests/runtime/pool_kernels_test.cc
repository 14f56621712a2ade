// Eager window kernels (max/avg pooling and their gradients) through kiln::runtime::run_op,
// against naive reference loops written here: float and integer dtypes, same/valid padding,
// gradients to the first maximum, bad input. Fixed seeds.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/kernels.h"
#include "tests/runtime/contraction_test_util.h"

namespace kiln::runtime {
namespace {

using contraction_test::as_double;
using contraction_test::expect_close;
using contraction_test::Ints;
using contraction_test::random_array;
using contraction_test::tf_window;

// ---------------------------------------------------------------- pooling

struct PoolCase {
  Ints input;  // NHWC
  Ints pool, strides;
  std::string padding;
};

Attrs pool_attrs(const PoolCase& p) {
  return Attrs{{"pool_size", p.pool}, {"strides", p.strides}, {"padding", p.padding}};
}

struct PoolRef {
  int64_t N, H, W, C, KH, KW, OH, OW, sh, sw, ph, pw;
  explicit PoolRef(const PoolCase& p)
      : N(p.input[0]),
        H(p.input[1]),
        W(p.input[2]),
        C(p.input[3]),
        KH(p.pool[0]),
        KW(p.pool[1]),
        sh(p.strides[0]),
        sw(p.strides[1]) {
    tf_window(H, KH, sh, 1, p.padding, OH, ph);
    tf_window(W, KW, sw, 1, p.padding, OW, pw);
  }
  // Valid input indices of the window of output element yi (row-major window order).
  std::vector<int64_t> window(int64_t n, int64_t y, int64_t x, int64_t c) const {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < KH; ++i)
      for (int64_t j = 0; j < KW; ++j) {
        int64_t iy = y * sh - ph + i, ix = x * sw - pw + j;
        if (iy >= 0 && iy < H && ix >= 0 && ix < W) v.push_back(((n * H + iy) * W + ix) * C + c);
      }
    return v;
  }
  template <typename F>
  void each_output(F&& fn) const {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x)
          for (int64_t c = 0; c < C; ++c) fn(((n * OH + y) * OW + x) * C + c, window(n, y, x, c));
  }
};

void check_pool(const PoolCase& p, DType dt, bool with_grads, uint64_t seed) {
  const std::string what =
      "pool input " + Shape(p.input).to_string() + " window " + std::to_string(p.pool[0]) + "x" +
      std::to_string(p.pool[1]) + " strides " + std::to_string(p.strides[0]) + "," +
      std::to_string(p.strides[1]) + " " + p.padding + " " + std::string(dtype_name(dt));
  std::mt19937_64 rng(seed);
  PoolRef r(p);
  Array x = random_array(dt, Shape(p.input), rng);
  if (seed % 2 == 0 && is_floating(dt)) {  // coarse values make ties in some windows
    visit_dtype(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_floating_point_v<T>)
        for (int64_t i = 0; i < x.size(); ++i) x.data<T>()[i] = std::round(x.data<T>()[i] * 2);
    });
  }
  const std::vector<double> xv = as_double(x);
  const Shape out{r.N, r.OH, r.OW, r.C};
  std::vector<double> max_ref(size_t(out.num_elements())), avg_ref(max_ref.size());
  std::vector<int64_t> argmax(max_ref.size());
  r.each_output([&](int64_t o, const std::vector<int64_t>& win) {
    double m = xv[size_t(win[0])], s = 0;
    int64_t at = win[0];
    for (int64_t i : win) {
      if (xv[size_t(i)] > m) m = xv[size_t(i)], at = i;
      s += xv[size_t(i)];
    }
    max_ref[size_t(o)] = m;
    argmax[size_t(o)] = at;
    avg_ref[size_t(o)] = s / double(win.size());
  });

  const Array in[] = {x};
  Array mx = run_op(OpKind::MaxPool2D, in, pool_attrs(p));
  ASSERT_EQ(mx.shape, out) << what;
  expect_close(mx, max_ref, 0, what + " max");
  if (!is_floating(dt)) return;
  const double tol = dt == DType::f64 ? 1e-14 : 1e-6;
  Array av = run_op(OpKind::AvgPool2D, in, pool_attrs(p));
  ASSERT_EQ(av.shape, out) << what;
  expect_close(av, avg_ref, tol, what + " avg");
  if (!with_grads) return;

  Array g = random_array(dt, out, rng);
  const std::vector<double> gv = as_double(g);
  std::vector<double> dmax_ref(xv.size()), davg_ref(xv.size());
  r.each_output([&](int64_t o, const std::vector<int64_t>& win) {
    dmax_ref[size_t(argmax[size_t(o)])] += gv[size_t(o)];
    for (int64_t i : win) davg_ref[size_t(i)] += gv[size_t(o)] / double(win.size());
  });
  const Array max_in[] = {x, g};
  Array dmax = run_op(OpKind::MaxPool2DGrad, max_in, pool_attrs(p));
  ASSERT_EQ(dmax.shape, Shape(p.input)) << what;
  expect_close(dmax, dmax_ref, tol, what + " max grad");
  Attrs avg_attrs = pool_attrs(p);
  avg_attrs.set("input_shape", p.input);
  const Array avg_in[] = {g};
  Array davg = run_op(OpKind::AvgPool2DGrad, avg_in, avg_attrs);
  ASSERT_EQ(davg.shape, Shape(p.input)) << what;
  expect_close(davg, davg_ref, tol, what + " avg grad");
}

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {{2, 6, 6, 3}, {2, 2}, {2, 2}, "valid"},
      {{2, 6, 6, 3}, {2, 2}, {2, 2}, "same"},
      {{2, 7, 8, 3}, {3, 3}, {2, 2}, "same"},
      {{2, 7, 8, 3}, {3, 3}, {2, 2}, "valid"},
      {{1, 7, 8, 5}, {3, 3}, {1, 1}, "same"},
      {{1, 7, 8, 5}, {3, 3}, {1, 1}, "valid"},
      {{2, 9, 7, 2}, {2, 3}, {1, 2}, "valid"},
      {{2, 9, 7, 2}, {3, 2}, {2, 3}, "same"},
      {{1, 5, 5, 1}, {5, 5}, {1, 1}, "same"},
      {{1, 3, 4, 2}, {4, 4}, {3, 3}, "same"},
      {{4, 32, 32, 16}, {3, 3}, {2, 2}, "same"},  // several parallel chunks
      // Non-overlapping windows (the gradient's row-parallel path): more channels than one
      // channel block and an uncovered last row; strides above the window (uncovered rows
      // and columns between windows); many rows.
      {{2, 7, 7, 70}, {2, 2}, {2, 2}, "valid"},
      {{2, 9, 10, 3}, {2, 2}, {3, 3}, "valid"},
      {{2, 9, 10, 3}, {2, 3}, {3, 3}, "same"},
      {{8, 28, 28, 16}, {2, 2}, {2, 2}, "valid"},
  };
  return cases;
}

TEST(PoolKernelTest, FloatAgainstNaive) {
  uint64_t seed = 500;
  for (const PoolCase& p : pool_cases()) {
    check_pool(p, DType::f64, true, seed++);
    check_pool(p, DType::f32, true, seed++);
  }
}

TEST(PoolKernelTest, IntegerMaxPool) {
  uint64_t seed = 600;
  for (const PoolCase& p : pool_cases()) {
    check_pool(p, DType::i32, false, seed++);
    check_pool(p, DType::u8, false, seed++);
  }
}

TEST(PoolKernelTest, SamePaddingAveragesValidElementsOnly) {
  // 3x3 image 1..9, 2x2 windows, stride 2, "same": no padding before, one row/column after.
  Array x = Array::empty(DType::f32, {1, 3, 3, 1});
  for (int i = 0; i < 9; ++i) x.data<float>()[i] = float(i + 1);
  const Array in[] = {x};
  Array av = run_op(OpKind::AvgPool2D, in, pool_attrs({{1, 3, 3, 1}, {2, 2}, {2, 2}, "same"}));
  ASSERT_EQ(av.shape, (Shape{1, 2, 2, 1}));
  EXPECT_EQ(as_double(av), (std::vector<double>{3, 4.5, 7.5, 9}));
  Array mx = run_op(OpKind::MaxPool2D, in, pool_attrs({{1, 3, 3, 1}, {2, 2}, {2, 2}, "same"}));
  EXPECT_EQ(as_double(mx), (std::vector<double>{5, 6, 8, 9}));
}

TEST(PoolKernelTest, MaxGradGoesToFirstMaximum) {
  PoolCase p{{1, 2, 4, 1}, {2, 2}, {2, 2}, "valid"};
  Array x = Array::zeros(DType::f64, Shape(p.input));  // every window is a tie
  Array g = Array::empty(DType::f64, {1, 1, 2, 1});
  g.data<double>()[0] = 1.5;
  g.data<double>()[1] = -2;
  const Array in[] = {x, g};
  Array dx = run_op(OpKind::MaxPool2DGrad, in, pool_attrs(p));
  EXPECT_EQ(as_double(dx), (std::vector<double>{1.5, 0, -2, 0, 0, 0, 0, 0}));
}

TEST(PoolKernelTest, BadInputThrows) {
  std::mt19937_64 rng(700);
  Array x = random_array(DType::f32, {1, 2, 2, 1}, rng);
  const Array in[] = {x};
  EXPECT_THROW(run_op(OpKind::MaxPool2D, in, pool_attrs({{}, {3, 3}, {1, 1}, "valid"})), Error);
  EXPECT_THROW(run_op(OpKind::AvgPool2D, in, pool_attrs({{}, {2, 2}, {0, 1}, "same"})), Error);
  Array g = random_array(DType::f32, {1, 2, 2, 1}, rng);
  const Array grad_in[] = {x, g};  // gradient shape does not match the 2x2/2 output
  EXPECT_THROW(run_op(OpKind::MaxPool2DGrad, grad_in, pool_attrs({{}, {2, 2}, {2, 2}, "same"})),
               Error);
}

}  // namespace
}  // namespace kiln::runtime
