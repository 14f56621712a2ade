// Floating max and min reductions (codegen/accumulator.h): a fast vectorized form, and an exact
// pass for rows holding NaN, infinities or a zero extreme. Every result must be exactly that of
// llvm.maximum / llvm.minimum: NaN when the row holds a NaN, +0 over -0 for max (-0 for min),
// infinities as they are; checked bitwise on rows made to hit each case, through the three ways
// a kernel reduces (a shared row pass, a reduction nest inside a rows kernel, a serial kernel).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kiln/codegen/kernel_plan.h"
#include "kiln/codegen/lower_kernel.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using runtime::Array;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The exact reduction: NaN if any, else the extreme with -0 < +0.
double exact(const std::vector<double>& xs, bool max) {
  double best = max ? -kInf : kInf;
  for (double x : xs) {
    if (std::isnan(x)) return kNaN;
    const bool better = max ? (x > best || (x == 0 && best == 0 && !std::signbit(x)))
                            : (x < best || (x == 0 && best == 0 && std::signbit(x)));
    if (better) best = x;
  }
  return best;
}

// Row `r` of width `w`: values of one sign (the side the extreme does not come from, so a zero
// can be the extreme) with special values placed by the case.
std::vector<double> make_row(int r, int64_t w, bool max, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0.5, 100);
  const double side = max ? -1 : 1;
  std::vector<double> row(static_cast<size_t>(w));
  for (double& x : row) x = side * u(rng);
  auto at = [&](int64_t k) -> double& { return row[size_t(k % w)]; };
  switch (r % 10) {
    case 0:  // both zeros: +0 wins max, -0 wins min (in either order)
      at(w / 3) = -0.0;
      at(w - 1) = 0.0;
      break;
    case 1:
      at(1) = 0.0;
      at(w / 2) = -0.0;
      break;
    case 2:  // one zero sign only
      at(w / 2) = max ? -0.0 : 0.0;
      break;
    case 3:  // a NaN, last element (a remainder lane)
      at(w - 1) = kNaN;
      break;
    case 4:  // a NaN first, and an infinity of the winning side
      at(0) = kNaN;
      at(w / 2) = -side * kInf;
      break;
    case 5:  // the winning infinity
      at(w / 2) = -side * kInf;
      break;
    case 6:  // infinities of the losing side only: the finite extreme
      at(0) = side * kInf;
      at(w - 1) = side * kInf;
      break;
    case 7:  // every element the losing infinity
      for (double& x : row) x = side * kInf;
      break;
    case 8:  // mixed signs, no special value
      for (double& x : row) x = (u(rng) - 50) * 3;
      break;
    default:  // the extreme at the last element
      at(w - 1) = -side * 0.25;
      break;
  }
  return row;
}

struct Case {
  const char* name;
  std::string graph;  // reduces parameter %0 into output 0
  bool max;
  int64_t rows, width;  // the input as rows x width (reduced within a row)
  std::string loop;     // kernel iteration mode expected
};

void check(const Case& c, DType dt) {
  SCOPED_TRACE(fmt::format("{} {} {}", c.name, c.max ? "max" : "min", dtype_name(dt)));
  testing::ScopedCacheDir cache;
  auto g = ir::parse_graph(c.graph, "test");
  std::mt19937 rng(7);
  Array x = Array::empty(g->parameter(0)->type());
  ASSERT_EQ(x.size(), c.rows * c.width);
  std::vector<double> want;
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<double> row = make_row(int(r), c.width, c.max, rng);
    for (int64_t k = 0; k < c.width; ++k) {
      if (dt == DType::f32)
        x.data<float>()[r * c.width + k] = float(row[size_t(k)]),
                                      row[size_t(k)] = float(row[size_t(k)]);
      else
        x.data<double>()[r * c.width + k] = row[size_t(k)];
    }
    want.push_back(exact(row, c.max));
  }
  codegen::LoweredKernel k = codegen::lower_kernel(*g, "k");
  EXPECT_EQ(k.layout.iteration, c.loop);
  std::vector<Array> out = testing::run_compiled(*g, {x}, {}).outputs;
  ASSERT_EQ(out[0].size(), c.rows);
  for (int64_t r = 0; r < c.rows; ++r) {
    const double got = testing::element(out[0], r);
    if (std::isnan(want[size_t(r)])) {
      EXPECT_TRUE(std::isnan(got)) << "row " << r << " (case " << r % 10 << "): " << got;
      continue;
    }
    EXPECT_EQ(got, want[size_t(r)]) << "row " << r << " (case " << r % 10 << ")";
    EXPECT_EQ(std::signbit(got), std::signbit(want[size_t(r)]))
        << "row " << r << " (case " << r % 10 << "): " << got;
  }
}

