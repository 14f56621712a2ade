// The JIT target (codegen/target.h): x86-64 levels generate code for their instruction set
// only (checked in the kernels' assembly), give results within a derived error bound of a
// float64 computation, key the caches apart, and names the host cannot run or LLVM does not
// know are errors that say why.
#include "kiln/codegen/target.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/codegen/compile_graph.h"
#include "kiln/codegen/compiler.h"
#include "kiln/codegen/host_target.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/ir/error.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln::codegen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool host_has(const std::string& feature) {
  std::stringstream in(host_cpu_features());
  for (std::string f; std::getline(in, f, ',');)
    if (f == feature) return true;
  return false;
}

// The levels this host can run (x86-64-v4 needs AVX-512), then native.
std::vector<std::string> runnable_levels() {
  std::vector<std::string> levels = {"x86-64-v2", "x86-64-v3"};
  if (host_has("avx512f") && host_has("avx512bw") && host_has("avx512cd") && host_has("avx512dq") &&
      host_has("avx512vl"))
    levels.push_back("x86-64-v4");
  levels.push_back("native");
  return levels;
}

// KILN_TARGET_CPU set (or unset) for a scope; the process's value restored after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (const char* v = std::getenv("KILN_TARGET_CPU")) old_ = v;
    if (value)
      ::setenv("KILN_TARGET_CPU", value, 1);
    else
      ::unsetenv("KILN_TARGET_CPU");
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv("KILN_TARGET_CPU", old_->c_str(), 1);
    else
      ::unsetenv("KILN_TARGET_CPU");
  }

 private:
  std::optional<std::string> old_;
};

// t = tanh(x + b) * x (a flat kernel) and s = the rows of x · w (a row reduction), x of
// `rows` x 300 floats.
std::string graph_text(int rows = 64) {
  return fmt::format(R"(graph @g(%0: f32[{0},300], %1: f32[300]) -> (f32[{0},300], f32[{0}]) {{
  %2 = add(%0, %1) : f32[{0},300]
  %3 = tanh(%2) : f32[{0},300]
  %4 = mul(%3, %0) : f32[{0},300]
  %5 = mul(%0, %1) : f32[{0},300]
  %6 = sum(%5) {{axes=[-1], keepdims=false}} : f32[{0}]
  return %4, %6
}})",
                     rows);
}

// The assembly of every kernel of graph_text(), compiled for the current target.
std::string graph_assembly() {
  auto g = testing::optimized_graph(graph_text());
  std::vector<std::unique_ptr<ir::Graph>> owned;
  std::string text;
  for (const KernelRequest& r : kernel_requests(*g, owned)) text += kernel_assembly(r);
  return text;
}

TEST(TargetCpu, LevelsResolveToTheirInstructionSets) {
  KernelTarget v2 = resolve_target("x86-64-v2");
  EXPECT_EQ(v2.cpu, "x86-64-v2");
  EXPECT_THAT(v2.features, HasSubstr("sse4.2"));
  EXPECT_THAT(v2.features, Not(HasSubstr("avx")));
  EXPECT_EQ(v2.vector_bits, 128u);
  EXPECT_THAT(v2.llvm_features, HasSubstr("-avx2"));
  KernelTarget v3 = resolve_target("x86-64-v3");
  EXPECT_THAT(v3.features, HasSubstr("avx2"));
  EXPECT_THAT(v3.features, HasSubstr("fma"));
  EXPECT_THAT(v3.features, Not(HasSubstr("avx512")));
  EXPECT_EQ(v3.vector_bits, 256u);
  KernelTarget native = resolve_target("native");
  EXPECT_EQ(native.cpu, host_cpu_name());
  EXPECT_EQ(native.features, host_cpu_features());
  EXPECT_EQ(native.vector_bits, host_has("avx512f") ? 512u : host_has("avx") ? 256u : 128u);
}

// v2 code uses xmm registers only, v3 ymm but no zmm, v4 and native on an AVX-512 host zmm.
TEST(TargetCpu, KernelAssemblyUsesOnlyTheTargetsRegisters) {
  for (const std::string& level : runnable_levels()) {
    SCOPED_TRACE(level);
    ScopedTargetCpu scope(level);
    std::string text = graph_assembly();
    ASSERT_THAT(text, HasSubstr("target " + level));
    bool ymm = text.find("ymm") != std::string::npos, zmm = text.find("zmm") != std::string::npos;
    if (level == "x86-64-v2") {
      EXPECT_FALSE(ymm || zmm) << text;
      EXPECT_THAT(text, HasSubstr("xmm"));
    } else if (level == "x86-64-v3") {
      EXPECT_TRUE(ymm) << text;
      EXPECT_FALSE(zmm) << text;
      EXPECT_THAT(text, HasSubstr("vfmadd"));  // FMA contraction on a v3 target
    } else if (level == "x86-64-v4" || host_has("avx512f")) {
      EXPECT_TRUE(zmm) << text;
    }
  }
}

