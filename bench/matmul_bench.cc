// MatMul throughput (GFLOP/s counter) of kiln against Eigen's own GEMM in the same binary,
// float32, at 1 and 2 threads, for (64x784)x(784x256) and (512x1024)x(1024x1024):
//   MatMul_KilnOp      kiln::runtime::run_op(MatMul): dispatch + output allocation + gemm
//   MatMul_KilnGemm    kiln::runtime::gemm into a preallocated output
//   MatMul_Eigen       Eigen MatrixXf product on row-major maps (1 thread; kiln's baseline)
//   MatMul_EigenTensor Eigen Tensor contraction on a ThreadPoolDevice (1 and 2 threads)
// Arguments: m, k, n, threads. Run: kiln_bench --benchmark_filter=MatMul
#define EIGEN_USE_THREADS
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <random>
#include <unsupported/Eigen/CXX11/Tensor>

#include "runtime/gemm.h"
#include "runtime/kernels.h"
#include "runtime/threading.h"

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

void set_flops(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(m) * double(n) * double(k) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
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
  set_flops(state, m, k, n);
}

void BM_MatMul_KilnGemm(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  KilnThreads threads(int(state.range(3)));
  Operands ops(m, k, n);
  Array c = Array::empty(kiln::DType::f32, kiln::Shape{m, n});
  for (auto _ : state) {
    kiln::runtime::gemm<float>(false, false, m, n, k, ops.a.data<float>(), k, ops.b.data<float>(),
                               n, c.data<float>(), n);
    benchmark::ClobberMemory();
  }
  set_flops(state, m, k, n);
}

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
  set_flops(state, m, k, n);
}

void Shapes(benchmark::internal::Benchmark* b, std::initializer_list<int64_t> threads) {
  for (int64_t t : threads) {
    b->Args({64, 784, 256, t});
    b->Args({512, 1024, 1024, t});
  }
  b->ArgNames({"m", "k", "n", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_MatMul_KilnOp)->Apply([](auto* b) { Shapes(b, {1, 2}); });
BENCHMARK(BM_MatMul_KilnGemm)->Apply([](auto* b) { Shapes(b, {1, 2}); });
BENCHMARK(BM_MatMul_Eigen)->Apply([](auto* b) { Shapes(b, {1}); });
BENCHMARK(BM_MatMul_EigenTensor)->Apply([](auto* b) { Shapes(b, {1, 2}); });

}  // namespace
