// Neural-network ops against naive loops: matmul (transposes, batches, broadcast batches),
// conv2d (valid/same, strides, dilations; TensorFlow NHWC/HWIO semantics), max/avg pooling,
// and dropout's statistics and seeding.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/kiln.h"
#include "tests/frontend/op_test_util.h"

namespace kiln {
namespace {

using test::expect_tensor;
using test::for_each_index;
using test::rounded;

using Dims = std::vector<int64_t>;

// ---------------------------------------------------------------- matmul

struct Ref {
  Dims shape;
  std::vector<double> values;
};

// Naive batched matmul with numpy batch broadcasting; a and b hold their stored layout.
Ref ref_matmul(const std::vector<double>& a, const Dims& as, const std::vector<double>& b,
               const Dims& bs, bool ta, bool tb) {
  const size_t ra = as.size(), rb = bs.size();
  const int64_t m = ta ? as[ra - 1] : as[ra - 2], k = ta ? as[ra - 2] : as[ra - 1];
  const int64_t n = tb ? bs[rb - 2] : bs[rb - 1];
  Dims ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Dims batch = test::ref_broadcast_shape(ba, bb);
  Ref r;
  r.shape = batch;
  r.shape.push_back(m);
  r.shape.push_back(n);
  const int64_t a_mat = as[ra - 2] * as[ra - 1], b_mat = bs[rb - 2] * bs[rb - 1];
  for_each_index(batch, [&](int64_t, const Dims& idx) {
    const double* pa = a.data() + test::ref_broadcast_offset(ba, batch, idx) * a_mat;
    const double* pb = b.data() + test::ref_broadcast_offset(bb, batch, idx) * b_mat;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (ta ? pa[p * m + i] : pa[i * k + p]) * (tb ? pb[j * k + p] : pb[p * n + j]);
        r.values.push_back(s);
      }
  });
  return r;
}

void check_matmul(const Dims& as, const Dims& bs, bool ta, bool tb, DType dt) {
  SCOPED_TRACE(fmt::format("{} x {} ta={} tb={} {}", Shape(as).to_string(), Shape(bs).to_string(),
                           ta, tb, dtype_name(dt)));
  int64_t na = Shape(as).num_elements(), nb = Shape(bs).num_elements();
  std::vector<double> a, b;
  if (is_floating(dt)) {
    a = rounded(test::test_values(size_t(na), -1, 1, 21), dt);
    b = rounded(test::test_values(size_t(nb), -1, 1, 22), dt);
  } else {
    for (double v : test::test_values(size_t(na), -5, 5, 21)) a.push_back(std::floor(v));
    for (double v : test::test_values(size_t(nb), -5, 5, 22)) b.push_back(std::floor(v));
  }
  Ref r = ref_matmul(a, as, b, bs, ta, tb);
  double tol = dt == DType::f32 ? 1e-5 : (dt == DType::f64 ? 1e-12 : 0);
  expect_tensor(matmul(tensor(a, Shape(as), dt), tensor(b, Shape(bs), dt), ta, tb), dt,
                Shape(r.shape), r.values, tol, tol);
}

TEST(NnOps, MatmulTransposeFlags) {
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    check_matmul({3, 4}, {4, 5}, false, false, dt);
    check_matmul({4, 3}, {4, 5}, true, false, dt);
    check_matmul({3, 4}, {5, 4}, false, true, dt);
    check_matmul({4, 3}, {5, 4}, true, true, dt);
  }
  // Hand-computed.
  Tensor a = tensor({1.f, 2.f, 3.f, 4.f}, Shape{2, 2}),
         b = tensor({5.f, 6.f, 7.f, 8.f}, Shape{2, 2});
  expect_tensor(matmul(a, b), DType::f32, Shape{2, 2}, {19, 22, 43, 50});
  expect_tensor(matmul(a, b, true, false), DType::f32, Shape{2, 2}, {26, 30, 38, 44});
  expect_tensor(matmul(a, b, false, true), DType::f32, Shape{2, 2}, {17, 23, 39, 53});
}

