// Naive references for the recurrent layer tests: SimpleRNN, LSTM and GRU written as plain
// loops over std::vector<double> from Keras 3's cell formulas, with Keras' weight layouts,
// masks (masked steps carry the state and repeat the previous output) and go_backwards.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::test {

struct RnnReference {
  std::string kind;  // "SimpleRNN", "LSTM", "GRU"
  int64_t batch, steps, features, units;
  std::vector<double> x;                        // [batch, steps, features]
  std::vector<double> kernel, recurrent, bias;  // Keras layouts; bias empty without use_bias
  bool reset_after = true;                      // GRU
  bool go_backwards = false;
  std::vector<int> mask;  // [batch, steps] 0/1, empty: no mask

  // sequence: [batch, steps, units] (outputs in processing order); states: [batch, units] each.
  struct Result {
    std::vector<double> sequence, last;
    std::vector<std::vector<double>> states;
  };

  int gates() const { return kind == "LSTM" ? 4 : kind == "GRU" ? 3 : 1; }

  Result run(const std::vector<std::vector<double>>& initial = {}) const {
    const int64_t G = gates(), U = units, W = G * U;
    const int nstates = kind == "LSTM" ? 2 : 1;
    Result r;
    r.sequence.assign(size_t(batch * steps * U), 0);
    r.last.assign(size_t(batch * U), 0);
    r.states.assign(size_t(nstates), std::vector<double>(size_t(batch * U), 0));
    auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<double> h(size_t(U), 0), c(size_t(U), 0);
      if (!initial.empty()) {
        for (int64_t u = 0; u < U; ++u) h[size_t(u)] = initial[0][size_t(b * U + u)];
        if (nstates == 2)
          for (int64_t u = 0; u < U; ++u) c[size_t(u)] = initial[1][size_t(b * U + u)];
      }
      for (int64_t i = 0; i < steps; ++i) {
        const int64_t t = go_backwards ? steps - 1 - i : i;
        // xw = x_t kernel + input bias; hr = h recurrent (+ recurrent bias for GRU reset_after)
        std::vector<double> xw(size_t(W), 0), hr(size_t(W), 0);
        for (int64_t j = 0; j < W; ++j) {
          double s = 0;
          for (int64_t f = 0; f < features; ++f)
            s += x[size_t((b * steps + t) * features + f)] * kernel[size_t(f * W + j)];
          if (!bias.empty()) s += bias[size_t(j)];
          xw[size_t(j)] = s;
          double q = 0;
          for (int64_t u = 0; u < U; ++u) q += h[size_t(u)] * recurrent[size_t(u * W + j)];
          if (kind == "GRU" && reset_after && !bias.empty()) q += bias[size_t(W + j)];
          hr[size_t(j)] = q;
        }
        std::vector<double> nh(static_cast<size_t>(U)), nc(static_cast<size_t>(U));
        for (int64_t u = 0; u < U; ++u) {
          auto X = [&](int64_t g) { return xw[size_t(g * U + u)]; };
          auto H = [&](int64_t g) { return hr[size_t(g * U + u)]; };
          if (kind == "SimpleRNN") {
            nh[size_t(u)] = std::tanh(X(0) + H(0));
          } else if (kind == "LSTM") {
            double ig = sig(X(0) + H(0)), fg = sig(X(1) + H(1)), gg = std::tanh(X(2) + H(2)),
                   og = sig(X(3) + H(3));
            nc[size_t(u)] = fg * c[size_t(u)] + ig * gg;
            nh[size_t(u)] = og * std::tanh(nc[size_t(u)]);
          } else {
            double z = sig(X(0) + H(0)), rg = sig(X(1) + H(1)), hh;
            if (reset_after) {
              hh = std::tanh(X(2) + rg * H(2));
            } else {
              double q = 0;  // (r * h) U_h
              for (int64_t k = 0; k < U; ++k)
                q += rg_at(xw, hr, h, k) * h[size_t(k)] * recurrent[size_t(k * W + 2 * U + u)];
              hh = std::tanh(X(2) + q);
            }
            nh[size_t(u)] = z * h[size_t(u)] + (1 - z) * hh;
          }
        }
        const bool keep = mask.empty() || mask[size_t(b * steps + t)] != 0;
        if (keep) {
          h = nh;
          if (kind == "LSTM") c = nc;
        }
        for (int64_t u = 0; u < U; ++u) r.sequence[size_t((b * steps + i) * U + u)] = h[size_t(u)];
      }
      for (int64_t u = 0; u < U; ++u) {
        r.last[size_t(b * U + u)] = h[size_t(u)];
        r.states[0][size_t(b * U + u)] = h[size_t(u)];
        if (nstates == 2) r.states[1][size_t(b * U + u)] = c[size_t(u)];
      }
    }
    return r;
  }

 private:
  // GRU without reset_after: the reset gate of unit k (needs the whole row, not just unit u).
  double rg_at(const std::vector<double>& xw, const std::vector<double>& hr,
               const std::vector<double>&, int64_t k) const {
    const double v = xw[size_t(units + k)] + hr[size_t(units + k)];
    return 1 / (1 + std::exp(-v));
  }
};

}  // namespace kiln::test
