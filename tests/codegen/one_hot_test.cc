// one_hot inside kernels (codegen/one_hot.h): compared in 32-bit lanes through a down counter
// of the loop over its last axis, exact for every index (in range, -1, depth, values whose low
// 32 bits fall in range), with vector tails and with i32 indices. (The op consistency suite
// covers dtypes, depths 0 and 1 and ranks against the eager kernel.)
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln/codegen/jit.h"
#include "kiln/codegen/lower_kernel.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using runtime::Array;

// y = one_hot(l) (stored), s = sum(one_hot(l) * x) over the last axis (fused: not stored).
std::string graph(int64_t rows, int64_t depth, const char* index_type) {
  return fmt::format(R"(graph @f(%0: {2}[{0}], %1: f32[{0},{1}]) -> (f32[{0},{1}], f32[{0}]) {{
  %2 = one_hot(%0) {{depth={1}, dtype=f32}} : f32[{0},{1}]
  %3 = mul(%2, %1) : f32[{0},{1}]
  %4 = sum(%3) {{axes=[-1], keepdims=false}} : f32[{0}]
  return %2, %4
}})",
                     rows, depth, index_type);
}

TEST(OneHot, CountsDownInI32LanesWhereItsAxisIsTheLoop) {
  auto g = ir::parse_graph(graph(8, 1000, "i64"), "test");
  codegen::LoweredKernel k = codegen::lower_kernel(*g, "k");
  const std::string ir = codegen::module_text(*k.module.module);
  EXPECT_NE(ir.find("%one_hot.k = phi i32"), std::string::npos) << ir;
  codegen::optimize_module(k.module);
  const std::string opt = codegen::module_text(*k.module.module);
  EXPECT_NE(opt.find(" x i32> %"), std::string::npos) << opt;  // vector i32 compares
  EXPECT_EQ(opt.find("icmp eq <16 x i64>"), std::string::npos) << opt;
  EXPECT_EQ(opt.find("icmp eq <8 x i64>"), std::string::npos) << opt;
  EXPECT_EQ(opt.find("icmp eq <4 x i64>"), std::string::npos) << opt;
}

TEST(OneHot, ExactForEveryIndex) {
  for (const char* index_type : {"i64", "i32"}) {
    for (int64_t depth : {1000, 37, 16, 3}) {
      SCOPED_TRACE(fmt::format("{} depth {}", index_type, depth));
      testing::ScopedCacheDir cache;
      auto g = testing::optimized_graph(graph(24, depth, index_type));
      std::vector<int64_t> labels;
      for (int64_t r = 0; r < 24; ++r) labels.push_back((r * 7919) % depth);
      // Outside [0, depth) (all-zero rows), both ends, and (i64) values whose low 32 bits are
      // in range.
      labels[0] = -1, labels[1] = depth, labels[2] = 0, labels[3] = depth - 1, labels[4] = -depth;
      labels[7] = depth + 5;
      const int64_t big = int64_t{1} << 32;
      if (std::string(index_type) == "i64") labels[5] = big + 1, labels[6] = -big + 2;
      Array l = Array::empty(g->parameter(0)->type()), x = Array::empty(g->parameter(1)->type());
      for (int64_t r = 0; r < 24; ++r) {
        if (std::string(index_type) == "i64")
          l.data<int64_t>()[r] = labels[size_t(r)];
        else
          l.data<int32_t>()[r] = int32_t(labels[size_t(r)]);
      }
      std::mt19937 rng(3);
      std::uniform_real_distribution<float> u(1, 2);
      for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = u(rng);
      std::vector<Array> got = testing::run_compiled(*g, {l, x}, {}).outputs;
      for (int64_t r = 0; r < 24; ++r) {
        const int64_t label = labels[size_t(r)];
        const bool inside = label >= 0 && label < depth;
        for (int64_t j = 0; j < depth; ++j)
          ASSERT_EQ(got[0].data<float>()[r * depth + j], inside && j == label ? 1.f : 0.f)
              << "row " << r << " label " << label << " position " << j;
        EXPECT_EQ(got[1].data<float>()[r], inside ? x.data<float>()[r * depth + label] : 0.f)
            << "row " << r << " label " << label;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