// At every level both outputs are within a bound derived from the computation of a float64
// evaluation (u = 2^-24, the unit roundoff of f32):
//  - t = tanh(x + b) * x: x + b is rounded (u |x + b|, and tanh's slope is at most 1), tanh
//    is within 2 ulp (docs/codegen.md's bound; ulp(t) <= 2u |t|), the product rounded (u |t x|):
//    |err| <= |x| (4u |t| + u |x + b|) + u |t x|;
//  - s = sum_j x_j w_j over n = 300 terms, in any order, with or without FMA:
//    |err| <= gamma_n sum_j |x_j w_j|, gamma_n = n u / (1 - n u).
TEST(TargetCpu, ResultsAreWithinTheErrorBoundAtEveryLevel) {
  constexpr double u = 0x1p-24;
  constexpr int n = 300;
  const double gamma = n * u / (1 - n * u);
  auto g = testing::optimized_graph(graph_text());
  std::mt19937 rng(13);
  std::vector<runtime::Array> args = {testing::random_array(g->parameter(0)->type(), rng),
                                      testing::random_array(g->parameter(1)->type(), rng)};
  const float* x = static_cast<const float*>(args[0].raw());
  const float* b = static_cast<const float*>(args[1].raw());
  for (const std::string& level : runnable_levels()) {
    SCOPED_TRACE(level);
    ScopedTargetCpu scope(level);
    testing::RunResult got = testing::run_compiled(*g, args, {});
    const float* t = static_cast<const float*>(got.outputs[0].raw());
    const float* s = static_cast<const float*>(got.outputs[1].raw());
    int bad = 0;
    for (int r = 0; r < 64; ++r) {
      double dot = 0, magnitude = 0;
      for (int j = 0; j < n; ++j) {
        double xi = x[r * n + j], bj = b[j];
        double th = std::tanh(xi + bj), want = th * xi;
        double bound = std::abs(xi) * (4 * u * std::abs(th) + u * std::abs(xi + bj)) +
                       u * std::abs(want) + 0x1p-149;
        if (std::abs(t[r * n + j] - want) > bound && ++bad < 5)
          ADD_FAILURE() << "t[" << r << "," << j << "] = " << t[r * n + j] << ", want " << want
                        << " within " << bound;
        dot += xi * bj;
        magnitude += std::abs(xi * bj);
      }
      if (std::abs(s[r] - dot) > gamma * magnitude + 0x1p-149)
        ADD_FAILURE() << "s[" << r << "] = " << s[r] << ", want " << dot << " within "
                      << gamma * magnitude;
    }
  }
}

