// Shared pieces of the hand-written sequence-model baselines (bench/suite/lstm_baseline.cc,
// bench/suite/transformer_baseline.cc): Eigen map aliases, row-parallel passes, bias and column-sum
// epilogues, softmax cross-entropy, initializers and Adam slots. Eigen + oneTBB only, no kiln;
// internal to those two files.
#pragma once

#include <Eigen/Core>
#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <unsupported/Eigen/SpecialFunctions>
#include <utility>

#include "bench/suite/rnn_baselines.h"

namespace kiln::bench::rnn_detail {

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
inline constexpr int64_t kRowWork = 8192;
inline int64_t row_grain(int64_t cols) {
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

}  // namespace kiln::bench::rnn_detail
