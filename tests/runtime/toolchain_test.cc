// The compiler builds kiln's own code correctly for this CPU. GCC 12.2 (Debian 12's g++) with
// AVX-512 enabled (-march=native on an AVX-512 host, or -mavx512f) miscompiles a constant
// vector whose last element differs from the others: {0.05, 0.05, 0.05, 0.0} became four times
// 0.05 (the SLP vectorizer's constant is built with a broadcast and the zero is lost). Found on
// an AMD Zen 4 host, where a test's expected values silently changed. CMakeLists.txt turns the
// SLP vectorizer off for GCC < 13 (-fno-tree-slp-vectorize); this test fails without it.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace {

// Out of line, so the comparison cannot be folded with the construction.
[[gnu::noinline]] std::vector<double> doubles_three_same_then_zero() {
  return {0.05, 0.05, 0.05, 0.0};
}
[[gnu::noinline]] std::vector<float> floats_seven_same_then_one() {
  return {2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 1.0f};
}
[[gnu::noinline]] std::vector<int64_t> ints_three_same_then_zero() { return {7, 7, 7, 0}; }

TEST(Toolchain, ConstantVectorsWithOneDifferentLastElementSurvive) {
  const std::vector<double> d = doubles_three_same_then_zero();
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0], 0.05);
  EXPECT_EQ(d[2], 0.05);
  EXPECT_EQ(d[3], 0.0) << "the compiler dropped the last element of a constant vector";
  const std::vector<float> f = floats_seven_same_then_one();
  EXPECT_EQ(f[6], 2.5f);
  EXPECT_EQ(f[7], 1.0f);
  const std::vector<int64_t> i = ints_three_same_then_zero();
  EXPECT_EQ(i[2], 7);
  EXPECT_EQ(i[3], 0);
}

}  // namespace