TEST(NnOps, MatmulBatchedAndBroadcastBatches) {
  for (DType dt : {DType::f32, DType::f64}) {
    check_matmul({2, 3, 4}, {2, 4, 5}, false, false, dt);
    check_matmul({2, 4, 3}, {2, 5, 4}, true, true, dt);
    check_matmul({2, 1, 3, 4}, {5, 4, 6}, false, false, dt);
    check_matmul({3, 4}, {2, 4, 5}, false, false, dt);
    check_matmul({2, 3, 4}, {4, 5}, false, false, dt);
    check_matmul({1, 3, 4}, {3, 5, 4}, false, true, dt);
  }
  check_matmul({2, 3, 4}, {1, 4, 2}, false, false, DType::i32);
}

TEST(NnOps, MatmulShapesThatStressTheGemm) {
  // Sizes that are not multiples of any vector width, and one large enough for threads.
  check_matmul({67, 129}, {129, 33}, false, false, DType::f32);
  check_matmul({129, 67}, {33, 129}, true, true, DType::f32);
  check_matmul({1, 300}, {300, 1}, false, false, DType::f64);
  check_matmul({200, 150}, {150, 180}, false, false, DType::f64);
  // Empty dimensions: k = 0 gives zeros, m = 0 gives an empty result.
  expect_tensor(matmul(zeros({3, 0}), zeros({0, 4})), DType::f32, Shape{3, 4},
                std::vector<double>(12, 0.0));
  expect_tensor(matmul(zeros({0, 4}), ones({4, 5})), DType::f32, Shape{0, 5}, {});
}

// ---------------------------------------------------------------- conv2d

// Output size and padding before, TensorFlow semantics (independent of kiln's rule).
std::pair<int64_t, int64_t> ref_window(int64_t in, int64_t k, int64_t s, int64_t d, bool same) {
  int64_t eff = (k - 1) * d + 1;
  if (!same) return {(in - eff) / s + 1, 0};
  int64_t out = (in + s - 1) / s;
  int64_t total = std::max<int64_t>((out - 1) * s + eff - in, 0);
  return {out, total / 2};
}

Ref ref_conv2d(const std::vector<double>& x, const Dims& xs, const std::vector<double>& f,
               const Dims& fs, const Axes& strides, bool same, const Axes& dil) {
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3], KH = fs[0], KW = fs[1], O = fs[3];
  auto [oh, pt] = ref_window(H, KH, strides[0], dil[0], same);
  auto [ow, pl] = ref_window(W, KW, strides[1], dil[1], same);
  Ref r{{N, oh, ow, O}, {}};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx)
        for (int64_t o = 0; o < O; ++o) {
          double s = 0;
          for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx) {
              int64_t iy = y * strides[0] + ky * dil[0] - pt,
                      ix = xx * strides[1] + kx * dil[1] - pl;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              for (int64_t c = 0; c < C; ++c)
                s += x[size_t(((n * H + iy) * W + ix) * C + c)] *
                     f[size_t(((ky * KW + kx) * C + c) * O + o)];
            }
          r.values.push_back(s);
        }
  return r;
}

void check_conv(const Dims& xs, const Dims& fs, const Axes& strides, const std::string& padding,
                const Axes& dil, DType dt) {
  SCOPED_TRACE(fmt::format("input {} filter {} strides [{}] {} dilations [{}] {}",
                           Shape(xs).to_string(), Shape(fs).to_string(), fmt::join(strides, ", "),
                           padding, fmt::join(dil, ", "), dtype_name(dt)));
  std::vector<double> x =
      rounded(test::test_values(size_t(Shape(xs).num_elements()), -1, 1, 31), dt);
  std::vector<double> f =
      rounded(test::test_values(size_t(Shape(fs).num_elements()), -1, 1, 32), dt);
  Ref r = ref_conv2d(x, xs, f, fs, strides, padding == "same", dil);
  double tol = dt == DType::f32 ? 1e-5 : 1e-12;
  expect_tensor(conv2d(tensor(x, Shape(xs), dt), tensor(f, Shape(fs), dt), strides, padding, dil),
                dt, Shape(r.shape), r.values, tol, tol);
}

