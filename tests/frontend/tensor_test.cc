// Tensor creation, element access and printing, and seeded random creation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "kiln/kiln.h"
#include "tests/frontend/op_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using test::expect_tensor;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- creation

TEST(Tensor, ZerosOnesFull) {
  expect_tensor(zeros({2, 3}), DType::f32, Shape{2, 3}, std::vector<double>(6, 0.0));
  expect_tensor(ones({4}, DType::i64), DType::i64, Shape{4}, {1, 1, 1, 1});
  expect_tensor(full({2, 2}, 2.5, DType::f64), DType::f64, Shape{2, 2}, {2.5, 2.5, 2.5, 2.5});
  expect_tensor(full({3}, 7.9, DType::i32), DType::i32, Shape{3}, {7, 7, 7});
  expect_tensor(full({2}, -1, DType::b8), DType::b8, Shape{2}, {1, 1});
  expect_tensor(zeros({0, 5}), DType::f32, Shape{0, 5}, {});
  Tensor x = tensor({1, 2, 3}, Shape{3}, DType::u8);
  expect_tensor(zeros_like(x), DType::u8, Shape{3}, {0, 0, 0});
  expect_tensor(ones_like(x), DType::u8, Shape{3}, {1, 1, 1});
  expect_tensor(full_like(x, 9), DType::u8, Shape{3}, {9, 9, 9});
}

TEST(Tensor, Scalar) {
  Tensor s = scalar(3.25);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.size(), 1);
  expect_tensor(s, DType::f32, Shape{}, {3.25});
  expect_tensor(scalar(-4, DType::i64), DType::i64, Shape{}, {-4});
}

TEST(Tensor, Arange) {
  expect_tensor(arange(5), DType::f32, Shape{5}, {0, 1, 2, 3, 4});
  expect_tensor(arange(4, DType::i64), DType::i64, Shape{4}, {0, 1, 2, 3});
  expect_tensor(arange(2, 11, 3), DType::f32, Shape{3}, {2, 5, 8});
  expect_tensor(arange(0, 1, 0.25, DType::f64), DType::f64, Shape{4}, {0, 0.25, 0.5, 0.75});
  expect_tensor(arange(5, 0, -1.5, DType::f64), DType::f64, Shape{4}, {5, 3.5, 2, 0.5});
  expect_tensor(arange(3, -3, -2, DType::i32), DType::i32, Shape{3}, {3, 1, -1});
  expect_tensor(arange(3, 3), DType::f32, Shape{0}, {});
  expect_tensor(arange(5, 0), DType::f32, Shape{0}, {});
  expect_tensor(arange(0), DType::f32, Shape{0}, {});
  EXPECT_THAT(error_message([] { arange(0, 10, 0); }), HasSubstr("arange"));
}

TEST(Tensor, FromVectorsAndInitializerLists) {
  expect_tensor(tensor({1.f, 2.f, 3.f}), DType::f32, Shape{3}, {1, 2, 3});
  expect_tensor(tensor({1.5, 2.5}), DType::f64, Shape{2}, {1.5, 2.5});
  expect_tensor(tensor({1, 2, 3, 4, 5, 6}, Shape{2, 3}), DType::i32, Shape{2, 3},
                {1, 2, 3, 4, 5, 6});
  expect_tensor(tensor(std::vector<int64_t>{-1, 1LL << 40}), DType::i64, Shape{2},
                {-1, double(1LL << 40)});
  expect_tensor(tensor<bool>({true, false, true}), DType::b8, Shape{3}, {1, 0, 1});
  expect_tensor(tensor<uint8_t>({0, 255}), DType::u8, Shape{2}, {0, 255});
  expect_tensor(tensor(std::vector<float>{1, 2, 3, 4}, Shape{2, 1, 2}), DType::f32, Shape{2, 1, 2},
                {1, 2, 3, 4});
  expect_tensor(tensor({0.5, 1.5, 2.5}, Shape{3}, DType::i64), DType::i64, Shape{3}, {0, 1, 2});
  expect_tensor(tensor({7.f}, Shape{}), DType::f32, Shape{}, {7});
  expect_tensor(tensor(std::vector<float>{}), DType::f32, Shape{0}, {});
}

