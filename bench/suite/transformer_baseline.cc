// Hand-written causal transformer block training step (see bench/suite/rnn_baselines.h): Eigen +
// oneTBB only, no kiln.
#include "bench/suite/rnn_baselines.h"
#include "bench/suite/rnn_kernels.h"

namespace kiln::bench {

using namespace rnn_detail;

// ---- TransformerBlockStep ----

namespace {

enum : size_t { kGamma1, kBeta1, kWqkv, kBqkv, kWo, kBo, kGamma2, kBeta2, kW1, kB1, kW2, kB2 };
constexpr double kLayerNormEps = 1e-3, kMasked = -1e9;

// y = (x - mean) rstd gamma + beta per row of `cols` (rstd = 1 / sqrt(var + eps)); keeps xhat
// = (x - mean) rstd and rstd for the backward pass.
template <typename T>
void layer_norm(Pool& pool, const T* x, const T* gamma, const T* beta, T* xhat, T* rstd, T* y,
                int64_t rows, int64_t cols) {
  CArrMap<T> g(gamma, cols), b(beta, cols);
  pool.chunks(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      CArrMap<T> xr(x + r * cols, cols);
      ArrMap<T> xh(xhat + r * cols, cols);
      const T mu = xr.mean();
      xh = xr - mu;
      rstd[r] = T(1) / std::sqrt(xh.square().mean() + T(kLayerNormEps));
      xh *= rstd[r];
      ArrMap<T>(y + r * cols, cols) = xh * g + b;
    }
  });
}

// dx = base + rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) per row, dxhat = dy gamma;
// d(gamma) = sum over rows of dy xhat, d(beta) = sum of dy.
template <typename T>
void layer_norm_backward(Pool& pool, const T* dy, const T* gamma, const T* xhat, const T* rstd,
                         const T* base, T* dx, T* dgamma, T* dbeta, int64_t rows, int64_t cols) {
  column_sums(pool, dy, rows, cols, dgamma, xhat);
  column_sums(pool, dy, rows, cols, dbeta);
  CArrMap<T> g(gamma, cols);
  pool.chunks(rows, row_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      CArrMap<T> xh(xhat + r * cols, cols);
      const auto dxh = CArrMap<T>(dy + r * cols, cols) * g;
      const T mean_dxh = dxh.mean(), mean_dxh_xh = (dxh * xh).mean();
      ArrMap<T>(dx + r * cols, cols) =
          CArrMap<T>(base + r * cols, cols) + rstd[r] * (dxh - mean_dxh - xh * mean_dxh_xh);
    }
  });
}

// gelu_erf(u) = u Phi(u) and its derivative Phi(u) + u phi(u), on Eigen array expressions.
constexpr double kSqrtHalf = 0.70710678118654752, kInvSqrt2Pi = 0.39894228040143268;
template <typename E>
auto gelu_erf(const E& u) {
  using S = typename E::Scalar;
  return S(0.5) * u * (S(1) + (u * S(kSqrtHalf)).erf());
}
template <typename E>
auto gelu_erf_grad(const E& u) {
  using S = typename E::Scalar;
  return S(0.5) * (S(1) + (u * S(kSqrtHalf)).erf()) +
         u * (S(-0.5) * u.square()).exp() * S(kInvSqrt2Pi);
}

}  // namespace

