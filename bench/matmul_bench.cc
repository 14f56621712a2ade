// MatMul throughput (GFLOP/s counter) of kiln against Eigen's own GEMM, oneDNN's sgemm and the
// machine's FMA peak, measured in the same process (runtime/machine_peak.h; counter `of_peak`
// = GFLOP/s / peak at the same thread count), float32, at 1 and 2 threads:
//   MatMul_KilnOp      kiln::runtime::run_op(MatMul): dispatch + output allocation + gemm
//   MatMul_KilnGemm    kiln::runtime::gemm into a preallocated output (every shape below, with
//                      the transposes the gradients use); the label is the plan it ran
//   MatMul_OneDnn      dnnl_sgemm on the same shapes (when built with Debian's libdnnl-dev)
//   MatMul_OneDnnBf16  oneDNN's matmul primitive on bf16 operands (float32 C), beside
//                      MatMul_KilnGemmBf16 (both with of_bf16_peak)
//   MatMul_KilnGemmCold, MatMul_OneDnnCold  the same two with A, B and C flushed from every
//                      cache level before each product (untimed), as in a training step whose
//                      product reads activations written milliseconds before; the other rows
//                      find the operands in cache, left there by the previous iteration
//   MatMul_Eigen       Eigen MatrixXf product on row-major maps (1 thread)
//   MatMul_EigenTensor Eigen Tensor contraction on a ThreadPoolDevice (1 and 2 threads)
//   GemmTuner_FromPoorPlan  the tuner from a poor blocking (bench/gemm_tuner_bench.cc)
// The FMA peak is measured once per thread count, after half a second of load (a virtual CPU
// may run slower for its first few hundred milliseconds), before the first benchmark, so that
// no benchmark's threads share the cores with it (OpenMP's spin a while after each oneDNN
// product, and random interleaving may put any row before the first of a thread count). Machines
// shared with other tenants swing by 2x between phases: compare kiln and oneDNN rows of one run,
// best of repetitions. Arguments: m, k, n, threads (and ta, tb for KilnGemm and OneDnn). Thread
// counts: 1, 2 and every core of the machine when it has more than two.
//
// This file is its own program, kiln_gemm_bench, linking kiln's runtime alone (no LLVM), so it
// runs on any x86-64 machine the runtime's shared libraries can be carried to. Its own flag:
//   --kiln_tune   first tune the engine as `kiln tune` does (runtime/gemm_tuner.h), in this
//                 process only (no table is read or written), and print what it chose; the
//                 KilnGemm rows then run the tuned blocking. Without it, the blocking is the
//                 machine's tuned table if `kiln tune` wrote one, else the derived one.
// Run: kiln_gemm_bench --kiln_tune --benchmark_filter='MatMul_(KilnGemm|OneDnn)/'
// --benchmark_repetitions=3
#define EIGEN_USE_THREADS
#include <benchmark/benchmark.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <fmt/format.h>

#include <Eigen/Core>
#include <random>
#include <unsupported/Eigen/CXX11/Tensor>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "bench/gemm_tuner_bench.h"
#include "kiln/ir/bfloat16.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuner.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/loop_invariants.h"
#include "kiln/runtime/machine_peak.h"
#include "kiln/runtime/threading.h"

#if KILN_BENCH_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace {

using kiln::runtime::Array;

struct Operands {
  Array a, b;
  Operands(int64_t m, int64_t k, int64_t n) {
    a = Array::empty(kiln::DType::f32, kiln::Shape{m, k});
    b = Array::empty(kiln::DType::f32, kiln::Shape{k, n});
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = dist(rng);
    for (int64_t i = 0; i < b.size(); ++i) b.data<float>()[i] = dist(rng);
  }
};

// The same values stored as op() needs them: A is k x m if ta, B is n x k if tb; C is m x n.
struct StoredOperands {
  Array a, b, c;
  StoredOperands(int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
    a = Array::empty(kiln::DType::f32, ta ? kiln::Shape{k, m} : kiln::Shape{m, k});
    b = Array::empty(kiln::DType::f32, tb ? kiln::Shape{n, k} : kiln::Shape{k, n});
    c = Array::empty(kiln::DType::f32, kiln::Shape{m, n});
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = dist(rng);
    for (int64_t i = 0; i < b.size(); ++i) b.data<float>()[i] = dist(rng);
  }
};