TEST(NnOps, Conv2dMatchesNaiveLoops) {
  for (DType dt : {DType::f32, DType::f64}) {
    check_conv({2, 7, 6, 3}, {3, 3, 3, 4}, {1, 1}, "valid", {1, 1}, dt);
    check_conv({2, 7, 6, 3}, {3, 3, 3, 4}, {1, 1}, "same", {1, 1}, dt);
    check_conv({2, 7, 6, 3}, {3, 3, 3, 4}, {2, 2}, "same", {1, 1}, dt);
    check_conv({2, 7, 6, 3}, {3, 3, 3, 4}, {2, 2}, "valid", {1, 1}, dt);
    check_conv({2, 7, 6, 3}, {3, 3, 3, 4}, {1, 1}, "same", {2, 2}, dt);
    check_conv({1, 8, 9, 2}, {2, 3, 2, 5}, {2, 1}, "valid", {1, 2}, dt);
    check_conv({1, 5, 5, 2}, {2, 2, 2, 1}, {1, 1}, "same", {1, 1}, dt);  // asymmetric padding
    check_conv({1, 6, 6, 3}, {4, 4, 3, 2}, {3, 3}, "same", {1, 1}, dt);
    check_conv({3, 4, 5, 6}, {1, 1, 6, 2}, {1, 1}, "valid", {1, 1}, dt);
    check_conv({1, 3, 3, 1}, {3, 3, 1, 1}, {1, 1}, "valid", {1, 1}, dt);
  }
  check_conv({2, 16, 16, 8}, {3, 3, 8, 16}, {1, 1}, "same", {1, 1}, DType::f32);
}

TEST(NnOps, Conv2dHandComputed) {
  // 3x3 image of 1..9, 2x2 filter of ones: window sums.
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, Shape{1, 3, 3, 1});
  Tensor f = ones({2, 2, 1, 1});
  expect_tensor(conv2d(x, f), DType::f32, Shape{1, 2, 2, 1}, {12, 16, 24, 28});
  // "same" with an even filter pads after (bottom/right), as TensorFlow does.
  expect_tensor(conv2d(x, f, {1, 1}, "same"), DType::f32, Shape{1, 3, 3, 1},
                {12, 16, 9, 24, 28, 15, 15, 17, 9});
}

// ---------------------------------------------------------------- pooling

Ref ref_pool(const std::vector<double>& x, const Dims& xs, const Axes& pool, const Axes& strides,
             bool same, bool is_max) {
  const int64_t N = xs[0], H = xs[1], W = xs[2], C = xs[3];
  auto [oh, pt] = ref_window(H, pool[0], strides[0], 1, same);
  auto [ow, pl] = ref_window(W, pool[1], strides[1], 1, same);
  Ref r{{N, oh, ow, C}, {}};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx)
        for (int64_t c = 0; c < C; ++c) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0;
          int count = 0;
          for (int64_t ky = 0; ky < pool[0]; ++ky)
            for (int64_t kx = 0; kx < pool[1]; ++kx) {
              int64_t iy = y * strides[0] + ky - pt, ix = xx * strides[1] + kx - pl;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              double v = x[size_t(((n * H + iy) * W + ix) * C + c)];
              acc = is_max ? std::max(acc, v) : acc + v;
              ++count;
            }
          r.values.push_back(is_max ? acc : acc / count);
        }
  return r;
}