template <typename T>
TransformerBlockStep<T>::TransformerBlockStep(Pool& pool, Config config, uint64_t seed)
    : pool_(pool), cfg_(config) {
  std::mt19937_64 rng(seed);
  const int64_t d = cfg_.dim, ff = cfg_.ff, n = cfg_.batch * cfg_.seq;
  const auto zeros = [](int64_t size) { return std::vector<T>(size_t(size), T(0)); };
  const auto ones = [](int64_t size) { return std::vector<T>(size_t(size), T(1)); };
  std::vector<T> wq = glorot<T>(rng, d, d), wk = glorot<T>(rng, d, d), wv = glorot<T>(rng, d, d);
  std::vector<T> wqkv(size_t(d * 3 * d));
  for (int64_t r = 0; r < d; ++r)
    for (int64_t j = 0; j < 3; ++j)
      std::copy_n((j == 0   ? wq
                   : j == 1 ? wk
                            : wv)
                          .data() +
                      r * d,
                  d, wqkv.data() + (r * 3 + j) * d);
  p_ = {ones(d), zeros(d), std::move(wqkv),       zeros(3 * d), glorot<T>(rng, d, d),  zeros(d),
        ones(d), zeros(d), glorot<T>(rng, d, ff), zeros(ff),    glorot<T>(rng, ff, d), zeros(d)};
  init_slots(p_, g_, m_, v_);
  for (auto* buffer :
       {&xhat1_, &a_, &ctx_, &res_, &xhat2_, &f_, &y_, &dy_, &df_, &dres_, &dctx_, &da_})
    buffer->resize(size_t(n * d));
  for (auto* buffer : {&rstd1_, &rstd2_, &row_loss_}) buffer->resize(size_t(n));
  for (auto* buffer : {&qkv_, &dqkv_}) buffer->resize(size_t(n * 3 * d));
  for (auto* buffer : {&u_, &gu_, &du_}) buffer->resize(size_t(n * ff));
  for (auto* buffer : {&prob_, &dprob_})
    buffer->resize(size_t(cfg_.batch * cfg_.heads * cfg_.seq * cfg_.seq));
}

template <typename T>
T TransformerBlockStep<T>::forward(const T* x, const T* target) {
  const int64_t s = cfg_.seq, d = cfg_.dim, heads = cfg_.heads, hd = d / heads, ff = cfg_.ff;
  const int64_t n = cfg_.batch * s;
  const T scale = T(1) / std::sqrt(T(hd));
  layer_norm(pool_, x, p_[kGamma1].data(), p_[kBeta1].data(), xhat1_.data(), rstd1_.data(),
             a_.data(), n, d);
  mm(pool_, false, false, n, 3 * d, d, a_.data(), p_[kWqkv].data(), qkv_.data(),
     add_bias(qkv_.data(), p_[kBqkv].data(), 3 * d));
  pool_.tasks(cfg_.batch * heads, [&](int64_t task) {  // one (example, head)
    const int64_t b = task / heads, h = task % heads;
    const T* base = qkv_.data() + b * s * 3 * d + h * hd;
    const Eigen::OuterStride<> stride(3 * d);
    CSMap<T> q(base, s, hd, stride), k(base + d, s, hd, stride), v(base + 2 * d, s, hd, stride);
    Eigen::Map<Mat<T>> p(prob_.data() + task * s * s, s, s);
    p.noalias() = q * k.transpose();
    for (int64_t i = 0; i < s; ++i) {
      auto row = p.row(i).array();
      row *= scale;
      row.tail(s - 1 - i).setConstant(T(kMasked));  // causal: key j > query i
      row = (row - row.maxCoeff()).exp();
      row /= row.sum();
    }
    SMap<T>(ctx_.data() + b * s * d + h * hd, s, hd, Eigen::OuterStride<>(d)).noalias() = p * v;
  });
  // res = x + ctx Wo + bo; f = LayerNorm2(res); u = f W1 + b1, gu = gelu(u); y = res + gu W2 + b2.
  T* res = res_.data();
  const T* bo = p_[kBo].data();
  mm(pool_, false, false, n, d, d, ctx_.data(), p_[kWo].data(), res,
     [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
       for (int64_t i = r0; i < r1; ++i)
         ArrMap<T>(res + i * d + c0, c1 - c0) +=
             CArrMap<T>(bo + c0, c1 - c0) + CArrMap<T>(x + i * d + c0, c1 - c0);
     });
  layer_norm(pool_, res_.data(), p_[kGamma2].data(), p_[kBeta2].data(), xhat2_.data(),
             rstd2_.data(), f_.data(), n, d);
  T *u = u_.data(), *gu = gu_.data(), *y = y_.data();
  const T *b1 = p_[kB1].data(), *b2 = p_[kB2].data();
  mm(pool_, false, false, n, ff, d, f_.data(), p_[kW1].data(), u,
     [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
       for (int64_t i = r0; i < r1; ++i) {
         ArrMap<T> ur(u + i * ff + c0, c1 - c0);
         ur += CArrMap<T>(b1 + c0, c1 - c0);
         ArrMap<T>(gu + i * ff + c0, c1 - c0) = gelu_erf(ur);
       }
     });
  mm(pool_, false, false, n, d, ff, gu, p_[kW2].data(), y,
     [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
       for (int64_t i = r0; i < r1; ++i)
         ArrMap<T>(y + i * d + c0, c1 - c0) +=
             CArrMap<T>(b2 + c0, c1 - c0) + CArrMap<T>(res + i * d + c0, c1 - c0);
     });
  const T inv_count = T(1) / T(n * d);
  pool_.chunks(n, row_grain(d), [&](int64_t r0, int64_t r1) {  // loss and dy in one pass
    for (int64_t r = r0; r < r1; ++r) {
      ArrMap<T> dy(dy_.data() + r * d, d);
      dy = CArrMap<T>(y + r * d, d) - CArrMap<T>(target + r * d, d);
      row_loss_[size_t(r)] = dy.square().sum();
      dy *= T(2) * inv_count;
    }
  });
  T total = 0;
  for (T l : row_loss_) total += l;
  return total * inv_count;
}

