// Hand-written sequence-model baselines (see bench_rnn_baselines.h): Eigen + oneTBB only, no
// kiln.
#include "tools/bench_rnn_baselines.h"

#include <Eigen/Core>
#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <unsupported/Eigen/SpecialFunctions>
#include <utility>

namespace kiln::bench {
namespace {

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <typename T>
using ArrMap = Eigen::Map<Arr<T>>;
template <typename T>
using CArrMap = Eigen::Map<const Arr<T>>;
template <typename T>
using SMap = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using CSMap = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;

// Row-wise passes split over the pool from this many elements of work (they are dominated by
// exp / tanh / erf, so they pay for a task earlier than a copy would).
constexpr int64_t kRowWork = 8192;
int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, kRowWork / std::max<int64_t>(1, cols));
}

// Row-major C[m, n] = op(A) op(B), then the epilogue: float on the Pool's sliced GEMM, double
// as one single-threaded Eigen product (the epilogue then sees the whole output as one slab).
template <typename T>
void mm(Pool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c,
        const Epilogue& epilogue = {}) {
  if constexpr (std::is_same_v<T, float>) {
    gemm(pool, ta, tb, m, n, k, a, b, c, epilogue);
  } else {
    Eigen::Map<Mat<T>> out(c, m, n);
    Eigen::Map<const Mat<T>> lhs(a, ta ? k : m, ta ? m : k), rhs(b, tb ? n : k, tb ? k : n);
    if (ta && tb) {
      out.noalias() = lhs.transpose() * rhs.transpose();
    } else if (ta) {
      out.noalias() = lhs.transpose() * rhs;
    } else if (tb) {
      out.noalias() = lhs * rhs.transpose();
    } else {
      out.noalias() = lhs * rhs;
    }
    if (epilogue && m > 0 && n > 0) epilogue(0, m, 0, n);
  }
}

// Epilogue: out[i, j] += bias[j] over a slab of a row-major [.., n] output.
template <typename T>
Epilogue add_bias(T* out, const T* bias, int64_t n) {
  return [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t i = r0; i < r1; ++i)
      ArrMap<T>(out + i * n + c0, c1 - c0) += CArrMap<T>(bias + c0, c1 - c0);
  };
}

// out[j] = sum_r x[r, j] (* y[r, j] when y is given), split by columns over the pool.
template <typename T>
void column_sums(Pool& pool, const T* x, int64_t rows, int64_t cols, T* out, const T* y = nullptr) {
  const int64_t grain = rows * cols >= 2 * kRowWork ? 32 : cols + 1;
  pool.chunks(cols, grain, [&](int64_t c0, int64_t c1) {
    ArrMap<T> acc(out + c0, c1 - c0);
    acc.setZero();
    for (int64_t r = 0; r < rows; ++r) {
      CArrMap<T> xr(x + r * cols + c0, c1 - c0);
      if (y) {
        acc += xr * CArrMap<T>(y + r * cols + c0, c1 - c0);
      } else {
        acc += xr;
      }
    }
  });
}

template <typename T>
void adam(Pool& pool, AdamState& s, std::vector<T>& w, const std::vector<T>& g, std::vector<T>& m,
          std::vector<T>& v) {
  if constexpr (std::is_same_v<T, float>) {
    adam_update(pool, s, w.data(), g.data(), m.data(), v.data(), int64_t(w.size()));
  } else {
    const double t = double(s.iterations + 1);
    const double alpha = s.lr * std::sqrt(1 - std::pow(s.beta_2, t)) / (1 - std::pow(s.beta_1, t));
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] += (g[i] - m[i]) * (1 - s.beta_1);
      v[i] += (g[i] * g[i] - v[i]) * (1 - s.beta_2);
      w[i] -= alpha * m[i] / (std::sqrt(v[i]) + s.epsilon);
    }
  }
}

template <typename T>
void adam_all(Pool& pool, AdamState& s, std::vector<std::vector<T>>& p,
              const std::vector<std::vector<T>>& g, std::vector<std::vector<T>>& m,
              std::vector<std::vector<T>>& v) {
  for (size_t i = 0; i < p.size(); ++i) adam(pool, s, p[i], g[i], m[i], v[i]);
  ++s.iterations;
}

