// Loop-invariant operands (runtime/loop_invariants.h): which buffers a scope holds, the packed
// copies it keeps, and products whose B a loop leaves unchanged (packed once per loop, a bf16 B
// widened as it is packed; the same bits as every other plan).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/loop_invariants.h"
#include "kiln/runtime/profiler.h"

namespace kiln::runtime {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(LoopInvariantScope, HoldsWholeRangesOfItsRegionsTheOutermostScopeFirst) {
  std::vector<char> outer_buf(256), inner_buf(64), other(64);
  EXPECT_EQ(LoopInvariantScope::holding(outer_buf.data(), 16), nullptr);
  {
    LoopInvariantScope outer({{outer_buf.data(), outer_buf.size()}});
    EXPECT_EQ(LoopInvariantScope::holding(outer_buf.data(), 256), &outer);
    EXPECT_EQ(LoopInvariantScope::holding(outer_buf.data() + 200, 56), &outer);
    EXPECT_EQ(LoopInvariantScope::holding(outer_buf.data() + 200, 57), nullptr);  // runs past
    EXPECT_EQ(LoopInvariantScope::holding(other.data(), 1), nullptr);
    {
      // An inner loop holding its own buffer and the outer loop's: the outer scope lives longer.
      LoopInvariantScope inner(
          {{inner_buf.data(), inner_buf.size()}, {outer_buf.data(), outer_buf.size()}});
      EXPECT_EQ(LoopInvariantScope::holding(inner_buf.data(), 64), &inner);
      EXPECT_EQ(LoopInvariantScope::holding(outer_buf.data(), 8), &outer);
    }
    EXPECT_EQ(LoopInvariantScope::holding(inner_buf.data(), 64), nullptr);
  }
  EXPECT_EQ(LoopInvariantScope::holding(outer_buf.data(), 16), nullptr);
}

TEST(LoopInvariantScope, FillsEachKeyOnceAndKeepsNothingAFailedFillWrote) {
  std::vector<float> b(16);
  LoopInvariantScope scope({{b.data(), b.size() * sizeof(float)}});
  int fills = 0;
  const std::function<void(float*)> fill = [&](float* out) {
    ++fills;
    for (int i = 0; i < 8; ++i) out[i] = float(i + fills);
  };
  const PackedBKey key{b.data(), 4, 4, 4, false, 16, 4};
  const float* first = scope.packed_b(key, 8, fill);
  EXPECT_EQ(scope.packed_b(key, 8, fill), first);
  EXPECT_EQ(fills, 1);
  EXPECT_EQ(first[7], 8.0f);
  PackedBKey other = key;
  other.k_step = 2;  // another layout of the same operand
  EXPECT_NE(scope.packed_b(other, 8, fill), first);
  EXPECT_EQ(fills, 2);
  PackedBKey failing = key;
  failing.nr = 8;
  EXPECT_THROW(scope.packed_b(failing, 8, [](float*) { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_EQ(scope.fills(), 2);
}

// The plan detail of the profiled products, in order.
std::vector<std::string> gemm_details(const std::vector<ProfileEvent>& events) {
  std::vector<std::string> details;
  for (const ProfileEvent& e : events)
    if (e.category == "gemm") details.push_back(e.detail);
  return details;
}

// Runs `product` three times inside a loop scope holding [b, b + bytes), each result bitwise
// `want`; returns the scope's fills and the three products' plan details.
struct InLoop {
  int64_t fills = 0;
  std::vector<std::string> details;
};
InLoop three_in_loop(const void* b, size_t bytes,
                     const std::function<void(std::vector<float>&)>& product,
                     const std::vector<float>& want) {
  LoopInvariantScope loop({{b, bytes}});
  std::vector<float> got(want.size());
  start_profiling();
  for (int iteration = 0; iteration < 3; ++iteration) {
    std::fill(got.begin(), got.end(), -1.0f);
    product(got);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
        << "iteration " << iteration;
  }
  return {loop.fills(), gemm_details(stop_profiling())};
}

// Products an RNN step runs against its weights (recurrent 32 x 256 x 1024, a transposed
// weight, a row-block product with a callback, odd sizes): within a scope holding B, packed once
// and reused, the same bits as outside any loop.
TEST(LoopInvariantGemm, PacksBOncePerLoopWithTheBitsOfEveryOtherPlan) {
  if (gemm_detail::active_microkernels() == nullptr) GTEST_SKIP() << "Eigen GEMM: no plans";
  struct Case {
    int64_t m, k, n;
    bool tb, rows;
  };
  for (const Case& c : {Case{32, 256, 1024, false, false}, Case{32, 1024, 256, true, false},
                        Case{32, 256, 1024, false, true}, Case{7, 45, 33, false, true},
                        Case{50, 19, 70, true, false}}) {
    SCOPED_TRACE(::testing::Message() << c.m << "x" << c.k << "x" << c.n << (c.tb ? " tb" : "")
                                      << (c.rows ? " rows" : ""));
    const std::vector<float> a = random_floats(size_t(c.m * c.k), 1);
    const std::vector<float> b = random_floats(size_t(c.k * c.n), 2);
    const int64_t ldb = c.tb ? c.k : c.n;
    std::atomic<int64_t> rows_done{0};  // the row blocks finish on several threads
    const std::function<void(int64_t, int64_t)> on_rows = [&](int64_t r0, int64_t r1) {
      rows_done += r1 - r0;
    };
    auto product = [&](std::vector<float>& out) {
      if (c.rows)
        gemm_rows<float>(false, c.tb, c.m, c.n, c.k, a.data(), c.k, b.data(), ldb, out.data(), c.n,
                         on_rows);
      else
        gemm<float>(false, c.tb, c.m, c.n, c.k, a.data(), c.k, b.data(), ldb, out.data(), c.n);
    };
    std::vector<float> want(size_t(c.m * c.n));
    product(want);
    const InLoop run = three_in_loop(b.data(), b.size() * sizeof(float), product, want);
    EXPECT_EQ(run.fills, 1);
    ASSERT_EQ(run.details.size(), 3u);
    for (const std::string& d : run.details)
      EXPECT_NE(d.find("B packed-once-per-loop"), std::string::npos) << d;
    if (c.rows) {
      EXPECT_EQ(rows_done.load(), 4 * c.m);
    }
  }
}

// A bf16 B (an RNN's recurrent kernel under mixed_bfloat16) on the float32 kernels: widened once
// into the packed copy, the bits of the product outside any loop. The pair kernels (here their
// AMX emulation, where this CPU runs it) pack B per product: the same bits outside the loop and
// in it, packed once exactly where a plan says so.
TEST(LoopInvariantGemm, Bf16BOnTheFloat32KernelsIsWidenedOncePerLoop) {
  if (gemm_detail::active_microkernels() == nullptr) GTEST_SKIP() << "Eigen GEMM: no plans";
  struct Restore {
    std::string name = gemm_bf16_kernels();
    ~Restore() { set_gemm_bf16_kernels(name); }
  } restore;
  struct Case {
    int64_t m, k, n;
    bool tb, rows;
  };
  auto bf16s = [](size_t n, uint32_t seed) {
    std::vector<bfloat16> v;
    for (float x : random_floats(n, seed)) v.push_back(bfloat16::from_float(x));
    return v;
  };
  for (const char* kernels : {"float32", "amx-emulated"}) {
    try {
      set_gemm_bf16_kernels(kernels);
    } catch (const Error&) {  // this CPU cannot run them
      continue;
    }
    for (const Case& c : {Case{32, 256, 1024, false, false}, Case{32, 1024, 256, true, true},
                          Case{7, 45, 33, false, false}}) {
      SCOPED_TRACE(::testing::Message() << kernels << " " << c.m << "x" << c.k << "x" << c.n
                                        << (c.tb ? " tb" : "") << (c.rows ? " rows" : ""));
      const std::vector<bfloat16> a = bf16s(size_t(c.m * c.k), 5), b = bf16s(size_t(c.k * c.n), 6);
      const int64_t ldb = c.tb ? c.k : c.n;
      const std::function<void(int64_t, int64_t)> on_rows = [](int64_t, int64_t) {};
      auto product = [&](std::vector<float>& out) {
        gemm_bf16(false, c.tb, c.m, c.n, c.k, a.data(), c.k, b.data(), ldb, out.data(), c.n, true,
                  c.rows ? &on_rows : nullptr);
      };
      std::vector<float> want(size_t(c.m * c.n));
      product(want);
      const InLoop run = three_in_loop(b.data(), b.size() * sizeof(bfloat16), product, want);
      ASSERT_EQ(run.details.size(), 3u);
      const bool once = run.details[0].find("packed-once-per-loop") != std::string::npos;
      if (std::string(kernels) == "float32") {
        EXPECT_TRUE(once) << run.details[0];
      }
      EXPECT_EQ(run.fills, once ? 1 : 0) << run.details[0];
    }
  }
}

// A B partly outside the scope's buffers, or another operand in them, is not packed once.
TEST(LoopInvariantGemm, OnlyABWhollyInsideTheScopeIsPackedOnce) {
  if (gemm_detail::active_microkernels() == nullptr) GTEST_SKIP() << "Eigen GEMM: no plans";
  const int64_t m = 24, k = 64, n = 96;
  const std::vector<float> a = random_floats(size_t(m * k), 3);
  const std::vector<float> b = random_floats(size_t(k * n), 4);
  std::vector<float> c(size_t(m * n));
  LoopInvariantScope loop({{b.data(), (b.size() - 1) * sizeof(float)},  // B's last float outside
                           {a.data(), a.size() * sizeof(float)}});
  start_profiling();
  gemm<float>(false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n);
  const std::vector<std::string> details = gemm_details(stop_profiling());
  EXPECT_EQ(loop.fills(), 0);
  ASSERT_EQ(details.size(), 1u);
  EXPECT_EQ(details[0].find("packed-once-per-loop"), std::string::npos) << details[0];
}

}  // namespace
}  // namespace kiln::runtime
