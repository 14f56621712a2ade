// Hand-written sequence-model baselines for `kiln bench`: a stacked-LSTM training step and a
// causal transformer-block training step, under the contract of bench/suite/baselines.h (only
// Eigen, oneTBB and the standard library, no kiln; the same Pool, sliced GEMM and Adam).
//
// Both are templated on the scalar type so that tests/tools/ can check their gradients in
// float64 against finite differences and the float32 step against the float64 one: float runs
// the Pool's sliced GEMM (bench/suite/baselines.h's gemm, Adam and softmax cross-entropy), double
// one single-threaded Eigen product per GEMM and plain loops for Adam and the loss. Weights are
// drawn in double from the seed and rounded to the scalar type, so a float and a double step
// with the same seed start from the same weights (up to rounding).
#pragma once

#include <cstdint>
#include <vector>

#include "bench/suite/baselines.h"

namespace kiln::bench {

// Training step of stacked LSTMs + Dense logits, sparse softmax cross-entropy, Adam (Keras
// defaults), on a fixed batch. LSTM as Keras: kernel [in, 4U], recurrent kernel [U, 4U], bias
// [4U], gates i, f, c, o side by side; i, f, o = sigmoid, c~ = tanh, c = f c + i c~,
// h = o tanh(c), zero initial state; every layer but the last returns its whole sequence, the
// Dense layer reads the last layer's final h. Own weights: Glorot-uniform kernels, orthogonal
// recurrent kernels (Keras' algorithm), zero biases but the forget gate's at 1.
//
// Forward, per layer: one [T*B, in] x [in, 4U] GEMM projects every step's input (+ bias, fused);
// then per step one [B, U] x [U, 4U] GEMM and one fused pass over the gates that writes the
// activations overwritten and c, tanh(c), h (all kept for the backward pass; time-major).
// Backward (BPTT), per layer from the last step: one fused pass per step for dc and the four
// gate gradients, one [B, 4U] x [4U, U] GEMM for the recurrent part of dh_{t-1}; then dU, dW,
// db and the layer below's output gradient as whole-sequence GEMMs / a column sum.
template <typename T>
class LstmStep {
 public:
  struct Config {
    int64_t batch, steps, features;
    std::vector<int64_t> units;  // per layer
    int64_t classes;
  };
  LstmStep(Pool& pool, Config config, uint64_t seed);
  // x [batch, steps, features] (batch-major, as Keras), labels [batch] in [0, classes).
  T run(const T* x, const int64_t* labels);        // forward, backward, Adam; returns the loss
  T gradients(const T* x, const int64_t* labels);  // forward + backward into grads()
  T loss(const T* x, const int64_t* labels);       // forward only
  // Per layer: kernel, recurrent kernel, bias; then the Dense kernel [U, classes] and bias.
  std::vector<std::vector<T>>& params() { return p_; }
  const std::vector<std::vector<T>>& grads() const { return g_; }

 private:
  T forward(const T* x, const int64_t* labels);
  void backward();

  Pool& pool_;
  Config cfg_;
  AdamState adam_;
  std::vector<std::vector<T>> p_, g_, m_, v_;
  // Per layer, time-major (row t * batch + b): the input projection, then the gate activations
  // [T*B, 4U]; c, tanh(c) and h [T*B, U].
  std::vector<std::vector<T>> z_, cell_, tanh_cell_, h_;
  std::vector<T> xt_;                        // x time-major [T*B, features]
  std::vector<T> rec_;                       // h_{t-1} U [B, 4U]
  std::vector<T> logits_, dlogits_, dlast_;  // [B, classes] x2, d(final h) [B, U_last]
  std::vector<T> dz_, dseq_;  // gate gradients [T*B, 4U]; d(layer below's h) [T*B, U]
  std::vector<T> dh_, dc_;    // per step [B, U]
};

// The GEMMs of one LstmStep training step: per layer the input projection, steps - 1 recurrent
// products (repeat), steps - 1 recurrent input gradients, dU, dW and (above the first layer)
// the input gradient; the Dense layer's forward, dW and dx.
std::vector<GemmShape> lstm_step_gemms(int64_t batch, int64_t steps, int64_t features,
                                       const std::vector<int64_t>& units, int64_t classes);

// Training step of one pre-norm causal transformer block on a fixed batch, loss
// mean((y - target)^2), Adam (Keras defaults):
//   a = LayerNorm1(x); q, k, v = a Wq + bq, a Wk + bk, a Wv + bv (each [dim, heads * head_dim],
//   Keras' [dim, heads, head_dim] flattened); per head p = softmax(q k^T / sqrt(head_dim) with
//   key j > query i set to -1e9), o = p v; h = x + concat_heads(o) Wo + bo; f = LayerNorm2(h);
//   y = h + gelu_erf(f W1 + b1) W2 + b2.
// Layer norms over the last axis with eps 1e-3, gamma 1, beta 0; Glorot-uniform kernels, zero
// biases. Wq, Wk, Wv are stored side by side as one [dim, 3 dim] weight (one GEMM; each column
// block is one of them). The attention runs one task per (example, head) with single-threaded
// Eigen products; the probabilities are kept for the backward pass. The input gradient dx is
// not computed (x is data), everything else is.
template <typename T>
class TransformerBlockStep {
 public:
  struct Config {
    int64_t batch, seq, dim, heads, ff;
  };
  TransformerBlockStep(Pool& pool, Config config, uint64_t seed);
  // x and target [batch, seq, dim].
  T run(const T* x, const T* target);        // forward, backward, Adam; returns the loss
  T gradients(const T* x, const T* target);  // forward + backward into grads()
  T loss(const T* x, const T* target);       // forward only
  // ln1 gamma, beta; Wqkv [dim, 3 dim], bqkv [3 dim]; Wo [dim, dim], bo; ln2 gamma, beta;
  // W1 [dim, ff], b1; W2 [ff, dim], b2.
  std::vector<std::vector<T>>& params() { return p_; }
  const std::vector<std::vector<T>>& grads() const { return g_; }
  const std::vector<T>& output() const { return y_; }  // y of the last forward pass

 private:
  T forward(const T* x, const T* target);
  void backward();

  Pool& pool_;
  Config cfg_;
  AdamState adam_;
  std::vector<std::vector<T>> p_, g_, m_, v_;
  // Forward values kept for the backward pass ([N = batch * seq, ...] rows).
  std::vector<T> xhat1_, rstd1_, a_, qkv_, prob_, ctx_, res_, xhat2_, rstd2_, f_, u_, gu_, y_;
  std::vector<T> row_loss_;
  // Gradients of the forward values.
  std::vector<T> dy_, du_, df_, dres_, dctx_, dprob_, dqkv_, da_;
};

// The GEMMs of one TransformerBlockStep training step: the QKV, output and two feed-forward
// projections with their dW and dx, and per (example, head) (batch * heads independent
// products) q k^T, p v and their four backward products.
std::vector<GemmShape> transformer_block_gemms(int64_t batch, int64_t seq, int64_t dim,
                                               int64_t heads, int64_t ff);

}  // namespace kiln::bench