// Mean sparse softmax cross-entropy of logits [rows, cols]; grad = d(loss)/d(logits).
template <typename T>
T xent(Pool& pool, const T* logits, const int64_t* labels, T* grad, int64_t rows, int64_t cols) {
  if constexpr (std::is_same_v<T, float>) {
    return softmax_cross_entropy(pool, logits, labels, grad, rows, cols);
  } else {
    T total = 0;
    for (int64_t i = 0; i < rows; ++i) {
      CArrMap<T> x(logits + i * cols, cols);
      ArrMap<T> g(grad + i * cols, cols);
      const T mx = x.maxCoeff();
      g = (x - mx).exp();
      const T sum = g.sum();
      total += std::log(sum) + mx - x[labels[i]];
      g /= sum * T(rows);
      g[labels[i]] -= T(1) / T(rows);
    }
    return total / T(rows);
  }
}

// Glorot-uniform [fan_in, fan_out] (drawn in double: the same values for float and double).
template <typename T>
std::vector<T> glorot(std::mt19937_64& rng, int64_t fan_in, int64_t fan_out) {
  std::uniform_real_distribution<double> dist(-1, 1);
  const double limit = std::sqrt(6.0 / double(fan_in + fan_out));
  std::vector<T> w(size_t(fan_in * fan_out));
  for (T& e : w) e = T(limit * dist(rng));
  return w;
}

// Keras' orthogonal initializer for [rows, cols], rows <= cols: the transposed Q of the QR of a
// normal [cols, rows] matrix, columns signed by diag(R): orthonormal rows.
template <typename T>
std::vector<T> orthogonal(std::mt19937_64& rng, int64_t rows, int64_t cols) {
  std::normal_distribution<double> dist;
  Eigen::MatrixXd a(cols, rows);
  for (int64_t j = 0; j < rows; ++j)
    for (int64_t i = 0; i < cols; ++i) a(i, j) = dist(rng);
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(cols, rows);
  std::vector<T> w(size_t(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    const double sign = qr.matrixQR()(i, i) < 0 ? -1.0 : 1.0;
    for (int64_t j = 0; j < cols; ++j) w[size_t(i * cols + j)] = T(sign * q(j, i));
  }
  return w;
}

template <typename T>
void init_slots(const std::vector<std::vector<T>>& p, std::vector<std::vector<T>>& g,
                std::vector<std::vector<T>>& m, std::vector<std::vector<T>>& v) {
  for (const auto& w : p) {
    g.emplace_back(w.size(), T(0));
    m.emplace_back(w.size(), T(0));
    v.emplace_back(w.size(), T(0));
  }
}

}  // namespace

// ---- LstmStep ----

template <typename T>
LstmStep<T>::LstmStep(Pool& pool, Config config, uint64_t seed)
    : pool_(pool), cfg_(std::move(config)) {
  std::mt19937_64 rng(seed);
  const int64_t batch = cfg_.batch, n = batch * cfg_.steps;
  int64_t in = cfg_.features, widest = 1;
  for (int64_t units : cfg_.units) {
    p_.push_back(glorot<T>(rng, in, 4 * units));
    p_.push_back(orthogonal<T>(rng, units, 4 * units));
    std::vector<T> bias(size_t(4 * units), T(0));
    std::fill(bias.begin() + units, bias.begin() + 2 * units, T(1));  // unit_forget_bias
    p_.push_back(std::move(bias));
    z_.emplace_back(size_t(n * 4 * units));
    for (auto* state : {&cell_, &tanh_cell_, &h_}) state->emplace_back(size_t(n * units));
    widest = std::max(widest, units);
    in = units;
  }
  p_.push_back(glorot<T>(rng, in, cfg_.classes));
  p_.emplace_back(size_t(cfg_.classes), T(0));
  init_slots(p_, g_, m_, v_);
  xt_.resize(size_t(n * cfg_.features));
  rec_.resize(size_t(batch * 4 * widest));
  logits_.resize(size_t(batch * cfg_.classes));
  dlogits_.resize(logits_.size());
  dlast_.resize(size_t(batch * in));
  dz_.resize(size_t(n * 4 * widest));
  dseq_.resize(size_t(n * widest));
  dh_.resize(size_t(batch * widest));
  dc_.resize(size_t(batch * widest));
}