// The peak `measure` (runtime/machine_peak.h) finds at `threads` threads, measured once per
// process for each (measure, threads) after a warm-up run.
double measured_peak(kiln::runtime::FmaPeak (*measure)(int, double, int), int threads) {
  static std::mutex mutex;
  static std::map<std::pair<void*, int>, double> peaks;
  std::lock_guard<std::mutex> lock(mutex);
  const std::pair<void*, int> key{reinterpret_cast<void*>(measure), threads};
  auto it = peaks.find(key);
  if (it == peaks.end()) {
    (void)measure(threads, 0.1, 5);  // warm-up
    it = peaks.emplace(key, measure(threads, 0.1, 5).gflops).first;
  }
  return it->second;
}

// The FMA peak at `threads` threads (0 with Eigen's kernels).
double fma_peak_gflops(int threads) {
  return measured_peak(kiln::runtime::measure_fma_peak, threads);
}

// The peak of the bf16 kernels in use at `threads` threads (runtime::measure_bf16_peak: the loop
// of the instruction they run; the FMA peak where bf16 products run on the float32 kernels).
double bf16_peak_gflops(int threads) {
  return measured_peak(kiln::runtime::measure_bf16_peak, threads);
}

void set_flops(benchmark::State& state, int64_t m, int64_t k, int64_t n, int threads = 1) {
  const double flops = 2.0 * double(m) * double(n) * double(k);
  state.counters["GFLOPS"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = fma_peak_gflops(threads);
  if (peak > 0)
    state.counters["of_peak"] =
        benchmark::Counter(flops * 1e-9 / peak, benchmark::Counter::kIsIterationInvariantRate);
}

// Flushes the operands from every cache level, outside the timing (the Cold benchmarks).
void evict_operands(benchmark::State& state, const StoredOperands& ops) {
  state.PauseTiming();
#if defined(__x86_64__)
  for (const Array* x : {&ops.a, &ops.b, &ops.c}) {
    const char* bytes = static_cast<const char*>(x->raw());
    for (size_t i = 0; i < x->nbytes(); i += 64) _mm_clflush(bytes + i);
  }
  _mm_mfence();
#endif
  state.ResumeTiming();
}

// Sets kiln's thread count for one benchmark and restores it afterwards.
class KilnThreads {
 public:
  explicit KilnThreads(int n) : saved_(kiln::num_threads()) { kiln::set_num_threads(n); }
  ~KilnThreads() { kiln::set_num_threads(saved_); }

 private:
  int saved_;
};

void BM_MatMul_KilnOp(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  KilnThreads threads(int(state.range(3)));
  Operands ops(m, k, n);
  const Array in[] = {ops.a, ops.b};
  const kiln::Attrs attrs{{"transpose_a", false}, {"transpose_b", false}};
  for (auto _ : state) {
    Array c = kiln::runtime::run_op(kiln::OpKind::MatMul, in, attrs);
    benchmark::DoNotOptimize(c.raw());
  }
  set_flops(state, m, k, n, int(state.range(3)));
}

// kiln's engine on one product; `loop_invariant`: inside a loop that leaves B unchanged (a
// while loop's capture, such as an RNN's recurrent kernel: runtime/loop_invariants.h), where B
// is packed once, by the first iteration, then read packed by every product; `cold`: the
// operands flushed from the caches before each product.
void run_kiln_gemm(benchmark::State& state, bool loop_invariant, bool cold = false) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(4) != 0, tb = state.range(5) != 0;
  KilnThreads threads(int(state.range(3)));
  const StoredOperands ops(m, k, n, ta, tb);
  std::optional<kiln::runtime::LoopInvariantScope> loop;
  if (loop_invariant)
    loop.emplace(std::vector<std::pair<const void*, size_t>>{{ops.b.raw(), ops.b.nbytes()}});
  for (auto _ : state) {
    if (cold) evict_operands(state, ops);
    kiln::runtime::gemm<float>(ta, tb, m, n, k, ops.a.data<float>(), ta ? m : k,
                               ops.b.data<float>(), tb ? k : n, ops.c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, int(state.range(3)));
  // The plan it ran (tile shape, blocking, B's mode and where the blocking came from).
  std::string label = kiln::runtime::gemm_kernels();
  if (const auto* mk = kiln::runtime::gemm_detail::active_microkernels()) {
    kiln::runtime::gemm_detail::GemmShape shape{m, n, k, ta, tb, int(state.range(3))};
    shape.b_invariant = loop_invariant;
    const auto plan = kiln::runtime::gemm_detail::make_gemm_plan(
        *mk, shape, kiln::runtime::gemm_detail::gemm_params(*mk, shape));
    label = fmt::format("{} {} kc {} nc {} B {} {}", plan.isa, plan.kernel->name, plan.kc, plan.nc,
                        name(plan.b), plan.source);
  }
  state.SetLabel(label);
}

void BM_MatMul_KilnGemm(benchmark::State& state) { run_kiln_gemm(state, false); }

void BM_MatMul_KilnGemmCold(benchmark::State& state) { run_kiln_gemm(state, false, true); }

// A product with a fused epilogue, as a compiled step's contraction runs it (runtime::gemm_rows:
// C in blocks of whole rows, each block's epilogue right after it, on its thread): the relu
// gradient of a dense layer, C = X > 0 ? op(A) op(B) : 0, X an m x n array flushed from the
// caches before each product with A, B and C (the activation a backward step reads was written
// long before). Its ratio to BM_MatMul_KilnGemmCold is what the epilogue costs.
void BM_MatMul_KilnGemmEpilogueCold(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(4) != 0, tb = state.range(5) != 0;
  KilnThreads threads(int(state.range(3)));
  const StoredOperands ops(m, k, n, ta, tb);
  const StoredOperands activations(m, n, 1, false, false);  // its A: the m x n array X
  const float* x = activations.a.data<float>();
  float* c = ops.c.data<float>();
  const std::function<void(int64_t, int64_t)> relu_grad = [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0 * n; i < r1 * n; ++i) c[i] = x[i] > 0.f ? c[i] : 0.f;
  };
  for (auto _ : state) {
    evict_operands(state, ops);
    evict_operands(state, activations);
    kiln::runtime::gemm_rows<float>(ta, tb, m, n, k, ops.a.data<float>(), ta ? m : k,
                                    ops.b.data<float>(), tb ? k : n, c, n, relu_grad);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, int(state.range(3)));
}