template <typename T>
void TransformerBlockStep<T>::backward() {
  const int64_t s = cfg_.seq, d = cfg_.dim, heads = cfg_.heads, hd = d / heads, ff = cfg_.ff;
  const int64_t n = cfg_.batch * s;
  const T scale = T(1) / std::sqrt(T(hd));
  // Feed-forward: dW2, db2, du = (dy W2^T) gelu'(u), dW1, db1, df = du W1^T.
  mm(pool_, true, false, ff, d, n, gu_.data(), dy_.data(), g_[kW2].data());
  column_sums(pool_, dy_.data(), n, d, g_[kB2].data());
  T* du = du_.data();
  const T* u = u_.data();
  mm(pool_, false, true, n, ff, d, dy_.data(), p_[kW2].data(), du,
     [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
       for (int64_t i = r0; i < r1; ++i)
         ArrMap<T>(du + i * ff + c0, c1 - c0) *=
             gelu_erf_grad(CArrMap<T>(u + i * ff + c0, c1 - c0));
     });
  mm(pool_, true, false, d, ff, n, f_.data(), du, g_[kW1].data());
  column_sums(pool_, du, n, ff, g_[kB1].data());
  mm(pool_, false, true, n, d, ff, du, p_[kW1].data(), df_.data());
  // d(res) = dy + LayerNorm2's input gradient.
  layer_norm_backward(pool_, df_.data(), p_[kGamma2].data(), xhat2_.data(), rstd2_.data(),
                      dy_.data(), dres_.data(), g_[kGamma2].data(), g_[kBeta2].data(), n, d);
  mm(pool_, true, false, d, d, n, ctx_.data(), dres_.data(), g_[kWo].data());
  column_sums(pool_, dres_.data(), n, d, g_[kBo].data());
  mm(pool_, false, true, n, d, d, dres_.data(), p_[kWo].data(), dctx_.data());
  pool_.tasks(cfg_.batch * heads, [&](int64_t task) {
    const int64_t b = task / heads, h = task % heads;
    const int64_t offset = b * s * 3 * d + h * hd;
    const Eigen::OuterStride<> stride(3 * d);
    CSMap<T> q(qkv_.data() + offset, s, hd, stride), k(qkv_.data() + offset + d, s, hd, stride);
    CSMap<T> v(qkv_.data() + offset + 2 * d, s, hd, stride);
    SMap<T> dq(dqkv_.data() + offset, s, hd, stride), dk(dqkv_.data() + offset + d, s, hd, stride);
    SMap<T> dv(dqkv_.data() + offset + 2 * d, s, hd, stride);
    CSMap<T> dout(dctx_.data() + b * s * d + h * hd, s, hd, Eigen::OuterStride<>(d));
    Eigen::Map<const Mat<T>> p(prob_.data() + task * s * s, s, s);
    Eigen::Map<Mat<T>> dp(dprob_.data() + task * s * s, s, s);
    dp.noalias() = dout * v.transpose();
    dv.noalias() = p.transpose() * dout;
    for (int64_t i = 0; i < s; ++i) {  // softmax backward, then the 1/sqrt(hd) of the scores
      auto dpr = dp.row(i).array();
      const auto pr = p.row(i).array();
      dpr = pr * (dpr - (dpr * pr).sum()) * scale;
    }
    dq.noalias() = dp * k;
    dk.noalias() = dp.transpose() * q;
  });
  mm(pool_, true, false, d, 3 * d, n, a_.data(), dqkv_.data(), g_[kWqkv].data());
  column_sums(pool_, dqkv_.data(), n, 3 * d, g_[kBqkv].data());
  mm(pool_, false, true, n, d, 3 * d, dqkv_.data(), p_[kWqkv].data(), da_.data());
  // LayerNorm1: only its gamma and beta (x is data: no input gradient).
  column_sums(pool_, da_.data(), n, d, g_[kGamma1].data(), xhat1_.data());
  column_sums(pool_, da_.data(), n, d, g_[kBeta1].data());
}

