// Naive reference for the MultiHeadAttention tests: Keras 3's multi-head attention written as
// plain loops over std::vector<double>, with Keras' weight layouts and a [batch, Tq, Tv] mask
// (masked scores are -1e9 before the softmax). `of` reads the sizes and weights of a layer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::test {

struct MhaReference {
  int64_t batch, tq, tv, dq, dv, dk, heads, key_dim, value_dim, out_dim;
  std::vector<double> query, value, key;  // [batch, Tq, dq], [batch, Tv, dv], [batch, Tv, dk]
  // Keras layouts: kernels [d, heads, dim] and [heads, value_dim, out], biases [heads, dim] and
  // [out]; empty biases: none.
  std::vector<double> wq, bq, wk, bk, wv, bv, wo, bo;
  std::vector<int> mask;  // [batch, Tq, Tv] 0/1; empty: none

  // The reference of a built layer on query q, value v and key k (the value for none).
  static MhaReference of(const Layer& layer, const Tensor& q, const Tensor& v, const Tensor& k) {
    auto& impl = static_cast<MultiHeadAttentionImpl&>(layer.impl());
    MhaReference r;
    r.batch = q.shape()[0], r.tq = q.shape()[1], r.tv = v.shape()[1];
    r.dq = q.shape()[2], r.dv = v.shape()[2], r.dk = k.shape()[2];
    r.heads = impl.num_heads(), r.key_dim = impl.key_dim(), r.value_dim = impl.value_dim();
    r.out_dim = impl.output_kernel.shape()[2];
    r.query = q.to_vector<double>();
    r.value = v.to_vector<double>();
    r.key = k.to_vector<double>();
    std::vector<std::vector<double>> w;
    for (const Tensor& t : layer->get_weights()) w.push_back(t.to_vector<double>());
    if (w.size() == 8) {
      r.wq = w[0], r.bq = w[1], r.wk = w[2], r.bk = w[3];
      r.wv = w[4], r.bv = w[5], r.wo = w[6], r.bo = w[7];
    } else {
      r.wq = w[0], r.wk = w[1], r.wv = w[2], r.wo = w[3];
    }
    return r;
  }

  // Rounded operations behind one output element: the projections (d terms), the scores
  // (key_dim), the softmax sum and the weighted sum (Tv each) and the output projection
  // (heads * value_dim), times 8 for exp's rounding and the magnitudes met on the way.
  double terms() const {
    return 8.0 * double(std::max({dq, dv, dk}) + key_dim + 2 * tv + heads * value_dim);
  }

  struct Result {
    std::vector<double> output;  // [batch, Tq, out]
    std::vector<double> scores;  // [batch, heads, Tq, Tv] (the softmax probabilities)
  };

  // x [T, d] (batch b) through kernel [d, heads, dim] + bias [heads, dim], head h: [T, dim].
  static std::vector<double> project(const std::vector<double>& x, int64_t b, int64_t t_len,
                                     int64_t d, const std::vector<double>& w,
                                     const std::vector<double>& bias, int64_t heads, int64_t h,
                                     int64_t dim) {
    std::vector<double> y(static_cast<size_t>(t_len * dim));
    for (int64_t t = 0; t < t_len; ++t)
      for (int64_t j = 0; j < dim; ++j) {
        double acc = bias.empty() ? 0 : bias[size_t(h * dim + j)];
        for (int64_t c = 0; c < d; ++c)
          acc += x[size_t((b * t_len + t) * d + c)] * w[size_t((c * heads + h) * dim + j)];
        y[size_t(t * dim + j)] = acc;
      }
    return y;
  }

  Result run() const {
    Result r;
    r.output.assign(size_t(batch * tq * out_dim), 0);
    r.scores.assign(size_t(batch * heads * tq * tv), 0);
    // The heads' outputs before the output projection: [batch, Tq, heads, value_dim].
    std::vector<double> context(size_t(batch * tq * heads * value_dim), 0);
    const double scale = 1.0 / std::sqrt(double(key_dim));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> q = project(query, b, tq, dq, wq, bq, heads, h, key_dim);
        std::vector<double> k = project(key, b, tv, dk, wk, bk, heads, h, key_dim);
        std::vector<double> v = project(value, b, tv, dv, wv, bv, heads, h, value_dim);
        for (int64_t i = 0; i < tq; ++i) {
          std::vector<double> s(static_cast<size_t>(tv));
          for (int64_t j = 0; j < tv; ++j) {
            double acc = 0;
            for (int64_t c = 0; c < key_dim; ++c)
              acc += q[size_t(i * key_dim + c)] * scale * k[size_t(j * key_dim + c)];
            bool keep = mask.empty() || mask[size_t((b * tq + i) * tv + j)] != 0;
            s[size_t(j)] = keep ? acc : -1e9;
          }
          double m = *std::max_element(s.begin(), s.end()), total = 0;
          for (double& e : s) total += (e = std::exp(e - m));
          for (int64_t j = 0; j < tv; ++j) {
            double p = s[size_t(j)] / total;
            r.scores[size_t(((b * heads + h) * tq + i) * tv + j)] = p;
            for (int64_t c = 0; c < value_dim; ++c)
              context[size_t(((b * tq + i) * heads + h) * value_dim + c)] +=
                  p * v[size_t(j * value_dim + c)];
          }
        }
      }
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t o = 0; o < out_dim; ++o) {
          double acc = bo.empty() ? 0 : bo[size_t(o)];
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t c = 0; c < value_dim; ++c)
              acc += context[size_t(((b * tq + i) * heads + h) * value_dim + c)] *
                     wo[size_t((h * value_dim + c) * out_dim + o)];
          r.output[size_t((b * tq + i) * out_dim + o)] = acc;
        }
    return r;
  }
};

}  // namespace kiln::test