// Its ratio to BM_MatMul_KilnGemm is what packing a loop's weight once gains per step.
void BM_MatMul_KilnGemmLoopInvariant(benchmark::State& state) { run_kiln_gemm(state, true); }

// The same products of bf16 operands into float32 (runtime::gemm_bf16: the engine widens them
// as it packs them; the values those of BM_MatMul_KilnGemm on the widened operands): the cost
// of bf16 operands on a CPU that multiplies them in float32, as a ratio to that benchmark.
void BM_MatMul_KilnGemmBf16(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(4) != 0, tb = state.range(5) != 0;
  KilnThreads threads(int(state.range(3)));
  const StoredOperands ops(m, k, n, ta, tb);
  std::vector<kiln::bfloat16> a(size_t(ops.a.size())), b(size_t(ops.b.size()));
  for (size_t i = 0; i < a.size(); ++i) a[i] = kiln::bfloat16::from_float(ops.a.data<float>()[i]);
  for (size_t i = 0; i < b.size(); ++i) b[i] = kiln::bfloat16::from_float(ops.b.data<float>()[i]);
  for (auto _ : state) {
    kiln::runtime::gemm_bf16(ta, tb, m, n, k, a.data(), ta ? m : k, b.data(), tb ? k : n,
                             ops.c.data<float>(), n, true);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, int(state.range(3)));
  // of_bf16_peak: against the peak of the instruction the bf16 kernels run (of_peak stays the
  // float32 FMA peak, for comparison with BM_MatMul_KilnGemm).
  const double peak = bf16_peak_gflops(int(state.range(3)));
  if (peak > 0)
    state.counters["of_bf16_peak"] =
        benchmark::Counter(2e-9 * double(m) * double(n) * double(k) / peak,
                           benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(kiln::runtime::gemm_bf16_kernels());
}

// Products of float32 operands read as bf16 (a Dense layer under mixed_bfloat16): `form` 0
// casts both operands to bf16 in a parallel pass each (what a compiled step did before the casts
// fused into the product) and multiplies the bf16 copies; 1 hands gemm_bf16 the float32
// operands, rounded as they are packed (runtime::Bf16Operand::rounded, fusion rule 5e). The
// same bits; their ratio is what fusing the casts saves. Operands are as they are after a
// step's other work (in L3 where they fit).
void BM_MatMul_KilnGemmBf16FromFloat32(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(4) != 0, tb = state.range(5) != 0, fused = state.range(6) != 0;
  KilnThreads threads(int(state.range(3)));
  const StoredOperands ops(m, k, n, ta, tb);
  std::vector<kiln::bfloat16> a(size_t(ops.a.size())), b(size_t(ops.b.size()));
  auto cast = [](const float* src, std::vector<kiln::bfloat16>& dst) {
    kiln::runtime::parallel_for(int64_t(dst.size()), kiln::runtime::kElementwiseGrain,
                                [&](int64_t i0, int64_t i1) {
                                  for (int64_t i = i0; i < i1; ++i)
                                    dst[size_t(i)] = kiln::bfloat16::from_float(src[i]);
                                });
  };
  for (auto _ : state) {
    if (fused) {
      kiln::runtime::gemm_bf16(ta, tb, m, n, k,
                               kiln::runtime::Bf16Operand::rounded(ops.a.data<float>()), ta ? m : k,
                               kiln::runtime::Bf16Operand::rounded(ops.b.data<float>()), tb ? k : n,
                               ops.c.data<float>(), n, true);
    } else {
      cast(ops.a.data<float>(), a);
      cast(ops.b.data<float>(), b);
      kiln::runtime::gemm_bf16(ta, tb, m, n, k, a.data(), ta ? m : k, b.data(), tb ? k : n,
                               ops.c.data<float>(), n, true);
    }
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, int(state.range(3)));
  state.SetLabel(fused ? "rounded as packed" : "cast passes");
}

// The same products under plans whose tasks hold at least `panels` row panels where the rows
// allow it (GemmParams::min_task_panels; 1: the thinnest row blocks), the rest of the plan
// as kiln makes it: the grid rule's A/B in one process.
void BM_MatMul_KilnTaskPanels(benchmark::State& state) {
  namespace gd = kiln::runtime::gemm_detail;
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(4) != 0, tb = state.range(5) != 0;
  const gd::MicroKernels* mk = gd::active_microkernels();
  if (mk == nullptr) return state.SkipWithError("Eigen's GEMM: no plans");
  KilnThreads threads(int(state.range(3)));
  const StoredOperands ops(m, k, n, ta, tb);
  const gd::GemmShape shape{m, n, k, ta, tb, int(state.range(3))};
  gd::GemmParams p = gd::gemm_params(*mk, shape);
  p.min_task_panels = state.range(6);
  const gd::GemmPlan plan = gd::make_gemm_plan(*mk, shape, p);
  const gd::SgemmArgs args{ta,         tb,
                           m,          n,
                           k,          ops.a.data<float>(),
                           ta ? m : k, ops.b.data<float>(),
                           tb ? k : n, ops.c.data<float>(),
                           n,          false};
  for (auto _ : state) {
    gd::run_gemm(*mk, plan, args);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, int(state.range(3)));
  state.SetLabel(fmt::format("grid {}x{}", plan.row_blocks, plan.col_blocks));
}

#if KILN_BENCH_ONEDNN
void run_onednn(benchmark::State& state, bool cold) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(4) != 0, tb = state.range(5) != 0;
  const int threads = int(state.range(3));
  omp_set_num_threads(threads);
  const StoredOperands ops(m, k, n, ta, tb);
  for (auto _ : state) {
    if (cold) evict_operands(state, ops);
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, ops.a.data<float>(), ta ? m : k,
               ops.b.data<float>(), tb ? k : n, 0.0f, ops.c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, threads);
  state.SetLabel("onednn sgemm");
}

