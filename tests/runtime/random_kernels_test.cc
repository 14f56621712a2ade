// Random kernels (random_uniform, random_normal, random_int) and the Philox-4x32-10 generator
// behind them: Random123's known-answer vectors, pinned golden values, statistics over 1e6
// samples, seed sensitivity, and independence from the thread count and the output shape.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/philox.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/layout_test_util.h"

namespace kiln::runtime {
namespace {

using layout_test::Index;

Array seed_array(int64_t seed) {
  Array a = Array::empty(DType::i64, {});
  a.data<int64_t>()[0] = seed;
  return a;
}

Array uniform(int64_t seed, const Shape& s, DType dt, double lo, double hi) {
  std::vector<Array> in = {seed_array(seed)};
  return run_op(OpKind::RandomUniform, in,
                {{"shape", s.to_vector()}, {"dtype", dt}, {"minval", lo}, {"maxval", hi}});
}

Array normal(int64_t seed, const Shape& s, DType dt, double mean, double stddev) {
  std::vector<Array> in = {seed_array(seed)};
  return run_op(OpKind::RandomNormal, in,
                {{"shape", s.to_vector()}, {"dtype", dt}, {"mean", mean}, {"stddev", stddev}});
}

Array randint(int64_t seed, const Shape& s, DType dt, int64_t lo, int64_t hi) {
  std::vector<Array> in = {seed_array(seed)};
  return run_op(OpKind::RandomInt, in,
                {{"shape", s.to_vector()}, {"dtype", dt}, {"minval", lo}, {"maxval", hi}});
}

using layout_test::values;

bool same_bytes(const Array& a, const Array& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

template <typename T>
void mean_var(const Array& a, double& mean, double& var) {
  double s = 0, s2 = 0;
  for (T v : values<T>(a)) {
    s += double(v);
    s2 += double(v) * double(v);
  }
  mean = s / double(a.size());
  var = s2 / double(a.size()) - mean * mean;
}

using layout_test::ThreadCount;

// ---------------------------------------------------------------- Philox

// Random123's kat_vectors for philox4x32 with 10 rounds (counter words, then key words).
TEST(Philox, KnownAnswerVectors) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (PhiloxCounter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (PhiloxCounter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5, "constexpr Philox");
}

TEST(Philox, BitConversionsStayInRange) {
  EXPECT_EQ(uniform_f32(0), 0.0f);
  EXPECT_LT(uniform_f32(0xffffffffu), 1.0f);
  EXPECT_GT(uniform_f32_open0(0), 0.0f);
  EXPECT_EQ(uniform_f32_open0(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform_f64(0), 0.0);
  EXPECT_LT(uniform_f64(~uint64_t{0}), 1.0);
  EXPECT_GT(uniform_f64_open0(0), 0.0);
  EXPECT_EQ(uniform_f64_open0(~uint64_t{0}), 1.0);
  EXPECT_EQ(bounded_u64(0, 10), 0u);
  EXPECT_EQ(bounded_u64(~uint64_t{0}, 10), 9u);
  EXPECT_EQ(bounded_u64(~uint64_t{0}, ~uint64_t{0}), ~uint64_t{0} - 1);
}

// ---------------------------------------------------------------- golden values

// Values of this implementation for fixed seeds: any change to the stream layout (block
// numbering, bit conversions, Box-Muller pairing) breaks saved experiments and must be
// deliberate.
TEST(RandomKernels, GoldenValues) {
  const std::vector<float> u = values<float>(uniform(42, {6}, DType::f32, 0, 1));
  const std::vector<float> want_u = {0x1.39d5ep-1f,  0x1.dfd524p-2f, 0x1.2bf5p-4f,
                                     0x1.5d0accp-2f, 0x1.f9b642p-1f, 0x1.4ee9bp-2f};
  EXPECT_EQ(u, want_u);
  const std::vector<double> n = values<double>(normal(42, {3}, DType::f64, 0, 1));
  const std::vector<double> want_n = {0.88649750590144105, 0.4393560694379266,
                                      -0.15660962291201724};
  for (size_t i = 0; i < n.size(); ++i) EXPECT_NEAR(n[i], want_n[i], 1e-12) << i;
  // f32 normals go through float libm calls: pinned to a few ulps, not bitwise.
  const std::vector<float> nf = values<float>(normal(42, {4}, DType::f32, 0, 1));
  const std::vector<float> want_nf = {-0.970189691f, 0.19401902f, -1.23562002f, 1.92392707f};
  for (size_t i = 0; i < nf.size(); ++i) EXPECT_NEAR(nf[i], want_nf[i], 1e-6) << i;
  const std::vector<int32_t> k = values<int32_t>(randint(42, {6}, DType::i32, -5, 5));
  EXPECT_EQ(k, (std::vector<int32_t>{1, -5, 4, 0, 3, 1}));
  // uniform f32 element 4b+k is the top 24 bits of Philox word k of block b.
  const PhiloxCounter w = philox_block(philox_key(42), 1);
  EXPECT_EQ(u[4], float(w[0] >> 8) * 0x1p-24f);
  EXPECT_EQ(u[5], float(w[1] >> 8) * 0x1p-24f);
}

// ---------------------------------------------------------------- statistics

TEST(RandomKernels, UniformStatistics) {
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Array a = uniform(7, {1000, 1000}, dt, 2.0, 5.0);
    double mean, var;
    if (dt == DType::f32) {
      for (float v : values<float>(a)) ASSERT_TRUE(v >= 2.0f && v < 5.0f) << v;
      mean_var<float>(a, mean, var);
    } else {
      for (double v : values<double>(a)) ASSERT_TRUE(v >= 2.0 && v < 5.0) << v;
      mean_var<double>(a, mean, var);
    }
    EXPECT_NEAR(mean, 3.5, 5e-3);  // standard error 8.7e-4
    EXPECT_NEAR(var, 0.75, 5e-3);  // standard error 5e-4
  }
}

TEST(RandomKernels, NormalStatistics) {
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Array a = normal(8, {1000001}, dt, 1.0, 2.0);  // odd size: half a pair at the end
    double mean, var;
    int64_t within = 0;
    auto check = [&](double v) {
      ASSERT_TRUE(std::isfinite(v));
      within += std::abs(v - 1.0) < 2.0;
    };
    if (dt == DType::f32) {
      for (float v : values<float>(a)) check(v);
      mean_var<float>(a, mean, var);
    } else {
      for (double v : values<double>(a)) check(v);
      mean_var<double>(a, mean, var);
    }
    EXPECT_NEAR(mean, 1.0, 1e-2);                                      // standard error 2e-3
    EXPECT_NEAR(var, 4.0, 3e-2);                                       // standard error 5.7e-3
    EXPECT_NEAR(double(within) / double(a.size()), 0.682689, 2.5e-3);  // one sigma
  }
}

TEST(RandomKernels, IntStatisticsAndRange) {
  for (DType dt : {DType::i32, DType::i64, DType::u8}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const int64_t lo = dt == DType::u8 ? 3 : -3, hi = lo + 10;
    Array a = randint(9, {1000000}, dt, lo, hi);
    std::map<int64_t, int64_t> counts;
    visit_dtype(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (T v : values<T>(a)) ++counts[int64_t(v)];
    });
    ASSERT_EQ(counts.size(), 10u);
    EXPECT_EQ(counts.begin()->first, lo);
    EXPECT_EQ(counts.rbegin()->first, hi - 1);
    for (const auto& [v, c] : counts) EXPECT_NEAR(double(c) / 1e6, 0.1, 2e-3) << v;  // se 3e-4
  }
  // Full int64 range and a range near the top of int32.
  Array b = randint(10, {1000}, DType::i64, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max());
  int64_t negative = 0;
  for (int64_t v : values<int64_t>(b)) negative += v < 0;
  EXPECT_GT(negative, 400);
  EXPECT_LT(negative, 600);
  for (int32_t v : values<int32_t>(randint(11, {1000}, DType::i32, 2147483640, 2147483648)))
    EXPECT_GE(v, 2147483640);
}

// ---------------------------------------------------------------- determinism

TEST(RandomKernels, SeedsDiffer) {
  const auto a = values<float>(uniform(1, {1000}, DType::f32, 0, 1));
  const auto b = values<float>(uniform(2, {1000}, DType::f32, 0, 1));
  const auto c = values<float>(uniform(-1, {1000}, DType::f32, 0, 1));
  const auto d = values<float>(uniform(int64_t{1} << 32, {1000}, DType::f32, 0, 1));
  int ab = 0, ac = 0, ad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] == b[i];
    ac += a[i] == c[i];
    ad += a[i] == d[i];
  }
  EXPECT_LT(ab, 5);
  EXPECT_LT(ac, 5);
  EXPECT_LT(ad, 5);
  EXPECT_EQ(a, values<float>(uniform(1, {1000}, DType::f32, 0, 1)));  // same seed, same values
}

