// The workloads of `kiln bench` and bench/suite_bench.cc: each one runs eagerly (kiln ops one
// by one), compiled (a kiln::function / the model's traced train step, ExecutionMode::kCompiled)
// and hand-written (bench/suite/baselines.h: Eigen + fused loops, no kiln), plus the limit
// that applies to it (the time of just its GEMMs with Eigen, or the time to move the bytes it
// must move at the bandwidth of a copy with the same footprint).
//
//   mlp_784_256_256_10_b64     MLP 784-256-256-10 training step, batch 64 (Adam, synthetic data)
//   mlp_1024_1024_1024_10_b512 MLP 1024-1024-1024-10 training step, batch 512
//   cnn_b64                    tools/model_zoo "cnn" training step on 28x28x1 images, batch 64
//                              (hand-written: im2col + Eigen GEMMs; limit: those GEMMs)
//   lstm_2x256_seq64_b32       LSTM 256 (return_sequences) -> LSTM 256 -> Dense 10 training step
//                              on x [32, 64, 64] (hand-written: bench/suite/rnn_baselines.h,
//                              per-step GEMMs + fused gate passes + BPTT; limit: those GEMMs)
//   transformer_block_d128_h4_seq64_b16
//                              pre-norm causal transformer block (MultiHeadAttention 4x32,
//                              feed-forward 512 GELU, MSE) on x [16, 64, 128] (hand-written:
//                              TransformerBlockStep; limit: its GEMMs)
//   layernorm_gelu_residual    gelu_tanh(layernorm(x) * gamma + beta) + r on [4096, 1024]
//   softmax_xent               sparse softmax cross-entropy + its gradient on [512, 1000]
//   adam_1m                    one Adam update of 1M float32 parameters
//   mlp_1024_1024_1024_10_b512_bf16, cnn_b64_bf16, transformer_block_d128_h4_seq64_b16_bf16
//                              the same steps under the mixed_bfloat16 Keras policy (float32
//                              variables, bf16 compute); the limit is their flops at the bf16
//                              peak (kiln bench measures the loop of the instruction the bf16
//                              products run: runtime::measure_bf16_peak, the float32 FMA where
//                              they run on the float32 kernels), the hand-written step the
//                              float32 one
//
// Contract: make_workload builds the inputs and all variants (models with the same seed for
// eager and compiled, separate optimizer state per variant) but runs nothing; every variant's
// first call is its warm-up (the compiled one traces and JIT-compiles there). Variants update
// their own weights each call (a real training step), so repeated calls are the steady state.
// All variants use `threads` threads (kiln::set_num_threads is the caller's job).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::bench {

struct Workload {
  std::string name, description;
  std::string limit_kind;  // "gemm" (limit = its GEMMs with Eigen) or "memory" (copy)
  double limit_flops = 0;  // gemm: flops of those GEMMs
  double limit_bytes = 0;  // memory: bytes the work must read + write
  // memory: bytes the limit's copy reads + writes: the work's footprint (a copy of the same
  // size: same cache level). The limit time is copy time * limit_bytes / copy_bytes.
  double copy_bytes = 0;
  std::function<void()> eager, compiled, baseline, limit;  // baseline empty when there is none
  // Seconds the compiled variant spent tracing + optimizing + JIT-compiling (after its first
  // call).
  std::function<double()> compile_seconds;
  std::shared_ptr<void> state;  // keeps the inputs, models and buffers alive
};

// Names of every workload, in the order `kiln bench` runs them.
std::vector<std::string> workload_names();
// Builds one workload; kiln::Error for an unknown name.
Workload make_workload(const std::string& name, int threads);

// The layer-norm workload's computation in kiln ops: gelu_tanh(layernorm(x) * gamma + beta) + r
// over the last axis, eps 1e-5 (also used by bench/codegen_bench.cc).
Tensor layer_norm_gelu_residual_ops(const Tensor& x, const Tensor& r, const Tensor& gamma,
                                    const Tensor& beta);

}  // namespace kiln::bench
