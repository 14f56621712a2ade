// Tests of the finite-difference checker itself (tests/autodiff/gradcheck.h): it must pass
// right gradients and catch wrong ones, naming the element.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::check_gradients;
using gradcheck::uniform;

// A copy of x's values the tape does not know about (a "stop gradient").
Tensor detached(const Tensor& x) { return tensor(x.to_vector<double>(), x.shape(), x.dtype()); }

TEST(GradCheck, PassesACorrectGradient) {
  Tensor x = uniform({2, 3}, 1);
  EXPECT_TRUE(check_gradients([](const std::vector<Tensor>& in) { return in[0] * in[0]; }, {x}));
}

// The tape sees d/dx (x * c) = c while the function really is x²: the checker must fail and
// name the worst element with both values.
TEST(GradCheck, CatchesAWrongGradient) {
  Tensor x = uniform({2, 3}, 2, 0.5, 1.5);
  ::testing::AssertionResult r =
      check_gradients([](const std::vector<Tensor>& in) { return in[0] * detached(in[0]); }, {x});
  ASSERT_FALSE(r);
  std::string msg = r.message();
  EXPECT_NE(msg.find("input 0 (f64[2,3])"), std::string::npos) << msg;
  EXPECT_NE(msg.find("6 of 6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("worst at ["), std::string::npos) << msg;
  EXPECT_NE(msg.find("finite difference"), std::string::npos) << msg;
}

// Only the wrong component of a non-scalar output is off: the random weighting still sees it.
TEST(GradCheck, CatchesAnErrorInOneOutputComponent) {
  Tensor x = uniform({4}, 3, 0.5, 1.5);
  auto f = [](const std::vector<Tensor>& in) {
    Tensor first = slice(in[0], {0}, {1});
    Tensor rest = slice(in[0], {1}, {4});
    return concat({first * detached(first), rest * rest}, 0);
  };
  ::testing::AssertionResult r = check_gradients(f, {x});
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("1 of 4 gradient elements"), std::string::npos)
      << r.message();
  EXPECT_NE(std::string(r.message()).find("worst at [0]"), std::string::npos) << r.message();
}

TEST(GradCheck, ChecksOnlyTheRequestedInputs) {
  Tensor a = uniform({3}, 4), b = uniform({3}, 5);
  auto f = [](const std::vector<Tensor>& in) { return in[0] * in[1] * detached(in[1]); };
  EXPECT_TRUE(check_gradients(f, {a, b}, gradcheck::Options::only({0})));
  EXPECT_FALSE(check_gradients(f, {a, b}));
}

TEST(GradCheck, IndexString) {
  EXPECT_EQ(gradcheck::index_string(Shape{2, 2, 3}, 6), "[1, 0, 0]");
  EXPECT_EQ(gradcheck::index_string(Shape{2, 2, 3}, 11), "[1, 1, 2]");
  EXPECT_EQ(gradcheck::index_string(Shape{}, 0), "[]");
}

TEST(GradCheck, DistinctValuesAreDistinct) {
  std::vector<double> v = gradcheck::distinct({4, 5}, 6).to_vector<double>();
  std::sort(v.begin(), v.end());
  for (size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i] - v[i - 1], 0.05 - 1e-12);
}

}  // namespace
}  // namespace kiln