TEST(Tensor, WrongValueCountThrows) {
  EXPECT_THAT(error_message([] {
                tensor({1.f, 2.f, 3.f}, Shape{2, 2});
              }),
              HasSubstr("got 3 values for shape (2, 2), which holds 4"));
  EXPECT_THAT(error_message([] {
                tensor({1.0, 2.0}, Shape{}, DType::f32);
              }),
              HasSubstr("got 2 values for shape ()"));
  EXPECT_THAT(error_message([] { tensor<bool>({true}, Shape{0}); }),
              HasSubstr("got 1 values for shape (0,)"));
}

// ---------------------------------------------------------------- element access

TEST(Tensor, ItemConverts) {
  Tensor f = scalar(2.75);
  EXPECT_EQ(f.item<float>(), 2.75f);
  EXPECT_EQ(f.item<double>(), 2.75);
  EXPECT_EQ(f.item<int>(), 2);
  EXPECT_EQ(scalar(-2.75).item<int64_t>(), -2);
  EXPECT_EQ(tensor<bool>({true}).item<bool>(), true);
  EXPECT_EQ(tensor<bool>({true}).item<int>(), 1);
  EXPECT_EQ(tensor({42}, Shape{1, 1, 1}).item<int>(), 42);
  EXPECT_EQ(tensor({42}, Shape{1}).item<double>(), 42.0);
  EXPECT_EQ(scalar(1e10, DType::i64).item<int64_t>(), 10'000'000'000LL);
}

TEST(Tensor, ItemOnManyElementsThrows) {
  std::string msg = error_message([] {
    tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, Shape{2, 3}).item<float>();
  });
  EXPECT_THAT(msg, HasSubstr("item()"));
  EXPECT_THAT(msg, HasSubstr("(2, 3)"));
  EXPECT_THAT(msg, HasSubstr("6 elements"));
  EXPECT_THAT(error_message([] { zeros({0}).item<float>(); }), HasSubstr("(0,)"));
}

TEST(Tensor, ToVectorConverts) {
  Tensor x = tensor({-1.5f, 0.f, 2.75f});
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{-1.5f, 0.f, 2.75f}));
  EXPECT_EQ(x.to_vector<double>(), (std::vector<double>{-1.5, 0, 2.75}));
  EXPECT_EQ(x.to_vector<int>(), (std::vector<int>{-1, 0, 2}));
  EXPECT_EQ(tensor<bool>({true, false}).to_vector<int>(), (std::vector<int>{1, 0}));
  EXPECT_EQ(tensor({3, 0}).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(tensor({1, 2, 3, 4}, Shape{2, 2}).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(zeros({0, 3}).to_vector<float>().empty());
  EXPECT_EQ(tensor({1, 2}).data<int32_t>()[1], 2);
}

TEST(Tensor, CopiesShareValueAndId) {
  Tensor a = tensor({1.f, 2.f});
  Tensor b = a;
  EXPECT_EQ(a.id(), b.id());
  EXPECT_EQ(a.data<float>(), b.data<float>());
  EXPECT_NE(a.id(), tensor({1.f, 2.f}).id());
  EXPECT_FALSE(Tensor().defined());
  EXPECT_THAT(error_message([] { Tensor().shape(); }), HasSubstr("undefined"));
}

// ---------------------------------------------------------------- printing

TEST(TensorFormat, Scalars) {
  EXPECT_EQ(scalar(3.5).to_string(), "<Tensor shape=() dtype=float32 3.5>");
  EXPECT_EQ(scalar(2).to_string(), "<Tensor shape=() dtype=float32 2.>");
  EXPECT_EQ(scalar(-7, DType::i64).to_string(), "<Tensor shape=() dtype=int64 -7>");
  EXPECT_EQ(tensor<bool>({false}, Shape{}).to_string(), "<Tensor shape=() dtype=bool False>");
}

TEST(TensorFormat, OneDimensionalInts) {
  EXPECT_EQ(tensor({1, 22, 333}).to_string(), "<Tensor shape=(3,) dtype=int32 [  1,  22, 333]>");
  EXPECT_EQ(tensor({-5, 0}, Shape{2}, DType::i64).to_string(),
            "<Tensor shape=(2,) dtype=int64 [-5,  0]>");
  EXPECT_EQ(tensor<uint8_t>({7}).to_string(), "<Tensor shape=(1,) dtype=uint8 [7]>");
  EXPECT_EQ(zeros({0}, DType::i32).to_string(), "<Tensor shape=(0,) dtype=int32 []>");
}

TEST(TensorFormat, TwoDimensionalFloats) {
  EXPECT_EQ(tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, Shape{2, 3}).to_string(),
            "<Tensor shape=(2, 3) dtype=float32\n"
            "[[1., 2., 3.],\n"
            " [4., 5., 6.]]>");
  EXPECT_EQ(tensor({1.5f, -2.25f, 3.f, 0.125f}, Shape{2, 2}).to_string(),
            "<Tensor shape=(2, 2) dtype=float32\n"
            "[[ 1.5  , -2.25 ],\n"
            " [ 3.   ,  0.125]]>");
  // Up to four decimals (0.1f prints as 0.1, not 0.100000001); decimal points line up.
  EXPECT_EQ(tensor({0.1f, 1.f / 3.f}).to_string(),
            "<Tensor shape=(2,) dtype=float32 [0.1   , 0.3333]>");
  EXPECT_EQ(tensor({1e-5, 1.0}).to_string(),
            "<Tensor shape=(2,) dtype=float64 [1.0000e-05, 1.0000e+00]>");
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tensor({1.f, kNaN, -kInf}).to_string(),
            "<Tensor shape=(3,) dtype=float32 [  1.,  nan, -inf]>");
}