template <typename T>
T LstmStep<T>::forward(const T* x, const int64_t* labels) {
  const int64_t batch = cfg_.batch, steps = cfg_.steps, features = cfg_.features;
  const int64_t n = batch * steps, layers = int64_t(cfg_.units.size());
  pool_.chunks(steps, 4, [&](int64_t t0, int64_t t1) {  // x time-major: row t * batch + b
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t b = 0; b < batch; ++b)
        std::copy_n(x + (b * steps + t) * features, features,
                    xt_.data() + (t * batch + b) * features);
  });
  const T* input = xt_.data();
  int64_t in = features;
  for (int64_t l = 0; l < layers; ++l) {
    const int64_t units = cfg_.units[size_t(l)], gates = 4 * units;
    T *z = z_[size_t(l)].data(), *cell = cell_[size_t(l)].data();
    T *tanh_cell = tanh_cell_[size_t(l)].data(), *h = h_[size_t(l)].data();
    const T* recurrent = p_[size_t(3 * l + 1)].data();
    mm(pool_, false, false, n, gates, in, input, p_[size_t(3 * l)].data(), z,
       add_bias(z, p_[size_t(3 * l + 2)].data(), gates));
    for (int64_t t = 0; t < steps; ++t) {
      if (t > 0)
        mm(pool_, false, false, batch, gates, units, h + (t - 1) * batch * units, recurrent,
           rec_.data());
      pool_.chunks(batch, row_grain(gates), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t row = t * batch + b;
          ArrMap<T> zr(z + row * gates, gates);
          if (t > 0) zr += CArrMap<T>(rec_.data() + b * gates, gates);
          zr.head(2 * units) = zr.head(2 * units).logistic();  // i, f
          zr.segment(2 * units, units) = zr.segment(2 * units, units).tanh();
          zr.tail(units) = zr.tail(units).logistic();  // o
          ArrMap<T> c(cell + row * units, units), tc(tanh_cell + row * units, units);
          c = zr.head(units) * zr.segment(2 * units, units);
          if (t > 0)
            c += zr.segment(units, units) * CArrMap<T>(cell + (row - batch) * units, units);
          tc = c.tanh();
          ArrMap<T>(h + row * units, units) = zr.tail(units) * tc;
        }
      });
    }
    input = h;
    in = units;
  }
  const size_t dense = size_t(3 * layers);
  mm(pool_, false, false, batch, cfg_.classes, in, input + (steps - 1) * batch * in,
     p_[dense].data(), logits_.data(),
     add_bias(logits_.data(), p_[dense + 1].data(), cfg_.classes));
  return xent(pool_, logits_.data(), labels, dlogits_.data(), batch, cfg_.classes);
}

