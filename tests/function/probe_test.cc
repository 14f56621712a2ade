#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include "kiln/kiln.h"
#include "tests/support/error_of.h"
namespace kiln {
namespace {
TEST(ProbeTracing, StaleRead) {
  Variable v("v", scalar(1));
  auto f = function([&](const Tensor& x) { Tensor old = v.read(); v.assign_add(x); return old; });
  std::cout << test::error_of([&] { std::cout << f(scalar(5)) << std::endl; }) << std::endl;
  auto g = function([&](const Tensor& x) { Tensor old = v.read(); v.assign(old * x); return old + v.read(); });
  std::cout << test::error_of([&] { std::cout << g(scalar(5)) << std::endl; }) << std::endl;
  auto h = function([&](const Tensor& x) { Tensor old = v.read(); Tensor y = cond(greater(x, scalar(0)), [&]{ v.assign(x); return x; }, [&]{ return x; }); return old + y; });
  std::cout << test::error_of([&] { std::cout << h(scalar(5)) << std::endl; }) << std::endl;
}
}  // namespace
}  // namespace kiln
