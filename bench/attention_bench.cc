// The fused attention op (kiln::attention, runtime/kernels/attention.cc) against the unfused
// ops it replaces in MultiHeadAttention (matmul, where, softmax, matmul), in one binary:
//
//   Attention_<Fused|Unfused>_<Forward|Train>/<shape>/<threads>
//     Forward: out = attention(q, k, v) (causal); Train: out and the gradients of
//     sum(out * dout) with respect to q, k and v. Each a kiln::function run compiled (the
//     unfused graph has its select + softmax and softmax-gradient kernels fused by kiln's
//     fusion pass). Counters of the fused cases, from medians timed in the same process:
//     x_faster_than_unfused = unfused time / fused time; gemm_fraction = time of the same
//     products (2 forward, 5 more for training: q k^T, p v; then dout v^T, p^T dout, ds k,
//     ds^T q and q k^T again) as single-threaded runtime::gemm_serial calls, one per batch
//     entry, entries in parallel, over the fused time (the GEMM limit the fused kernels reach).
//   Shapes: 0 = [4, 16, 64, 32] (heads, batch, length, head size: the `kiln bench`
//   transformer block), 1 = [2, 4, 512, 64] (longer sequences).
//   Attention_Kernel_<Forward|Grad>/<shape>/<threads>/<causal>: the kernels alone
//   (runtime::run_op), gemm_fraction as above; profiled_over_plain = the kernel's median time
//   while profiling (an event per product) over its time without.
//   TransformerStep/fused:<1|0>/threads:2: the whole `kiln bench` transformer training step
//     with the fused op or the composed ops (x_faster_than_composed: median of 7 interleaved
//     ratios).
// Run: kiln_bench --benchmark_filter='Attention_|TransformerStep'

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/bench_util.h"
#include "kiln/kiln.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/threading.h"