template <typename T>
T TransformerBlockStep<T>::gradients(const T* x, const T* target) {
  const T loss = forward(x, target);
  backward();
  return loss;
}

template <typename T>
T TransformerBlockStep<T>::loss(const T* x, const T* target) {
  return forward(x, target);
}

template <typename T>
T TransformerBlockStep<T>::run(const T* x, const T* target) {
  const T loss = gradients(x, target);
  adam_all(pool_, adam_, p_, g_, m_, v_);
  return loss;
}

std::vector<GemmShape> transformer_block_gemms(int64_t batch, int64_t seq, int64_t dim,
                                               int64_t heads, int64_t ff) {
  const int64_t n = batch * seq, hd = dim / heads, bh = batch * heads;
  return {
      {n, 3 * dim, dim},                 // a [Wq | Wk | Wv]
      {seq, seq, hd, false, true, bh},   // q k^T per (example, head)
      {seq, hd, seq, false, false, bh},  // p v
      {n, dim, dim},                     // ctx Wo
      {n, ff, dim},                      // f W1
      {n, dim, ff},                      // gelu(u) W2
      {ff, dim, n, true, false},         // dW2
      {n, ff, dim, false, true},         // d(gelu(u)) = dy W2^T
      {dim, ff, n, true, false},         // dW1
      {n, dim, ff, false, true},         // df = du W1^T
      {dim, dim, n, true, false},        // dWo
      {n, dim, dim, false, true},        // dctx = dres Wo^T
      {seq, seq, hd, false, true, bh},   // dp = dout v^T
      {seq, hd, seq, true, false, bh},   // dv = p^T dout
      {seq, hd, seq, false, false, bh},  // dq = ds k
      {seq, hd, seq, true, false, bh},   // dk = ds^T q
      {dim, 3 * dim, n, true, false},    // dWqkv
      {n, dim, 3 * dim, false, true},    // da = dqkv Wqkv^T
  };
}

template class TransformerBlockStep<float>;
template class TransformerBlockStep<double>;

}  // namespace kiln::bench
