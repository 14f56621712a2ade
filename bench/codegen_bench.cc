// Code generation benchmarks (issue: LLVM codegen), as ratios measured in this one binary:
//
//   LayerNormGeluResidual/<mode>  y = gelu_tanh(layernorm(x) * gamma + beta) + r on [4096, 1024]
//     f32, mode: Copy (memcpy of one [4096, 1024] tensor: the bandwidth baseline), Eager (kiln
//     ops one by one), Compiled (the same code in a kiln::function: fused, JIT-compiled).
//     Counters of Compiled: x_roofline = time / (bytes it must move / copy bandwidth), where
//     it must read x and r and write y (3 x 16 MiB), and the copy bandwidth is measured in the
//     same process just before; x_faster_than_eager = eager time / compiled time (eager timed
//     in the same process, median of 5).
//   CompileMlpStep/<cold|warm>  trace + optimize + JIT of the digits-MLP training step (Dense
//     128 relu, Dense 10, Adam, batch 64): cold with an empty disk cache, warm with the disk
//     cache filled by a previous compile (in-memory cache off in both), in milliseconds.
//   CompileMlpDepth/<8|32|128>  cold compile of a Dense(64, gelu) x depth training step; nodes
//     and microseconds per node (compile scaling).
//   CompileTransformerBlocks/<1|4|12>  the same for a stack of transformer blocks.
// Run: kiln_bench --benchmark_filter='LayerNorm|Compile(Mlp|Transformer)'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include "bench/bench_util.h"
#include "bench/suite/suite.h"
#include "kiln/codegen/compile_driver.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/kiln.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRows = 4096, kCols = 1024;

using bench::layer_norm_gelu_residual_ops;

struct LayerNormInputs {
  Tensor x, r, gamma, beta;
  LayerNormInputs() {
    x = random_normal({kRows, kCols}, 1);
    r = random_normal({kRows, kCols}, 2);
    gamma = random_uniform({kCols}, 3, 0.5, 1.5);
    beta = random_uniform({kCols}, 4, -0.5, 0.5);
  }
};

using bench_util::median_seconds;

// Seconds per byte moved by a memcpy of one [4096, 1024] f32 tensor (bytes = read + write).
double copy_seconds_per_byte() {
  const size_t n = size_t(kRows * kCols) * sizeof(float);
  std::vector<char> a(n, 1), b(n);
  double s = median_seconds(9, [&] {
    std::memcpy(b.data(), a.data(), n);
    benchmark::DoNotOptimize(b.data());
  });
  return s / double(2 * n);
}

void LayerNormGeluResidual_Copy(benchmark::State& state) {
  const size_t n = size_t(kRows * kCols) * sizeof(float);
  std::vector<char> a(n, 1), b(n);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * n));
}
BENCHMARK(LayerNormGeluResidual_Copy)->Unit(benchmark::kMillisecond)->UseRealTime();

void LayerNormGeluResidual_Eager(benchmark::State& state) {
  LayerNormInputs in;
  for (auto _ : state) {
    Tensor y = layer_norm_gelu_residual_ops(in.x, in.r, in.gamma, in.beta);
    benchmark::DoNotOptimize(y.data<float>());
  }
}
BENCHMARK(LayerNormGeluResidual_Eager)->Unit(benchmark::kMillisecond)->UseRealTime();

void LayerNormGeluResidual_Compiled(benchmark::State& state) {
  LayerNormInputs in;
  auto f = kiln::function([](const Tensor& x, const Tensor& r, const Tensor& g,
                             const Tensor& b) { return layer_norm_gelu_residual_ops(x, r, g, b); },
                          {.name = "layer_norm_gelu_residual"});
  f(in.x, in.r, in.gamma, in.beta);  // trace and compile
  const double eager = median_seconds(5, [&] {
    Tensor y = layer_norm_gelu_residual_ops(in.x, in.r, in.gamma, in.beta);
    benchmark::DoNotOptimize(y.data<float>());
  });
  const double bytes = 3.0 * double(kRows * kCols) * sizeof(float);
  const double roofline = bytes * copy_seconds_per_byte();
  auto start = Clock::now();
  for (auto _ : state) {
    Tensor y = f(in.x, in.r, in.gamma, in.beta);
    benchmark::DoNotOptimize(y.data<float>());
  }
  const double per_call =
      std::chrono::duration<double>(Clock::now() - start).count() / double(state.iterations());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));
  state.counters["roofline_ms"] = roofline * 1e3;
  state.counters["eager_ms"] = eager * 1e3;
  state.counters["x_roofline"] = per_call / roofline;
  state.counters["x_faster_than_eager"] = eager / per_call;
}
BENCHMARK(LayerNormGeluResidual_Compiled)->Unit(benchmark::kMillisecond)->UseRealTime();

// The digits-MLP training step, traced afresh (new model) and compiled.
double compile_mlp_step_seconds() {
  set_random_seed(0);
  Tensor x = zeros({64, 64});
  Tensor y = zeros({64}, DType::i64);
  Sequential model({Dense(128, {.activation = "relu"}), Dense(10)}, Shape{64});
  model->compile({.optimizer = Adam(),
                  .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true),
                  .metrics = {"accuracy"}});
  auto start = Clock::now();
  ConcreteFunction step = model->train_step_function(x, y);
  codegen::CompiledFunction c =
      codegen::compile_function(step.graph(), step.graph().parameter_types(), {});
  benchmark::DoNotOptimize(c.code.executable.get());
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void CompileMlpStep(benchmark::State& state) {
  const bool warm = state.range(0) == 1;
  std::string saved = codegen::cache_dir();
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln-bench-cache-" + std::to_string(::getpid()));
  codegen::set_memory_cache_enabled(false);
  codegen::set_cache_dir(dir.string());
  if (warm) compile_mlp_step_seconds();  // fills the disk cache
  for (auto _ : state) {
    if (!warm) std::filesystem::remove_all(dir);
    state.SetIterationTime(compile_mlp_step_seconds());
  }
  codegen::set_memory_cache_enabled(true);
  codegen::set_cache_dir(saved);
  std::filesystem::remove_all(dir);
}
BENCHMARK(CompileMlpStep)
    ->ArgName("warm")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(5);