namespace {

using namespace kiln;
using bench_util::median_seconds;

struct AttentionShape {
  int64_t heads, batch, length, dim;
};
constexpr AttentionShape kShapes[] = {{4, 16, 64, 32}, {2, 4, 512, 64}};

class Threads {
 public:
  explicit Threads(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~Threads() { set_num_threads(saved_); }

 private:
  int saved_;
};

struct Inputs {
  AttentionShape s;
  Tensor q, k, v, dout;
  explicit Inputs(const AttentionShape& shape) : s(shape) {
    const Shape x{s.heads, s.batch, s.length, s.dim};
    q = random_normal(x, 1);
    k = random_normal(x, 2);
    v = random_normal(x, 3);
    dout = random_normal(x, 4);
  }
  double scale() const { return 1.0 / std::sqrt(double(s.dim)); }
};

// MultiHeadAttention's former path, causal.
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  const int64_t t = q.shape()[2];
  Tensor rows = reshape(arange(0, double(t), 1, DType::i64), {t, 1});
  Tensor cols = reshape(arange(0, double(t), 1, DType::i64), {1, t});
  Tensor s = where(less_equal(cols, rows), matmul(q * scale, k, false, true), scalar(-1e9));
  return matmul(softmax(s), v);
}

using Fn =
    std::function<std::vector<Tensor>(const Tensor&, const Tensor&, const Tensor&, const Tensor&)>;

Fn make(bool fused, bool train, double scale) {
  return [=](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout) {
    GradientTape tape;
    if (train) {
      tape.watch(q);
      tape.watch(k);
      tape.watch(v);
    }
    Tensor out = fused ? attention(q, k, v, {}, scale, true) : unfused(q, k, v, scale);
    std::vector<Tensor> r{out};
    if (train)
      for (const Tensor& g : tape.gradient(sum(out * dout), {q, k, v})) r.push_back(g);
    return r;
  };
}

// Which products gemm_seconds times: the forward pass's, attention_grad's, or both.
enum class Products { kForward, kGrad, kTrain };

// The products of the step, per batch entry, as gemm_serial calls with entries in parallel:
// forward q k^T and p v; gradient q k^T (again), p^T dout, dout v^T, ds k and ds^T q.
double gemm_seconds(const AttentionShape& s, Products which) {
  const int64_t t = s.length, d = s.dim, entries = s.heads * s.batch;
  std::vector<float> a(size_t(entries * t * d), 0.5f), b(a), c(size_t(entries * t * t));
  const bool forward = which != Products::kGrad, grad = which != Products::kForward;
  auto run = [&] {
    runtime::parallel_for(entries, 1, [&](int64_t e0, int64_t e1) {
      thread_local std::vector<float> tmp;
      tmp.resize(size_t(t * d));
      for (int64_t e = e0; e < e1; ++e) {
        const float* x = a.data() + e * t * d;
        const float* y = b.data() + e * t * d;
        float* p = c.data() + e * t * t;
        using runtime::gemm_serial;
        if (forward) {
          gemm_serial<float>(false, true, t, t, d, x, d, y, d, p, t);
          gemm_serial<float>(false, false, t, d, t, p, t, y, d, tmp.data(), d);
        }
        if (grad) {
          gemm_serial<float>(false, true, t, t, d, x, d, y, d, p, t);
          gemm_serial<float>(true, false, t, d, t, p, t, y, d, tmp.data(), d);
          gemm_serial<float>(false, true, t, t, d, x, d, y, d, p, t);
          gemm_serial<float>(false, false, t, d, t, p, t, y, d, tmp.data(), d);
          gemm_serial<float>(true, false, t, d, t, p, t, y, d, tmp.data(), d);
        }
      }
    });
  };
  run();
  return median_seconds(21, run);
}

void run_case(benchmark::State& state, bool fused, bool train) {
  const AttentionShape& s = kShapes[state.range(0)];
  Threads threads(int(state.range(1)));
  Inputs in(s);
  auto f = kiln::function(make(fused, train, in.scale()), {.name = "attention_bench"});
  f(in.q, in.k, in.v, in.dout);  // trace and compile
  if (fused) {
    auto g = kiln::function(make(false, train, in.scale()), {.name = "attention_bench_unfused"});
    g(in.q, in.k, in.v, in.dout);
    const double t_fused = median_seconds(21, [&] { f(in.q, in.k, in.v, in.dout); });
    const double t_unfused = median_seconds(21, [&] { g(in.q, in.k, in.v, in.dout); });
    state.counters["x_faster_than_unfused"] = t_unfused / t_fused;
    state.counters["gemm_fraction"] =
        gemm_seconds(s, train ? Products::kTrain : Products::kForward) / t_fused;
  }
  for (auto _ : state) {
    std::vector<Tensor> r = f(in.q, in.k, in.v, in.dout);
    benchmark::DoNotOptimize(r[0].data<float>());
  }
}

void Attention_Fused_Forward(benchmark::State& state) { run_case(state, true, false); }
void Attention_Unfused_Forward(benchmark::State& state) { run_case(state, false, false); }
void Attention_Fused_Train(benchmark::State& state) { run_case(state, true, true); }
void Attention_Unfused_Train(benchmark::State& state) { run_case(state, false, true); }

// The kernels alone (runtime::run_op: attention, attention_grad) on the same shapes.
void kernel_case(benchmark::State& state, bool grad) {
  const AttentionShape& s = kShapes[state.range(0)];
  Threads threads(int(state.range(1)));
  Inputs in(s);
  std::vector<runtime::Array> args{in.q.array(), in.k.array(), in.v.array()};
  if (grad) args.push_back(in.dout.array());
  const Attrs attrs{{"scale", in.scale()}, {"causal", state.range(2) != 0}};
  const OpKind op = grad ? OpKind::AttentionGrad : OpKind::Attention;
  auto run = [&] { return runtime::run_op(op, args, attrs); };
  const double plain = median_seconds(21, run);
  state.counters["gemm_fraction"] =
      gemm_seconds(s, grad ? Products::kGrad : Products::kForward) / plain;
  if (!runtime::profiling_enabled()) {  // (not under KILN_PROFILE, whose profile this would end)
    runtime::start_profiling();
    state.counters["profiled_over_plain"] = median_seconds(21, run) / plain;
    runtime::stop_profiling();
  }
  for (auto _ : state) {
    runtime::Array r = run();
    benchmark::DoNotOptimize(r.raw());
  }
}
void Attention_Kernel_Forward(benchmark::State& state) { kernel_case(state, false); }
void Attention_Kernel_Grad(benchmark::State& state) { kernel_case(state, true); }

#define ATTENTION_ARGS ArgsProduct({{0, 1}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime()
// The `kiln bench` transformer block's training step (compiled, Adam, MSE) with the fused
// attention (the default) and with the composed ops: the same model built with
// return_attention_scores, whose unused scores the traced step drops, runs the composed path.
// Both in this process, interleaved: the counter x_faster_than_composed is the ratio of their
// medians (fused case only).
Model transformer_block(bool fused) {
  constexpr int64_t kSeq = 64, kDim = 128, kHeads = 4, kFF = 512;
  set_random_seed(0);
  Tensor x = Input(Shape{kSeq, kDim});
  std::vector<Tensor> a = MultiHeadAttention(
      kHeads, kDim / kHeads, {.use_causal_mask = true, .return_attention_scores = !fused})(
      std::vector<Tensor>{LayerNormalization()(x)});
  Tensor h = Add()({x, a[0]});
  Tensor f = Dense(kDim)(Dense(kFF, {.activation = "gelu"})(LayerNormalization()(h)));
  Model m(x, Add()({h, f}));
  m->compile({.optimizer = Adam(), .loss = losses::mean_squared_error()});
  return m;
}

void TransformerStep(benchmark::State& state) {
  const bool fused = state.range(0) != 0;
  Threads threads(int(state.range(1)));
  Tensor x = random_normal({16, 64, 128}, 1), y = random_normal({16, 64, 128}, 2);
  Model model = transformer_block(fused);
  for (int i = 0; i < 3; ++i) model->run_train_step(x, y);
  if (fused) {
    Model composed = transformer_block(false);
    for (int i = 0; i < 3; ++i) composed->run_train_step(x, y);
    std::vector<double> ratios;
    for (int round = 0; round < 7; ++round) {
      double a = median_seconds(5, [&] { model->run_train_step(x, y); });
      double b = median_seconds(5, [&] { composed->run_train_step(x, y); });
      ratios.push_back(b / a);
    }
    std::sort(ratios.begin(), ratios.end());
    state.counters["x_faster_than_composed"] = ratios[ratios.size() / 2];
  }
  for (auto _ : state) model->run_train_step(x, y);
}
BENCHMARK(TransformerStep)
    ->ArgNames({"fused", "threads"})
    ->ArgsProduct({{1, 0}, {2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#define KERNEL_ARGS \
  ArgsProduct({{0, 1}, {1, 2}, {1, 0}})->Unit(benchmark::kMicrosecond)->UseRealTime()
BENCHMARK(Attention_Kernel_Forward)->KERNEL_ARGS;
BENCHMARK(Attention_Kernel_Grad)->KERNEL_ARGS;
BENCHMARK(Attention_Fused_Forward)->ATTENTION_ARGS;
BENCHMARK(Attention_Unfused_Forward)->ATTENTION_ARGS;
BENCHMARK(Attention_Fused_Train)->ATTENTION_ARGS;
BENCHMARK(Attention_Unfused_Train)->ATTENTION_ARGS;

}  // namespace