void BM_MatMul_OneDnn(benchmark::State& state) { run_onednn(state, false); }

// oneDNN's matmul primitive on bf16 operands into float32 (created before the timed loop, as a
// framework caches it): the peer of BM_MatMul_KilnGemmBf16, on the same bf16 peak.
void BM_MatMul_OneDnnBf16(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const bool ta = state.range(4) != 0, tb = state.range(5) != 0;
  const int threads = int(state.range(3));
  omp_set_num_threads(threads);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::desc a_desc({m, k}, dt::bf16, ta ? tag::ba : tag::ab);
  const dnnl::memory::desc b_desc({k, n}, dt::bf16, tb ? tag::ba : tag::ab);
  const dnnl::memory::desc c_desc({m, n}, dt::f32, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine);
  const dnnl::matmul product(pd);
  dnnl::memory a(a_desc, engine), b(b_desc, engine), c(c_desc, engine);
  const StoredOperands ops(m, k, n, ta, tb);
  auto to_bf16 = [](const Array& from, const dnnl::memory& to) {
    auto* bits = static_cast<kiln::bfloat16*>(to.get_data_handle());
    for (int64_t i = 0; i < from.size(); ++i)
      bits[i] = kiln::bfloat16::from_float(from.data<float>()[i]);
  };
  to_bf16(ops.a, a);
  to_bf16(ops.b, b);
  for (auto _ : state) {
    product.execute(stream, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    stream.wait();
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, threads);
  const double peak = bf16_peak_gflops(threads);
  if (peak > 0)
    state.counters["of_bf16_peak"] =
        benchmark::Counter(2e-9 * double(m) * double(n) * double(k) / peak,
                           benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string("onednn matmul bf16 ") + pd.impl_info_str());
}

void BM_MatMul_OneDnnCold(benchmark::State& state) { run_onednn(state, true); }
#endif

void BM_MatMul_Eigen(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Operands ops(m, k, n);
  Eigen::Map<const RowMat> a(ops.a.data<float>(), m, k), b(ops.b.data<float>(), k, n);
  RowMat c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n);
}