template <typename T>
void LstmStep<T>::backward() {
  const int64_t batch = cfg_.batch, steps = cfg_.steps, n = batch * steps;
  const int64_t layers = int64_t(cfg_.units.size()), top = cfg_.units.back();
  const size_t dense = size_t(3 * layers);
  const T* last = h_.back().data() + (steps - 1) * batch * top;
  mm(pool_, true, false, top, cfg_.classes, batch, last, dlogits_.data(), g_[dense].data());
  column_sums(pool_, dlogits_.data(), batch, cfg_.classes, g_[dense + 1].data());
  mm(pool_, false, true, batch, top, cfg_.classes, dlogits_.data(), p_[dense].data(),
     dlast_.data());
  for (int64_t l = layers; l-- > 0;) {
    const int64_t units = cfg_.units[size_t(l)], gates = 4 * units;
    const int64_t in = l > 0 ? cfg_.units[size_t(l - 1)] : cfg_.features;
    const T* input = l > 0 ? h_[size_t(l - 1)].data() : xt_.data();
    const T *z = z_[size_t(l)].data(), *cell = cell_[size_t(l)].data();
    const T* tanh_cell = tanh_cell_[size_t(l)].data();
    const bool sequence = l + 1 < layers;  // the layer above read every step's h
    T* dz = dz_.data();
    for (int64_t t = steps; t-- > 0;) {
      pool_.chunks(batch, row_grain(gates), [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t row = t * batch + b;
          // dh_ holds the recurrent part of dh_t (from step t + 1's GEMM), dc_ d(c_t) so far.
          ArrMap<T> dh(dh_.data() + b * units, units), dc(dc_.data() + b * units, units);
          if (t == steps - 1) {
            dh.setZero();
            dc.setZero();
          }
          if (sequence) {
            dh += CArrMap<T>(dseq_.data() + row * units, units);
          } else if (t == steps - 1) {
            dh += CArrMap<T>(dlast_.data() + b * units, units);
          }
          CArrMap<T> zr(z + row * gates, gates), tc(tanh_cell + row * units, units);
          const auto i = zr.head(units), f = zr.segment(units, units);
          const auto g = zr.segment(2 * units, units), o = zr.tail(units);
          ArrMap<T> dzr(dz + row * gates, gates);
          dc += dh * o * (T(1) - tc.square());
          dzr.tail(units) = dh * tc * o * (T(1) - o);
          dzr.head(units) = dc * g * i * (T(1) - i);
          dzr.segment(2 * units, units) = dc * i * (T(1) - g.square());
          if (t > 0) {
            dzr.segment(units, units) =
                dc * CArrMap<T>(cell + (row - batch) * units, units) * f * (T(1) - f);
          } else {
            dzr.segment(units, units).setZero();
          }
          dc *= f;
        }
      });
      if (t > 0)
        mm(pool_, false, true, batch, units, gates, dz + t * batch * gates,
           p_[size_t(3 * l + 1)].data(), dh_.data());
    }
    T* drec = g_[size_t(3 * l + 1)].data();
    if (steps > 1) {  // dU = sum_t h_{t-1}^T dz_t
      mm(pool_, true, false, units, gates, (steps - 1) * batch, h_[size_t(l)].data(),
         dz + batch * gates, drec);
    } else {
      std::fill_n(drec, units * gates, T(0));
    }
    mm(pool_, true, false, in, gates, n, input, dz, g_[size_t(3 * l)].data());
    column_sums(pool_, dz, n, gates, g_[size_t(3 * l + 2)].data());
    if (l > 0) mm(pool_, false, true, n, in, gates, dz, p_[size_t(3 * l)].data(), dseq_.data());
  }
}

template <typename T>
T LstmStep<T>::gradients(const T* x, const int64_t* labels) {
  const T loss = forward(x, labels);
  backward();
  return loss;
}

template <typename T>
T LstmStep<T>::loss(const T* x, const int64_t* labels) {
  return forward(x, labels);
}

template <typename T>
T LstmStep<T>::run(const T* x, const int64_t* labels) {
  const T loss = gradients(x, labels);
  adam_all(pool_, adam_, p_, g_, m_, v_);
  return loss;
}

std::vector<GemmShape> lstm_step_gemms(int64_t batch, int64_t steps, int64_t features,
                                       const std::vector<int64_t>& units, int64_t classes) {
  std::vector<GemmShape> shapes;
  const int64_t n = batch * steps, top = units.back();
  int64_t in = features;
  for (int64_t u : units) {
    shapes.push_back({n, 4 * u, in});                                 // x W (every step)
    shapes.push_back({batch, 4 * u, u, false, false, 1, steps - 1});  // h_{t-1} U
    in = u;
  }
  shapes.push_back({batch, classes, top});               // Dense forward
  shapes.push_back({top, classes, batch, true, false});  // Dense dW
  shapes.push_back({batch, top, classes, false, true});  // Dense dx
  for (size_t l = units.size(); l-- > 0;) {
    const int64_t u = units[l], below = l > 0 ? units[l - 1] : features;
    shapes.push_back({batch, u, 4 * u, false, true, 1, steps - 1});  // dh_{t-1} = dz_t U^T
    shapes.push_back({u, 4 * u, (steps - 1) * batch, true, false});  // dU
    shapes.push_back({below, 4 * u, n, true, false});                // dW
    if (l > 0) shapes.push_back({n, below, 4 * u, false, true});     // dx (layer below's h)
  }
  return shapes;
}

template class LstmStep<float>;
template class LstmStep<double>;

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
