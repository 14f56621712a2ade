// Hand-written LSTM training step (see bench/suite/rnn_baselines.h): Eigen + oneTBB only, no kiln.
#include "bench/suite/rnn_baselines.h"
#include "bench/suite/rnn_kernels.h"

namespace kiln::bench {

using namespace rnn_detail;

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

}  // namespace kiln::bench