// Compile scaling (issue 16): a model's training step traced afresh and compiled cold (empty
// disk cache, in-memory cache off). Counters: the traced graph's nodes, the cold compile time
// per node (which should stay roughly constant as the model grows), the time of each stage
// (trace, optimize = specialise + pass pipeline, codegen = kernels + executable) and the
// kernels (all, and compiled by LLVM: equal bodies share code), and the fusion pass's share
// of optimize (the pass that was quadratic).
// `make(size)` returns the compiled model and one batch (x, y).
template <typename Make>
void compile_scaling(benchmark::State& state, Make make) {
  const int size = int(state.range(0));
  std::string saved = codegen::cache_dir();
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("kiln-bench-depth-cache-" + std::to_string(::getpid()));
  codegen::set_memory_cache_enabled(false);
  codegen::set_cache_dir(dir.string());
  size_t nodes = 0;
  double total_seconds = 0, trace_ms = 0, optimize_ms = 0, codegen_ms = 0;
  double kernels = 0, compiled_kernels = 0, llvm_ms_sum = 0, fusion_ms = 0;
  for (auto _ : state) {
    std::filesystem::remove_all(dir);
    clear_session();
    set_random_seed(0);
    auto [model, x, y] = make(size);
    auto start = Clock::now();
    ConcreteFunction step = model->train_step_function(x, y);
    const double traced = std::chrono::duration<double>(Clock::now() - start).count();
    codegen::CompiledFunction c =
        codegen::compile_function(step.graph(), step.graph().parameter_types(), {});
    benchmark::DoNotOptimize(c.code.executable.get());
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
    nodes = step.graph().total_node_count();
    trace_ms += traced * 1e3;
    optimize_ms += c.optimize_seconds * 1e3;
    codegen_ms += c.codegen_seconds * 1e3;
    kernels = double(c.code.kernels.size());
    for (const auto& t : c.pass_timings)
      if (t.name == "fusion") fusion_ms += double(t.total_us) / 1e3;
    compiled_kernels = 0;
    llvm_ms_sum = 0;
    for (const codegen::KernelRecord& k : c.code.kernels) {
      if (k.compiled.source == codegen::KernelSource::kCompiled) compiled_kernels += 1;
      llvm_ms_sum += k.compiled.compile_seconds() * 1e3;
    }
  }
  const double runs = double(state.iterations());
  state.counters["trace_ms"] = trace_ms / runs;
  state.counters["optimize_ms"] = optimize_ms / runs;
  state.counters["codegen_ms"] = codegen_ms / runs;
  state.counters["fusion_ms"] = fusion_ms / runs;
  state.counters["kernels"] = kernels;
  state.counters["compiled_kernels"] = compiled_kernels;
  state.counters["kernel_cpu_ms"] = llvm_ms_sum;
  state.counters["nodes"] = double(nodes);
  state.counters["us_per_node"] = total_seconds / runs / double(nodes) * 1e6;
  codegen::set_memory_cache_enabled(true);
  codegen::set_cache_dir(saved);
  std::filesystem::remove_all(dir);
}

struct ScalingCase {
  Model model;
  Tensor x, y;
};

// `depth` Dense(64, gelu) layers and a Dense(10) (Adam, batch 32, sparse cross-entropy).
void CompileMlpDepth(benchmark::State& state) {
  compile_scaling(state, [](int depth) {
    std::vector<Layer> layers;
    for (int i = 0; i < depth; ++i) layers.push_back(Dense(64, {.activation = "gelu"}));
    layers.push_back(Dense(10));
    Sequential model(layers, Shape{64});
    model->compile({.optimizer = Adam(),
                    .loss = losses::sparse_categorical_crossentropy(/*from_logits=*/true)});
    return ScalingCase{model, zeros({32, 64}), zeros({32}, DType::i64)};
  });
}

// `blocks` pre-norm causal transformer blocks (d_model 64, 4 heads, feed-forward 256, GELU;
// the kiln bench block at a quarter of its width), MSE on [8, 32, 64] (Adam).
void CompileTransformerBlocks(benchmark::State& state) {
  compile_scaling(state, [](int blocks) {
    constexpr int64_t kSeq = 32, kDim = 64, kHeads = 4, kFF = 256;
    Tensor x = Input(Shape{kSeq, kDim});
    Tensor h = x;
    for (int b = 0; b < blocks; ++b) {
      Tensor a = MultiHeadAttention(kHeads, kDim / kHeads,
                                    {.use_causal_mask = true})(LayerNormalization()(h));
      h = Add()({h, a});
      Tensor f = Dense(kDim)(Dense(kFF, {.activation = "gelu"})(LayerNormalization()(h)));
      h = Add()({h, f});
    }
    Model model(x, h);
    model->compile({.optimizer = Adam(), .loss = losses::mean_squared_error()});
    return ScalingCase{model, zeros({8, kSeq, kDim}), zeros({8, kSeq, kDim})};
  });
}
BENCHMARK(CompileTransformerBlocks)
    ->ArgName("blocks")
    ->Arg(1)
    ->Arg(4)
    ->Arg(12)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(2);

BENCHMARK(CompileMlpDepth)
    ->ArgName("depth")
    ->Arg(8)
    ->Arg(32)
    ->Arg(128)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(2);

}  // namespace
