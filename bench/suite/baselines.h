// Hand-written C++ baselines for `kiln bench` and bench/suite_bench.cc: what a programmer would
// write without kiln. Eigen GEMMs on row-major maps plus hand-fused loops (Eigen array
// expressions, so exp/tanh/sqrt are vectorized), parallelised on a oneTBB arena of the same
// size as kiln's.
//
// Contract:
//  - Nothing here uses kiln: only Eigen, oneTBB and the standard library. Callers pass raw
//    pointers to inputs they own (the suite passes the same synthetic data kiln gets).
//  - Threads: every function runs on `Pool`, a tbb::task_arena of `threads` threads. Eigen is
//    single-threaded per call (EIGEN_DONT_PARALLELIZE), so a GEMM is parallelised by hand: the
//    output is cut into `threads` slabs along its longer side (rows or columns), each one
//    single-threaded Eigen product run as a task; products under 2^20 flops run as one call.
//    Fused epilogues (bias + ReLU) run on each slab right after its product, while in cache.
//  - Numerics follow kiln's definitions: Keras' Adam (m += (g - m)(1 - b1), v += (g^2 - v)
//    (1 - b2), w -= alpha m / (sqrt(v) + eps), alpha = lr sqrt(1 - b2^t) / (1 - b1^t)), sparse
//    softmax cross-entropy from logits averaged over the batch, tanh-approximated GELU, layer
//    normalization over the last axis with eps 1e-5. Results are not compared bitwise to kiln.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace kiln::bench {

// A oneTBB arena of a fixed number of threads.
class Pool {
 public:
  explicit Pool(int threads);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  int threads() const { return threads_; }
  // fn(i) for i in [0, count), as tasks in the arena (inline when count == 1 or 1 thread).
  void tasks(int64_t count, const std::function<void(int64_t)>& fn);
  // fn(begin, end) over `count` contiguous chunks of [0, n) (count = threads, or 1 if n < grain).
  void chunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  int threads_;
  struct Arena;
  std::unique_ptr<Arena> arena_;
};

// The rows [r0, r1) and columns [c0, c1) of C a slab covers (for fused epilogues).
using Epilogue = std::function<void(int64_t r0, int64_t r1, int64_t c0, int64_t c1)>;

// Row-major C[m, n] = op(A) op(B) (op: transpose when trans_*), with A stored m x k (k x m
// when trans_a) and B stored k x n (n x k when trans_b); then epilogue on each slab.
void gemm(Pool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
          const float* b, float* c, const Epilogue& epilogue = {});

// One GEMM's shape, for GemmOnly: `batch` independent products of that shape (own buffers, run
// as tasks across the pool, as attention heads are), the whole `repeat` times one after the
// other on the same buffers (as the steps of a recurrent layer are).
struct GemmShape {
  int64_t m, n, k;
  bool trans_a = false, trans_b = false;
  int64_t batch = 1, repeat = 1;
};

// Runs a list of GEMMs (own buffers, filled with small values): the GEMM-bound limit of a step.
class GemmOnly {
 public:
  GemmOnly(Pool& pool, std::vector<GemmShape> shapes);
  void run();
  double flops() const;  // 2 m n k batch repeat summed

 private:
  Pool& pool_;
  std::vector<GemmShape> shapes_;
  std::vector<std::vector<float>> a_, b_, c_;
};

// The GEMMs of one MLP training step (forward, weight gradients, input gradients of every
// layer but the first) for layer widths `dims` (input first) at batch `batch`.
std::vector<GemmShape> mlp_step_gemms(const std::vector<int64_t>& dims, int64_t batch);

// Adam's hyper-parameters (Keras defaults) and its step counter.
struct AdamState {
  double lr = 1e-3, beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  int64_t iterations = 0;
};

// One Adam update of n parameters, fused (one pass over w, g, m, v), at step t = iterations + 1;
// the caller increments iterations once all parameters of the step are updated.
void adam_update(Pool& pool, AdamState& state, float* w, const float* g, float* m, float* v,
                 int64_t n);

// Sparse softmax cross-entropy from logits [rows, cols] with labels [rows]: returns the mean
// loss and writes d(loss)/d(logits) into grad (one fused pass per row).
float softmax_cross_entropy(Pool& pool, const float* logits, const int64_t* labels, float* grad,
                            int64_t rows, int64_t cols);

// y = gelu_tanh(layernorm(x) * gamma + beta) + r over rows of `cols` (one pass per row in L1).
void layer_norm_gelu_residual(Pool& pool, const float* x, const float* r, const float* gamma,
                              const float* beta, float* y, int64_t rows, int64_t cols);

// Training step of an MLP (Dense + ReLU hidden layers, Dense logits, sparse softmax
// cross-entropy, Adam) on a fixed batch, with its own Glorot-uniform weights.
class MlpStep {
 public:
  MlpStep(Pool& pool, std::vector<int64_t> dims, int64_t batch, uint64_t seed);
  // One step on x [batch, dims[0]] and labels [batch]; returns the loss.
  float run(const float* x, const int64_t* labels);

 private:
  Pool& pool_;
  std::vector<int64_t> dims_;
  int64_t batch_;
  AdamState adam_;
  // Per layer: kernel [in, out], bias [out], their gradients and Adam slots.
  std::vector<std::vector<float>> w_, b_, dw_, db_, mw_, vw_, mb_, vb_;
  // Per layer: activations a_[l] = relu(x W + b) (logits for the last), and dz_[l].
  std::vector<std::vector<float>> a_, dz_;
};

// Training step of tools/model_zoo's CNN on 28x28x1 images (NHWC): Conv2D(16, 3x3, same) +
// ReLU, MaxPool 2x2, Conv2D(32, 3x3, same) + ReLU, Flatten, Dense(10); sparse softmax
// cross-entropy, Adam. Convolutions are im2col + one GEMM (filters [3, 3, in, out], as Keras),
// their input gradient a GEMM + col2im; max-pool keeps its argmax for the backward pass.
class CnnStep {
 public:
  CnnStep(Pool& pool, int64_t batch, uint64_t seed);
  float run(const float* x, const int64_t* labels);

 private:
  Pool& pool_;
  int64_t batch_;
  AdamState adam_;
  // Parameters w1 [9, 16], b1, w2 [144, 32], b2, w3 [6272, 10], b3; gradients; Adam slots.
  std::vector<std::vector<float>> p_, g_, m_, v_;
  std::vector<float> col1_, z1_, pooled_, col2_, z2_, logits_, dlogits_, dz2_, dcol2_, dpooled_,
      dz1_;
  std::vector<uint8_t> argmax_;
};

}  // namespace kiln::bench