// Element i depends on (seed, i) only: not on the shape, the size or the thread count.
TEST(RandomKernels, ValuesDependOnSeedAndIndexOnly) {
  for (DType dt : {DType::f32, DType::f64}) {
    Array big = normal(5, {1003, 7}, dt, 0, 1);
    Array flat = normal(5, {7021}, dt, 0, 1);
    EXPECT_TRUE(std::memcmp(big.raw(), flat.raw(), big.nbytes()) == 0);
    Array prefix = normal(5, {13}, dt, 0, 1);
    EXPECT_TRUE(std::memcmp(big.raw(), prefix.raw(), prefix.nbytes()) == 0);
  }
  Array small = randint(5, {5}, DType::i64, 0, 1000);
  Array large = randint(5, {50001}, DType::i64, 0, 1000);
  EXPECT_TRUE(std::memcmp(small.raw(), large.raw(), small.nbytes()) == 0);
}

TEST(RandomKernels, SameOnOneAndTwoThreads) {
  struct Run {
    const char* name;
    std::function<Array()> fn;
  };
  const std::vector<Run> runs = {
      {"uniform f32", [] { return uniform(3, {1000003}, DType::f32, -1, 1); }},
      {"uniform f64", [] { return uniform(3, {1000003}, DType::f64, -1, 1); }},
      {"normal f32", [] { return normal(3, {1000003}, DType::f32, 0, 1); }},
      {"normal f64", [] { return normal(3, {1000003}, DType::f64, 0, 1); }},
      {"int i32", [] { return randint(3, {1000003}, DType::i32, -100, 100); }},
      {"int u8", [] { return randint(3, {1000003}, DType::u8, 0, 256); }},
  };
  for (const Run& r : runs) {
    SCOPED_TRACE(r.name);
    Array one, two;
    {
      ThreadCount t(1);
      one = r.fn();
    }
    {
      ThreadCount t(2);
      two = r.fn();
    }
    EXPECT_TRUE(same_bytes(one, two));
  }
}