TEST(NnOps, PoolingMatchesNaiveLoops) {
  struct Case {
    Dims xs;
    Axes pool, strides;
    const char* padding;
  };
  for (const Case& c : std::vector<Case>{{{2, 6, 6, 3}, {2, 2}, {}, "valid"},
                                         {{2, 7, 5, 3}, {2, 2}, {}, "valid"},
                                         {{2, 7, 5, 3}, {2, 2}, {}, "same"},
                                         {{1, 7, 7, 2}, {3, 3}, {2, 2}, "same"},
                                         {{1, 7, 7, 2}, {3, 3}, {1, 1}, "same"},
                                         {{1, 6, 8, 4}, {2, 3}, {1, 2}, "valid"},
                                         {{1, 5, 5, 1}, {5, 5}, {}, "valid"}}) {
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(fmt::format("input {} pool [{}] strides [{}] {} {}", Shape(c.xs).to_string(),
                               fmt::join(c.pool, ", "), fmt::join(c.strides, ", "), c.padding,
                               dtype_name(dt)));
      std::vector<double> x =
          rounded(test::test_values(size_t(Shape(c.xs).num_elements()), -3, 3, 41), dt);
      Axes st = c.strides.empty() ? c.pool : c.strides;
      bool same = std::string(c.padding) == "same";
      Tensor t = tensor(x, Shape(c.xs), dt);
      Ref mx = ref_pool(x, c.xs, c.pool, st, same, true);
      Ref av = ref_pool(x, c.xs, c.pool, st, same, false);
      expect_tensor(max_pool2d(t, c.pool, c.strides, c.padding), dt, Shape(mx.shape), mx.values, 0);
      expect_tensor(avg_pool2d(t, c.pool, c.strides, c.padding), dt, Shape(av.shape), av.values,
                    1e-6, 1e-6);
    }
  }
}

TEST(NnOps, PoolingHandComputed) {
  Tensor x = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, Shape{1, 3, 3, 1});
  expect_tensor(max_pool2d(x, {2, 2}), DType::f32, Shape{1, 1, 1, 1}, {5});
  expect_tensor(max_pool2d(x, {2, 2}, {1, 1}), DType::f32, Shape{1, 2, 2, 1}, {5, 6, 8, 9});
  // "same": edge windows average only the valid elements (padding is not counted).
  expect_tensor(avg_pool2d(x, {2, 2}, {}, "same"), DType::f32, Shape{1, 2, 2, 1}, {3, 4.5, 7.5, 9});
  expect_tensor(max_pool2d(tensor({3, -1, 7, 2}, Shape{1, 2, 2, 1}, DType::i32), {2, 2}),
                DType::i32, Shape{1, 1, 1, 1}, {7});
}

// ---------------------------------------------------------------- dropout

TEST(NnOps, DropoutRateZeroIsIdentity) {
  Tensor x = tensor(test::test_values(100, -1, 1, 3), Shape{10, 10}, DType::f32);
  Tensor y = dropout(x, 0.0, 7);
  EXPECT_TRUE(test::bitwise_equal(x, y));
}

TEST(NnOps, DropoutZeroesTheExpectedFractionAndScalesTheRest) {
  const int64_t n = 100'000;
  for (double rate : {0.1, 0.5, 0.8}) {
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(fmt::format("rate {} {}", rate, dtype_name(dt)));
      std::vector<double> xv = rounded(test::test_values(size_t(n), 0.5, 2, 9), dt);
      Tensor x = tensor(xv, Shape{n}, dt);
      std::vector<double> y = dropout(x, rate, 1234).to_vector<double>();
      const double scale = test::stored(1.0 / (1.0 - rate), dt);
      int64_t zeros = 0, bad = 0;
      for (size_t i = 0; i < size_t(n); ++i) {
        if (y[i] == 0) {
          ++zeros;
        } else {
          double want = test::stored(xv[i] * scale, dt);
          bad += std::fabs(y[i] - want) > 1e-6 * want;
        }
      }
      // Binomial std of the fraction is <= 0.0016; allow 6 sigma.
      EXPECT_NEAR(double(zeros) / double(n), rate, 0.01);
      EXPECT_EQ(bad, 0) << "kept values must be x / (1 - rate)";
    }
  }
}

TEST(NnOps, DropoutSeeds) {
  Tensor x = ones({10'000});
  std::vector<float> a = dropout(x, 0.5, 42).to_vector<float>();
  std::vector<float> b = dropout(x, 0.5, 42).to_vector<float>();
  std::vector<float> c = dropout(x, 0.5, 43).to_vector<float>();
  EXPECT_EQ(a, b) << "same seed, same mask";
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i];
  // Independent masks disagree on about half the elements.
  EXPECT_GT(differ, 4000);
  EXPECT_LT(differ, 6000);
  // The mask does not depend on the values, only on the seed and shape.
  std::vector<float> d = dropout(x * 3.0, 0.5, 42).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i] == 0, d[i] == 0) << i;
}

}  // namespace
}  // namespace kiln
