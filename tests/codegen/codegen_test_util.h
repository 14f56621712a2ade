// Helpers of the codegen tests: seeded random arrays, a tolerance comparison that treats NaNs
// as equal, and "compile this graph and compare it with the reference executor".
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kiln/codegen/compile_graph.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/ir/bfloat16.h"
#include "kiln/ir/graph.h"
#include "kiln/ir/parser.h"
#include "kiln/passes/pipeline.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/reference_executor.h"
#include "kiln/runtime/threading.h"

namespace kiln::testing {

// Uniform in [lo, hi) (integers: ten times that, rounded; bf16: the float32 draw rounded).
inline runtime::Array random_array(const TensorType& t, std::mt19937& rng, double lo = -2.0,
                                   double hi = 2.0) {
  runtime::Array a = runtime::Array::empty(t);
  std::uniform_real_distribution<double> u(lo, hi);
  if (t.dtype == DType::bf16) {
    auto* p = static_cast<bfloat16*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) p[i] = bfloat16::from_float(float(u(rng)));
    return a;
  }
  visit_dtype(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) {
      double x = u(rng);
      if constexpr (std::is_same_v<T, bool>)
        p[i] = x > 0;
      else if constexpr (std::is_floating_point_v<T>)
        p[i] = T(x);
      else if constexpr (std::is_same_v<T, uint8_t>)
        p[i] = T(std::abs(std::lround(x * 10)) % 200);
      else
        p[i] = T(std::lround(x * 10));
    }
  });
  return a;
}

// One seeded random argument (random_array) per parameter of `g`.
inline std::vector<runtime::Array> random_args(const ir::Graph& g, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<runtime::Array> args;
  for (const auto& p : g.parameters()) args.push_back(random_array(p->type(), rng));
  return args;
}

inline double element(const runtime::Array& a, int64_t i) {
  if (a.dtype == DType::bf16) return static_cast<const bfloat16*>(a.raw())[i].to_float();
  double v = 0;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    v = double(static_cast<const T*>(a.raw())[i]);
  });
  return v;
}

// |a - b| <= atol + rtol * |b| elementwise (NaN matches NaN, inf matches the same inf).
inline ::testing::AssertionResult all_close(const runtime::Array& got, const runtime::Array& want,
                                            double rtol, double atol) {
  if (got.dtype != want.dtype || got.shape != want.shape)
    return ::testing::AssertionFailure()
           << "type " << dtype_name(got.dtype) << got.shape.to_string() << " vs "
           << dtype_name(want.dtype) << want.shape.to_string();
  for (int64_t i = 0; i < got.size(); ++i) {
    double g = element(got, i), w = element(want, i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (g == w) continue;
    if (std::isinf(g) || std::isinf(w) || std::isnan(g) || std::isnan(w) ||
        std::abs(g - w) > atol + rtol * std::abs(w))
      return ::testing::AssertionFailure()
             << "element " << i << " of " << got.size() << ": got " << g << ", want " << w
             << " (rtol " << rtol << ", atol " << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

// The graph in `text` through the optimize pipeline (fusion included), as a traced function's
// graph is before codegen.
inline std::unique_ptr<ir::Graph> optimized_graph(const std::string& text) {
  auto g = ir::parse_graph(text, "test");
  passes::optimize_pipeline({}).run(*g);
  return g;
}

// A fresh buffer with a's contents.
inline runtime::Array copy_of(const runtime::Array& a) {
  runtime::Array c = runtime::Array::empty(a.type());
  if (a.nbytes() > 0) std::memcpy(c.raw(), a.raw(), a.nbytes());
  return c;
}

struct RunResult {
  std::vector<runtime::Array> outputs;
  std::vector<runtime::Array> variables;
};

// A disk cache of its own (a fresh temporary directory, removed afterwards), so tests never
// touch the user's kernel cache.
class ScopedCacheDir {
 public:
  ScopedCacheDir() : old_(codegen::cache_dir()) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "kiln_codegen_test_XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
    codegen::set_cache_dir(dir_);  // "" (mkdtemp failed) disables the disk cache
  }
  ~ScopedCacheDir() {
    codegen::set_cache_dir(old_);
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  ScopedCacheDir(const ScopedCacheDir&) = delete;
  ScopedCacheDir& operator=(const ScopedCacheDir&) = delete;

 private:
  std::string old_, dir_;
};

inline RunResult run_reference(const ir::Graph& g, const std::vector<runtime::Array>& args,
                               std::vector<runtime::Array> vars) {
  RunResult r;
  r.outputs = runtime::execute_reference(g, args, vars);
  r.variables = vars;
  return r;
}

inline RunResult run_compiled(const ir::Graph& g, const std::vector<runtime::Array>& args,
                              std::vector<runtime::Array> vars) {
  auto exe = codegen::compile_graph(g);
  RunResult r;
  r.outputs = exe->run(args, vars);
  r.variables = vars;
  return r;
}

// Bitwise equality (-0.0 and +0.0 differ; any NaN equals any NaN only if the bits match).
inline ::testing::AssertionResult bitwise_equal(const runtime::Array& got,
                                                const runtime::Array& want) {
  if (got.type() != want.type()) return ::testing::AssertionFailure() << "types differ";
  const size_t n = size_t(got.size()) * dtype_size(got.dtype);
  if (n == 0 || std::memcmp(got.raw(), want.raw(), n) == 0) return ::testing::AssertionSuccess();
  for (int64_t i = 0; i < got.size(); ++i) {
    double g = element(got, i), w = element(want, i);
    if (!(g == w && std::signbit(g) == std::signbit(w)) && !(std::isnan(g) && std::isnan(w)))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << ", want " << w;
  }
  return ::testing::AssertionFailure() << "NaN payloads differ";
}

// Runs `g` compiled at 1, 2 and 3 threads; each result must equal the reference bitwise.
inline void expect_bitwise_at_thread_counts(const ir::Graph& g,
                                            const std::vector<runtime::Array>& args,
                                            const std::string& what) {
  std::vector<runtime::Array> want = run_reference(g, args, {}).outputs;
  auto exe = codegen::compile_graph(g);
  const int threads = num_threads();
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    std::vector<runtime::Array> vars;
    std::vector<runtime::Array> got = exe->run(args, vars);
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(bitwise_equal(got[i], want[i]))
          << what << ", output " << i << ", " << t << " threads";
  }
  set_num_threads(threads);
}

}  // namespace kiln::testing
