// The steps of SimpleRNN, LSTM and GRU (Keras 3's SimpleRNNCell, LSTMCell and GRUCell
// formulas and gate orders); the loop around them is in recurrent.cc.
#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/activations.h"
#include "kiln/keras/layers/layer_util.h"
#include "kiln/keras/layers/recurrent.h"

namespace kiln {
namespace {

// Columns [k * units, (k + 1) * units) of a [batch, G*units] tensor: gate k.
Tensor gate(const Tensor& z, int k, int64_t units) {
  return slice(z, {0, k * units}, {std::numeric_limits<int64_t>::max(), (k + 1) * units});
}

}  // namespace

// ---------------------------------------------------------------- SimpleRNN

SimpleRNNImpl::SimpleRNNImpl(int64_t units, RecurrentOptions options)
    : RecurrentImpl("SimpleRNN", units, 1, 1, std::move(options)) {}

// h = activation(x W + b + h_prev U); the term is z = x W + b + h_prev U.
std::vector<Tensor> SimpleRNNImpl::project(const Tensor& xw, const Tensor& hu,
                                           const std::vector<Tensor>&) {
  return {xw + hu};
}

std::vector<Tensor> SimpleRNNImpl::gate_step(const std::vector<Tensor>& terms,
                                             const std::vector<Tensor>&,
                                             const std::vector<Tensor>&) {
  return {activations::apply(options_.activation, terms[0])};
}

void SimpleRNNImpl::add_config(Json&) const {}

SimpleRNN::SimpleRNN(int64_t units, RecurrentOptions options)
    : Layer(std::make_shared<SimpleRNNImpl>(units, std::move(options))) {}

// ---------------------------------------------------------------- LSTM

LSTMImpl::LSTMImpl(int64_t units, RecurrentOptions options)
    : RecurrentImpl("LSTM", units, 4, 2, std::move(options)) {}

// The term z = x W + b + h_prev U; gates i, f, c, o in that order;
// c = f * c_prev + i * activation(z_c); h = o * activation(c).
std::vector<Tensor> LSTMImpl::project(const Tensor& xw, const Tensor& hu,
                                      const std::vector<Tensor>&) {
  return {xw + hu};
}

std::vector<Tensor> LSTMImpl::gate_step(const std::vector<Tensor>& terms,
                                        const std::vector<Tensor>& s, const std::vector<Tensor>&) {
  const std::string &act = options_.activation, &rec = options_.recurrent_activation;
  const Tensor& z = terms[0];
  Tensor i = activations::apply(rec, gate(z, 0, units_));
  Tensor f = activations::apply(rec, gate(z, 1, units_));
  Tensor g = activations::apply(act, gate(z, 2, units_));
  Tensor o = activations::apply(rec, gate(z, 3, units_));
  Tensor c = f * s[1] + i * g;
  return {o * activations::apply(act, c), c};
}

// unit_forget_bias: the bias initializer for the i gate, ones for f, the initializer for c, o.
Initializer LSTMImpl::bias_initializer() const {
  if (!options_.unit_forget_bias) return options_.bias_initializer;
  Initializer base = options_.bias_initializer;
  const int64_t u = units_;
  return Initializer(base.name(), [base, u](const Shape&, DType t, int64_t) {
    return concat({base({u}, t), ones({u}, t), base({2 * u}, t)}, 0);
  });
}

void LSTMImpl::add_config(Json& c) const {
  c["recurrent_activation"] = options_.recurrent_activation;
  c["unit_forget_bias"] = options_.unit_forget_bias;
}

LSTM::LSTM(int64_t units, RecurrentOptions options)
    : Layer(std::make_shared<LSTMImpl>(units, std::move(options))) {}

// ---------------------------------------------------------------- GRU

GRUImpl::GRUImpl(int64_t units, RecurrentOptions options)
    : RecurrentImpl("GRU", units, 3, 1, std::move(options)) {}

Shape GRUImpl::bias_shape() const {
  return options_.reset_after ? Shape{2, 3 * units_} : Shape{3 * units_};
}

Tensor GRUImpl::input_bias() {
  if (!options_.use_bias) return Tensor();
  return options_.reset_after ? gather(read_weight(bias), scalar(0, DType::i64), 0)
                              : read_weight(bias);
}

// reset_after: {U, recurrent bias}; otherwise the three gate blocks of U.
std::vector<Tensor> GRUImpl::recurrent_weights() {
  Tensor u = read_weight(recurrent_kernel);
  if (options_.reset_after) {
    Tensor rb = options_.use_bias ? gather(read_weight(bias), scalar(1, DType::i64), 0) : Tensor();
    return {u, rb};
  }
  return {gate(u, 0, units_), gate(u, 1, units_), gate(u, 2, units_)};
}

// Gates z, r, h. reset_after (Keras 3's default, cuDNN's form):
//   m = h_prev U + b_rec; z = rec(x_z + m_z); r = rec(x_r + m_r); hh = act(x_h + r * m_h)
// otherwise: z = rec(x_z + h_prev U_z); r = rec(x_r + h_prev U_r); hh = act(x_h + (r h_prev) U_h)
// and h = z * h_prev + (1 - z) * hh. The terms: {x W + b, m} with reset_after; otherwise only
// {x W + b} (the products with h_prev stay in the step: (r h_prev) U_h needs the step's r).
std::vector<Tensor> GRUImpl::project(const Tensor& xw, const Tensor& hu,
                                     const std::vector<Tensor>& w) {
  if (!options_.reset_after) return {xw};
  return {xw, w[1].defined() ? hu + w[1] : hu};
}

bool GRUImpl::recurrent_product() const { return options_.reset_after; }
bool GRUImpl::product_adds_to_input() const { return false; }

std::vector<Tensor> GRUImpl::gate_step(const std::vector<Tensor>& terms,
                                       const std::vector<Tensor>& s, const std::vector<Tensor>& w) {
  const std::string &act = options_.activation, &rec = options_.recurrent_activation;
  const Tensor& h = s[0];
  const Tensor& xw = terms[0];
  Tensor z, r, hh;
  if (options_.reset_after) {
    const Tensor& m = terms[1];
    z = activations::apply(rec, gate(xw, 0, units_) + gate(m, 0, units_));
    r = activations::apply(rec, gate(xw, 1, units_) + gate(m, 1, units_));
    hh = activations::apply(act, gate(xw, 2, units_) + r * gate(m, 2, units_));
  } else {
    z = activations::apply(rec, gate(xw, 0, units_) + matmul(h, w[0]));
    r = activations::apply(rec, gate(xw, 1, units_) + matmul(h, w[1]));
    hh = activations::apply(act, gate(xw, 2, units_) + matmul(r * h, w[2]));
  }
  return {z * h + (1.0 - z) * hh};
}

void GRUImpl::add_config(Json& c) const {
  c["recurrent_activation"] = options_.recurrent_activation;
  c["reset_after"] = options_.reset_after;
}

GRU::GRU(int64_t units, RecurrentOptions options)
    : Layer(std::make_shared<GRUImpl>(units, std::move(options))) {}

}  // namespace kiln