TEST(TensorFormat, Bool) {
  EXPECT_EQ(tensor<bool>({true, false, true}).to_string(),
            "<Tensor shape=(3,) dtype=bool [ True, False,  True]>");
  EXPECT_EQ(tensor<bool>({true, false, false, true}, Shape{2, 2}).to_string(),
            "<Tensor shape=(2, 2) dtype=bool\n"
            "[[ True, False],\n"
            " [False,  True]]>");
}

TEST(TensorFormat, ThreeDimensional) {
  EXPECT_EQ(tensor({0, 1, 2, 3, 4, 5, 6, 7}, Shape{2, 2, 2}).to_string(),
            "<Tensor shape=(2, 2, 2) dtype=int32\n"
            "[[[0, 1],\n"
            "  [2, 3]],\n"
            "\n"
            " [[4, 5],\n"
            "  [6, 7]]]>");
}

TEST(TensorFormat, SummarisesLargeTensors) {
  std::vector<int32_t> v(2000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(i);
  EXPECT_EQ(tensor(v).to_string(),
            "<Tensor shape=(2000,) dtype=int32 [   0,    1,    2, ..., 1997, 1998, 1999]>");
  std::vector<float> f(v.begin(), v.end());
  EXPECT_EQ(tensor(f, Shape{40, 50}).to_string(),
            "<Tensor shape=(40, 50) dtype=float32\n"
            "[[   0.,    1.,    2., ...,   47.,   48.,   49.],\n"
            " [  50.,   51.,   52., ...,   97.,   98.,   99.],\n"
            " [ 100.,  101.,  102., ...,  147.,  148.,  149.],\n"
            " ...,\n"
            " [1850., 1851., 1852., ..., 1897., 1898., 1899.],\n"
            " [1900., 1901., 1902., ..., 1947., 1948., 1949.],\n"
            " [1950., 1951., 1952., ..., 1997., 1998., 1999.]]>");
  // 1000 elements is not summarised.
  std::string s = zeros({1000}, DType::i32).to_string();
  EXPECT_EQ(s.find("..."), std::string::npos);
}

TEST(TensorFormat, StreamAndUndefined) {
  std::ostringstream os;
  os << tensor({1, 2});
  EXPECT_EQ(os.str(), "<Tensor shape=(2,) dtype=int32 [1, 2]>");
  EXPECT_EQ(Tensor().to_string(), "<Tensor undefined>");
}

// ---------------------------------------------------------------- random creation

TEST(Random, SameSeedSameNumbers) {
  EXPECT_TRUE(test::bitwise_equal(random_uniform({100}, 5), random_uniform({100}, 5)));
  EXPECT_TRUE(test::bitwise_equal(random_normal({3, 7}, 5, 1, 2, DType::f64),
                                  random_normal({3, 7}, 5, 1, 2, DType::f64)));
  EXPECT_TRUE(
      test::bitwise_equal(random_integers({50}, 5, -3, 9), random_integers({50}, 5, -3, 9)));
  EXPECT_FALSE(test::bitwise_equal(random_uniform({100}, 5), random_uniform({100}, 6)));
  EXPECT_FALSE(test::bitwise_equal(random_normal({100}, 5), random_normal({100}, 6)));
}

TEST(Random, RangesAndMoments) {
  const int64_t n = 200'000;
  std::vector<double> u = random_uniform({n}, 11, -2, 3).to_vector<double>();
  double lo = 1e9, hi = -1e9, s = 0;
  for (double v : u) lo = std::min(lo, v), hi = std::max(hi, v), s += v;
  EXPECT_GE(lo, -2);
  EXPECT_LT(hi, 3);
  EXPECT_NEAR(s / double(n), 0.5, 0.02);

  std::vector<double> g = random_normal({n}, 12, 1, 2, DType::f64).to_vector<double>();
  double m = 0, v2 = 0;
  for (double v : g) m += v;
  m /= double(n);
  for (double v : g) v2 += (v - m) * (v - m);
  EXPECT_NEAR(m, 1, 0.03);
  EXPECT_NEAR(std::sqrt(v2 / double(n)), 2, 0.03);

  Tensor ints = random_integers({n}, 13, -3, 4, DType::i32);
  EXPECT_EQ(ints.dtype(), DType::i32);
  std::vector<int64_t> count(7, 0);
  for (int32_t v : ints.to_vector<int32_t>()) {
    ASSERT_GE(v, -3);
    ASSERT_LT(v, 4);
    ++count[size_t(v + 3)];
  }
  for (int64_t c : count) EXPECT_NEAR(double(c) / double(n), 1.0 / 7, 0.01);
}

TEST(Random, GeneratorSequenceIsReproducible) {
  Generator g1(99), g2(99), g3(100);
  Tensor a1 = g1.uniform({64}), b1 = g1.normal({64}), c1 = g1.integers({64}, 0, 10);
  Tensor a2 = g2.uniform({64}), b2 = g2.normal({64}), c2 = g2.integers({64}, 0, 10);
  EXPECT_TRUE(test::bitwise_equal(a1, a2));
  EXPECT_TRUE(test::bitwise_equal(b1, b2));
  EXPECT_TRUE(test::bitwise_equal(c1, c2));
  // Consecutive draws differ, and so do generators with other seeds.
  EXPECT_FALSE(test::bitwise_equal(g1.uniform({64}), a1));
  EXPECT_FALSE(test::bitwise_equal(g3.uniform({64}), a1));
  Generator h1(7), h2(7);
  std::vector<int64_t> s1, s2;
  for (int i = 0; i < 5; ++i) s1.push_back(h1.next_seed()), s2.push_back(h2.next_seed());
  EXPECT_EQ(s1, s2);
  EXPECT_NE(s1[0], s1[1]);
}

TEST(Random, IndependentOfThreadCount) {
  const int saved = num_threads();
  auto draw = [] {
    return std::vector<Tensor>{random_uniform({1'000'003}, 77),
                               random_normal({1'000'003}, 78, 0, 1, DType::f64),
                               random_integers({1'000'003}, 79, 0, 1000),
                               dropout(ones({1'000'003}), 0.3, 80), Generator(81).normal({4097})};
  };
  set_num_threads(1);
  std::vector<Tensor> one = draw();
  set_num_threads(2);
  std::vector<Tensor> two = draw();
  set_num_threads(saved);
  EXPECT_EQ(num_threads(), saved);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(test::bitwise_equal(one[i], two[i])) << i;
}

}  // namespace
}  // namespace kiln