void BM_MatMul_EigenTensor(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = int(state.range(3));
  using Mat = Eigen::Tensor<float, 2, Eigen::RowMajor>;
  Operands ops(m, k, n);
  Eigen::TensorMap<const Mat> a(ops.a.data<float>(), m, k), b(ops.b.data<float>(), k, n);
  Mat c(m, n);
  Eigen::ThreadPool pool(threads);
  Eigen::ThreadPoolDevice device(&pool, threads);
  const Eigen::array<Eigen::IndexPair<int>, 1> dims = {Eigen::IndexPair<int>(1, 0)};
  for (auto _ : state) {
    c.device(device) = a.contract(b, dims);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n, threads);
}

// Issue 21's four shapes (m x k x n): 1024^3, 512 x 1024 x 1024, 64 x 784 x 256 (the small
// MLP's first layer), 1024 x 128 x 384 (a transformer's q, k, v projection of 16 x 64 tokens).
constexpr int64_t kShapes[][3] = {
    {1024, 1024, 1024}, {512, 1024, 1024}, {64, 784, 256}, {1024, 128, 384}};

void Shapes(benchmark::internal::Benchmark* b, std::initializer_list<int64_t> threads) {
  for (int64_t t : threads)
    for (const auto& s : kShapes) b->Args({s[0], s[1], s[2], t});
  b->ArgNames({"m", "k", "n", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// 1, 2 and all of the machine's logical CPUs when there are more than two.
std::vector<int64_t> thread_counts() {
  std::vector<int64_t> counts = {1, 2};
  const int64_t all = int64_t(std::thread::hardware_concurrency());
  if (all > 2) counts.push_back(all);
  return counts;
}

// Issue 35's table (1024^3, 512 x 1024 x 1024, 64 x 784 x 256, 2048 x 256 x 1024,
// 1024 x 128 x 512), then every product `kiln tune` tunes for (runtime/gemm_tuner.h:
// tuning_shapes, the MLP, transformer block, LSTM and CNN steps' GEMMs with the transposes
// their gradients use: ta dW = X^T dY, tb dX = dY W^T), each once.
std::vector<std::array<int64_t, 6>> gemm_rows() {
  std::vector<std::array<int64_t, 5>> shapes = {{1024, 1024, 1024, 0, 0},
                                                {512, 1024, 1024, 0, 0},
                                                {64, 784, 256, 0, 0},
                                                {2048, 256, 1024, 0, 0},
                                                {1024, 128, 512, 0, 0}};
  for (const kiln::runtime::gemm_detail::GemmShape& s :
       kiln::runtime::gemm_detail::tuning_shapes()) {
    const std::array<int64_t, 5> row = {s.m, s.k, s.n, s.ta, s.tb};
    if (std::find(shapes.begin(), shapes.end(), row) == shapes.end()) shapes.push_back(row);
  }
  std::vector<std::array<int64_t, 6>> rows;
  for (int64_t t : thread_counts())
    for (const auto& s : shapes) rows.push_back({s[0], s[1], s[2], t, s[3], s[4]});
  return rows;
}

void GemmShapes(benchmark::internal::Benchmark* b) {
  for (const auto& r : gemm_rows()) b->Args({r[0], r[1], r[2], r[3], r[4], r[5]});
  b->ArgNames({"m", "k", "n", "threads", "ta", "tb"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// The GemmShapes rows of at most 64 rows (an RNN step's products, a small batch's layers).
void FewRowGemmShapes(benchmark::internal::Benchmark* b) {
  for (const auto& r : gemm_rows())
    if (r[0] <= 64) b->Args({r[0], r[1], r[2], r[3], r[4], r[5]});
  b->ArgNames({"m", "k", "n", "threads", "ta", "tb"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

// Every GemmShapes row with tasks of at least 1 and of the default count of row panels.
void TaskPanelShapes(benchmark::internal::Benchmark* b) {
  for (const auto& r : gemm_rows())
    for (int64_t panels : {int64_t(1), kiln::runtime::gemm_detail::GemmParams{}.min_task_panels})
      b->Args({r[0], r[1], r[2], r[3], r[4], r[5], panels});
  b->ArgNames({"m", "k", "n", "threads", "ta", "tb", "panels"})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_MatMul_KilnOp)->Apply([](auto* b) { Shapes(b, {1, 2}); });
BENCHMARK(BM_MatMul_KilnGemm)->Apply(GemmShapes);
BENCHMARK(BM_MatMul_KilnGemmCold)->Apply(GemmShapes);
BENCHMARK(BM_MatMul_KilnGemmEpilogueCold)->Apply(GemmShapes);
BENCHMARK(BM_MatMul_KilnGemmLoopInvariant)->Apply(FewRowGemmShapes);
BENCHMARK(BM_MatMul_KilnGemmBf16)->Apply(GemmShapes);
BENCHMARK(BM_MatMul_KilnTaskPanels)->Apply(TaskPanelShapes);
BENCHMARK(BM_MatMul_KilnGemmBf16FromFloat32)->Apply([](auto* b) {
  // The MLP-1024 step's Dense products: forward, weight gradient (ta), input gradient (tb).
  for (int64_t t : {1, 2})
    for (const auto& s : {std::array<int64_t, 5>{512, 1024, 1024, 0, 0},
                          std::array<int64_t, 5>{1024, 512, 1024, 1, 0},
                          std::array<int64_t, 5>{512, 1024, 1024, 0, 1}})
      for (int64_t form : {0, 1}) b->Args({s[0], s[1], s[2], t, s[3], s[4], form});
  b->ArgNames({"m", "k", "n", "threads", "ta", "tb", "fused"})
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
});
#if KILN_BENCH_ONEDNN
BENCHMARK(BM_MatMul_OneDnn)->Apply(GemmShapes);
BENCHMARK(BM_MatMul_OneDnnCold)->Apply(GemmShapes);
BENCHMARK(BM_MatMul_OneDnnBf16)->Apply(GemmShapes);
#endif
BENCHMARK(BM_MatMul_Eigen)->Apply([](auto* b) { Shapes(b, {1}); });
BENCHMARK(BM_MatMul_EigenTensor)->Apply([](auto* b) { Shapes(b, {1, 2}); });

}  // namespace

int main(int argc, char** argv) {
  bool tune = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--kiln_tune") == 0)
      tune = true;
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("kiln_cpu", kiln::runtime::cpu_info().describe());
  benchmark::AddCustomContext("kiln_gemm_kernels", kiln::runtime::gemm_kernels());
  if (tune) kiln::bench::tune_gemm_in_process();
  for (int64_t threads : thread_counts()) (void)fma_peak_gflops(int(threads));
  if (const auto* mk = kiln::runtime::gemm_detail::active_microkernels())
    benchmark::AddCustomContext("kiln_gemm_blocking",
                                tune ? std::string("tuned in this process (--kiln_tune)")
                                     : kiln::runtime::gemm_detail::gemm_tuning_status(*mk));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