std::vector<Case> cases(bool max, DType dt) {
  const std::string op = max ? "max" : "min", t{dtype_name(dt)};
  std::vector<Case> out;
  for (int64_t w : {1000, 37, 5}) {
    const int64_t rows = 30;
    // Full-row reduction: a shared row pass.
    out.push_back({"row pass",
                   fmt::format("graph @f(%0: {2}[{0},{1}]) -> ({2}[{0}]) {{\n"
                               "  %1 = {3}(%0) {{axes=[-1], keepdims=false}} : {2}[{0}]\n"
                               "  return %1\n}}",
                               rows, w, t, op),
                   max, rows, w, "rows"});
    // The middle axis of [rows, w, 1]: a reduction nest per output element by rows.
    out.push_back({"nest",
                   fmt::format("graph @f(%0: {2}[{0},{1},1]) -> ({2}[{0},1]) {{\n"
                               "  %1 = {3}(%0) {{axes=[1], keepdims=false}} : {2}[{0},1]\n"
                               "  return %1\n}}",
                               rows, w, t, op),
                   max, rows, w, "rows"});
  }
  return out;
}

TEST(FastExtremum, MaxIsExactOnEveryKindOfRow) {
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases(true, dt)) check(c, dt);
}

TEST(FastExtremum, MinIsExactOnEveryKindOfRow) {
  for (DType dt : {DType::f32, DType::f64})
    for (const Case& c : cases(false, dt)) check(c, dt);
}

// The serial kernel reduces a single row: run it on each case of make_row.
TEST(FastExtremum, SerialKernelOnEveryCase) {
  for (bool max : {true, false}) {
    for (int r = 0; r < 10; ++r) {
      SCOPED_TRACE(fmt::format("{} case {}", max ? "max" : "min", r));
      testing::ScopedCacheDir cache;
      auto g = ir::parse_graph(fmt::format("graph @f(%0: f32[1000]) -> (f32[]) {{\n"
                                           "  %1 = {0}(%0) {{axes=[], keepdims=false}} : f32[]\n"
                                           "  return %1\n}}",
                                           max ? "max" : "min"),
                               "test");
      std::mt19937 rng{uint32_t(r)};
      std::vector<double> row = make_row(r, 1000, max, rng);
      Array x = Array::empty(g->parameter(0)->type());
      for (size_t k = 0; k < row.size(); ++k)
        x.data<float>()[k] = float(row[k]), row[k] = float(row[k]);
      const double want = exact(row, max);
      const double got = testing::element(testing::run_compiled(*g, {x}, {}).outputs[0], 0);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got));
      } else {
        EXPECT_EQ(got, want);
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << got;
      }
    }
  }
}

// The fast form is what runs: one plain compare-and-select per element, no llvm.maximum in
// the loop (it stays in the exact pass only).
TEST(FastExtremum, LoopUsesThePlainCompare) {
  auto g = ir::parse_graph(R"(graph @f(%0: f32[8,64]) -> (f32[8]) {
  %1 = max(%0) {axes=[-1], keepdims=false} : f32[8]
  return %1
})",
                           "test");
  codegen::LoweredKernel k = codegen::lower_kernel(*g, "k");
  std::string ir = codegen::module_text(*k.module.module);
  EXPECT_NE(ir.find("fcmp nnan nsz contract ogt float"), std::string::npos) << ir;
  EXPECT_NE(ir.find("exact_extremum"), std::string::npos) << ir;
  EXPECT_NE(ir.find("llvm.maximum.f32"), std::string::npos) << ir;  // in the exact pass
}

}  // namespace
}  // namespace kiln