// Switching the target while kernels compile in another thread: each kernel is compiled for
// one target throughout (the one its header names), never a mix.
TEST(TargetCpu, SwitchingWhileCompilingNeverMixesTargets) {
  ScopedTargetCpu restore("x86-64-v2");
  auto g = testing::optimized_graph(graph_text(48));
  std::vector<std::unique_ptr<ir::Graph>> owned;
  std::vector<KernelRequest> requests = kernel_requests(*g, owned);
  std::atomic<bool> done{false};
  std::thread switcher([&] {
    for (int i = 0; !done.load(); ++i) {
      set_target_cpu(i % 2 ? "x86-64-v2" : "x86-64-v3");
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  int v2 = 0, v3 = 0;
  for (int round = 0; round < 20; ++round) {
    for (const KernelRequest& r : requests) {
      std::string text = kernel_assembly(r);
      bool ymm = text.find("ymm") != std::string::npos;
      if (text.find("target x86-64-v2)") != std::string::npos) {
        ++v2;
        EXPECT_FALSE(ymm) << "a kernel headed x86-64-v2 uses ymm registers:\n" << text;
      } else {
        ++v3;
        EXPECT_THAT(text, HasSubstr("target x86-64-v3)"));
        EXPECT_TRUE(ymm) << "a kernel headed x86-64-v3 has no ymm registers:\n" << text;
      }
    }
  }
  done = true;
  switcher.join();
  EXPECT_GT(v2 + v3, 0);
}

TEST(TargetCpu, ATargetTheHostCannotRunIsAnErrorNamingTheMissingFeatures) {
  // A CPU LLVM knows with an instruction-set feature this host lacks (computed, not guessed).
  std::string cpu;
  std::vector<std::string> missing;
  for (const std::string& c : known_target_cpus()) {
    std::vector<std::string> features = cpu_features(c);
    if (!std::binary_search(features.begin(), features.end(), std::string("64bit"))) continue;
    std::vector<std::string> lacks;
    for (const auto& f : features)
      if (!host_has(f)) lacks.push_back(f);
    if (!lacks.empty()) {
      cpu = c;
      missing = lacks;
      break;
    }
  }
  if (cpu.empty()) GTEST_SKIP() << "every 64-bit CPU LLVM knows is a subset of this host";
  std::string before = target_cpu();
  try {
    set_target_cpu(cpu);
    FAIL() << cpu << " accepted on a host that lacks " << missing.front();
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("\"" + cpu + "\""));
    EXPECT_THAT(message, HasSubstr(host_cpu_name()));
    EXPECT_THAT(message, HasSubstr("x86-64-v2"));  // what to do
    for (const auto& f : missing) EXPECT_THAT(message, HasSubstr(f));
  }
  EXPECT_EQ(target_cpu(), before);  // unchanged
}

TEST(TargetCpu, UnknownAnd32BitNamesAreErrors) {
  try {
    resolve_target("not-a-cpu");
    FAIL() << "an unknown name was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("\"not-a-cpu\""));
    for (const char* name : {"native", "x86-64-v2", "x86-64-v3", "x86-64-v4", "skylake"})
      EXPECT_THAT(e.what(), HasSubstr(name));
  }
  try {
    resolve_target("i386");
    FAIL() << "a 32-bit CPU was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("32-bit"));
  }
}

TEST(TargetCpu, TheKnobIsTheDefaultAndTheApiOverridesIt) {
  {
    ScopedEnv env("x86-64-v2");
    ScopedTargetCpu api("x86-64-v3");
    EXPECT_EQ(target_cpu(), "x86-64-v3");
    set_target_cpu("");  // back to the default: the knob
    EXPECT_EQ(target_cpu(), "x86-64-v2");
  }
  {
    ScopedEnv env("not-a-cpu");
    ScopedTargetCpu api("native");
    set_target_cpu("");
    try {
      current_target();
      FAIL() << "a bad KILN_TARGET_CPU was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("KILN_TARGET_CPU=\"not-a-cpu\""));
    }
  }
  ScopedEnv env(nullptr);
  ScopedTargetCpu api("x86-64-v2");
  set_target_cpu("");
  EXPECT_EQ(target_cpu(), "native");
}

// A kernel compiled for one target is never reused for another: not from memory, not from
// disk. Each target's second compile is a memory hit; with the memory cache off, a disk hit.
TEST(TargetCpu, CachesKeyOnTheTarget) {
  EXPECT_NE(target_description(resolve_target("x86-64-v3")),
            target_description(resolve_target("native")));
  EXPECT_NE(target_description(resolve_target("x86-64-v3")),
            target_description(resolve_target("x86-64-v2")));
  testing::ScopedCacheDir dir;
  // Rows no other test (or earlier --gtest_repeat run) compiled: no kernel is in memory yet.
  static int run = 0;
  auto g = testing::optimized_graph(graph_text(1000 + run++));
  bool memory = memory_cache_enabled();
  set_memory_cache_enabled(true);
  auto compile = [&](const std::string& level) {
    ScopedTargetCpu scope(level);
    reset_cache_stats();
    compile_graph(*g);
    return cache_stats();
  };
  CacheStats first = compile("x86-64-v3");
  ASSERT_GT(first.misses, 0);
  EXPECT_EQ(first.memory_hits + first.disk_hits, 0);
  CacheStats other = compile("native");
  EXPECT_EQ(other.misses, first.misses) << "native reused x86-64-v3 kernels";
  EXPECT_EQ(other.memory_hits + other.disk_hits, 0);
  CacheStats again = compile("x86-64-v3");
  EXPECT_EQ(again.misses, 0);
  EXPECT_EQ(again.memory_hits, first.misses);

  set_memory_cache_enabled(false);
  CacheStats disk = compile("x86-64-v3");
  CacheStats v2 = compile("x86-64-v2");
  set_memory_cache_enabled(memory);
  EXPECT_EQ(disk.disk_hits, first.misses);
  EXPECT_EQ(disk.misses, 0);
  EXPECT_EQ(v2.disk_hits, 0) << "x86-64-v2 loaded kernels stored for another target";
  EXPECT_EQ(v2.misses, first.misses);
}

}  // namespace
}  // namespace kiln::codegen