// ---------------------------------------------------------------- errors

TEST(RandomKernels, BadRangesThrow) {
  EXPECT_THROW(randint(1, {3}, DType::i32, 0, int64_t{1} << 40), Error);
  EXPECT_THROW(randint(1, {3}, DType::u8, -1, 10), Error);
  EXPECT_THROW(randint(1, {3}, DType::u8, 0, 257), Error);
  EXPECT_NO_THROW(randint(1, {3}, DType::u8, 0, 256));
  EXPECT_THROW(randint(1, {3}, DType::i32, 5, 5), Error);
  EXPECT_THROW(uniform(1, {3}, DType::f32, 1.0, 1.0), Error);
  EXPECT_THROW(uniform(1, {3}, DType::f32, 1.0, 1.0 + 1e-12), Error);  // one float32 value
  EXPECT_NO_THROW(uniform(1, {3}, DType::f64, 1.0, 1.0 + 1e-12));
  EXPECT_THROW(uniform(1, {3}, DType::f64, 0.0, INFINITY), Error);
  EXPECT_THROW(normal(1, {3}, DType::f32, 0.0, -1.0), Error);
  EXPECT_THROW(uniform(1, {3}, DType::i32, 0.0, 1.0), Error);
}

TEST(RandomKernels, EmptyShapeAndScalar) {
  EXPECT_EQ(uniform(1, {0, 5}, DType::f32, 0, 1).size(), 0);
  Array s = normal(1, {}, DType::f64, 0, 1);
  EXPECT_EQ(s.shape, Shape());
  EXPECT_EQ(s.data<double>()[0], normal(1, {4}, DType::f64, 0, 1).data<double>()[0]);
}

}  // namespace
}  // namespace kiln::runtime
