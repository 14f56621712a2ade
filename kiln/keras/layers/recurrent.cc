// The loop shared by SimpleRNN, LSTM and GRU (recurrent.h): weights, masks, dropout masks,
// initial states, go_backwards, and the steps as one kiln::scan (a C++ loop eagerly, one
// stacked while loop when traced).
#include "kiln/keras/layers/recurrent.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "kiln/frontend/function/control_flow.h"
#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/tape_recorder.h"
#include "kiln/keras/layers/activations.h"
#include "kiln/keras/layers/initializers.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {
namespace {

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();

Tensor index_scalar(int64_t i) { return scalar(double(i), DType::i64); }

void check_rate(const std::string& layer, const char* arg, double rate) {
  if (!(rate >= 0 && rate < 1))
    throw Error(fmt::format("layer \"{}\": `{}` must be in [0, 1), got {}", layer, arg, rate));
}

// Zeros of shape `shape` whose unknown dimensions are taken from `like` (same rank): from a
// fully known shape directly, else broadcast to a slice of `like` (no arithmetic on its values).
Tensor zeros_shaped(const Shape& shape, const Tensor& like, DType dtype) {
  if (shape.is_fully_known()) return zeros(shape, dtype);
  Shape ones_shape = shape;
  Axes start, stop;
  for (int d = 0; d < shape.rank(); ++d) {
    ones_shape[d] = shape[d] == kUnknownDim ? 1 : shape[d];
    start.push_back(0);
    stop.push_back(shape[d] == kUnknownDim ? kToEnd : shape[d]);
  }
  return broadcast_like(zeros(ones_shape, dtype), slice(like, start, stop));
}

// x's value, invisible to gradient tapes (made while they are paused).
Tensor stopped_gradient(const Tensor& x) {
  detail::PauseTapes pause;
  return reshape(x, x.shape().to_vector());
}

// `carrier` ([steps, batch, width]) again, recorded on the tapes as a composite op of the
// carrier (when `carrier_gets_gradient`) and u ([units, width]): the carrier's gradient G passes
// through, and u receives reshape(*left)^T reshape(G) (*left: [steps, batch, units], set before
// the gradient is taken): the gradient of the products left_k @ u whose gradients are G's rows.
Tensor with_product_gradient(const Tensor& carrier, bool carrier_gets_gradient, const Tensor& u,
                             std::shared_ptr<Tensor> left) {
  Tensor out = stopped_gradient(carrier);
  // A concrete carrier (zeros of a known shape) would be a constant of the loop body, which
  // takes no gradient: trace it as a value of the graph.
  if (detail::TraceContext* ctx = detail::TraceContext::current(); ctx && !out.is_traced())
    out = ctx->wrap(ctx->value_of(out));
  std::vector<Tensor> inputs{u};
  if (carrier_gets_gradient) inputs.push_back(carrier);
  const int64_t units = u.shape()[0], width = u.shape()[1];
  detail::record_custom_on_tapes(
      inputs, std::span<const Tensor>(&out, 1),
      [left, units, width, carrier_gets_gradient](const std::vector<Tensor>& g,
                                                  const std::vector<bool>& needs) {
        std::vector<Tensor> d(carrier_gets_gradient ? 2 : 1);
        if (!g[0].defined()) return d;
        KILN_ASSERT(left->defined(), "a recurrent product's gradient before its loop was traced");
        if (needs[0])
          d[0] = matmul(reshape(*left, {-1, units}), reshape(g[0], {-1, width}), true, false);
        if (carrier_gets_gradient) d[1] = g[0];
        return d;
      });
  return out;
}

}  // namespace

RecurrentImpl::RecurrentImpl(std::string class_name, int64_t units, int gates, int num_states,
                             RecurrentOptions options)
    : LayerImpl(std::move(class_name), options.name),
      units_(units),
      gates_(gates),
      num_states_(num_states),
      options_(std::move(options)) {
  if (units <= 0)
    throw Error(
        fmt::format("layer \"{}\": Received an invalid value for argument `units`, expected a "
                    "positive integer, got {}.",
                    name(), units));
  use_dtype_option(options_.dtype);
  check_rate(name(), "dropout", options_.dropout);
  check_rate(name(), "recurrent_dropout", options_.recurrent_dropout);
  seed_generator_ = add_seed_generator(options_.seed);
  options_.activation = activations::canonical(options_.activation);
  options_.recurrent_activation = activations::canonical(options_.recurrent_activation);
  activity_regularizer = options_.activity_regularizer;
  supports_masking = true;
  input_spec = {InputSpec{.ndim = 3}};
}

Shape RecurrentImpl::bias_shape() const { return {gates_ * units_}; }
Initializer RecurrentImpl::bias_initializer() const { return options_.bias_initializer; }
Tensor RecurrentImpl::input_bias() { return options_.use_bias ? read_weight(bias) : Tensor(); }
std::vector<Tensor> RecurrentImpl::recurrent_weights() { return {read_weight(recurrent_kernel)}; }

void RecurrentImpl::build_many(const std::vector<Shape>& shapes) {
  const Shape& x = shapes[0];
  if (x.rank() != 3 || x[2] == kUnknownDim)
    throw Error(fmt::format(
        "layer \"{}\": {} expects inputs of shape [batch, timesteps, features] with known "
        "features, got {}",
        name(), class_name(), x.to_string()));
  const int64_t in = x[2];
  kernel = add_weight("kernel", {in, gates_ * units_}, options_.kernel_initializer, true,
                      variable_dtype(), options_.kernel_regularizer, options_.kernel_constraint);
  recurrent_kernel = add_weight("recurrent_kernel", {units_, gates_ * units_},
                                options_.recurrent_initializer, true, variable_dtype(),
                                options_.recurrent_regularizer, options_.recurrent_constraint);
  if (options_.use_bias)
    bias = add_weight("bias", bias_shape(), bias_initializer(), true, variable_dtype(),
                      options_.bias_regularizer, options_.bias_constraint);
  input_spec = {InputSpec{.ndim = 3, .axes = {{-1, in}}}};
}

std::vector<Tensor> RecurrentImpl::call_many(const std::vector<Tensor>& inputs, bool training) {
  return call_masked(inputs, std::vector<Tensor>(inputs.size()), training);
}

std::vector<Tensor> RecurrentImpl::call_masked(const std::vector<Tensor>& inputs,
                                               const std::vector<Tensor>& masks, bool training) {
  if (inputs.size() != 1 && inputs.size() != size_t(1 + num_states_))
    throw Error(fmt::format(
        "layer \"{}\": {} takes the sequence, optionally followed by {} initial state(s); got {} "
        "inputs",
        name(), class_name(), num_states_, inputs.size()));
  const Tensor& x = inputs[0];
  Tensor mask = masks.empty() ? Tensor() : masks[0];
  if (mask.defined()) mask = layer_util::sequence_mask(name(), x, mask);
  std::vector<Tensor> states(inputs.begin() + 1, inputs.end());
  for (size_t i = 0; i < states.size(); ++i) {
    const Shape& s = states[i].shape();
    bool ok = s.rank() == 2 && s[1] == units_ &&
              (s[0] == x.shape()[0] || s[0] == kUnknownDim || x.shape()[0] == kUnknownDim);
    if (!ok)
      throw Error(fmt::format(
          "layer \"{}\": initial state {} must have shape [batch, units] = [{}, {}], got {}",
          name(), i, x.shape()[0] == kUnknownDim ? "batch" : std::to_string(x.shape()[0]), units_,
          s.to_string()));
    states[i] = layer_util::cast_input(states[i], compute_dtype());
  }
  return run(layer_util::cast_input(x, compute_dtype()), mask, std::move(states), training);
}

std::vector<Tensor> RecurrentImpl::run(const Tensor& x, const Tensor& mask,
                                       std::vector<Tensor> states, bool training) {
  const Shape& xs = x.shape();
  const int64_t batch = xs[0], steps = xs[1];
  const DType dt = compute_dtype();
  if (x.is_placeholder()) {  // a functional model being built: types only
    std::vector<Tensor> out;
    Shape y = options_.return_sequences ? Shape{batch, steps, units_} : Shape{batch, units_};
    out.push_back(Tensor::symbolic({dt, y}, nullptr));
    if (options_.return_state)
      for (int i = 0; i < num_states_; ++i)
        out.push_back(Tensor::symbolic({dt, Shape{batch, units_}}, nullptr));
    return out;
  }
  if (steps == 0)
    throw Error(fmt::format("layer \"{}\": the input has no time steps (shape {})", name(),
                            xs.to_string()));
  const bool traced = x.is_traced();
  if (traced && steps == kUnknownDim)
    throw Error(fmt::format(
        "layer \"{}\": {} traced with an unknown number of time steps (input {}); trace with "
        "the sequence length known (an input_signature with a fixed timesteps dimension)",
        name(), class_name(), xs.to_string()));

  // Dropout masks: drawn once per call and shared by every step (Keras).
  Tensor x_in = x, recurrent_mask;
  if (training && options_.dropout > 0) {
    Tensor first = gather(x, index_scalar(0), 1);  // [batch, features]
    x_in = x * expand_dims(dropout(ones_like(first), options_.dropout, seed_generator_.next()), 1);
  }

  Tensor kernel_value = read_weight(kernel), bias_value = input_bias();
  // Zeros [batch, units] (the batch size taken from a [batch, G*units] tensor when unknown).
  if (states.empty()) {
    const Tensor zero_rows =
        batch != kUnknownDim
            ? zeros({batch, units_}, dt)
            : zeros_shaped({batch, units_}, matmul(gather(x_in, index_scalar(0), 1), kernel_value),
                           dt);
    for (int i = 0; i < num_states_; ++i) states.push_back(zero_rows);
  }
  if (training && options_.recurrent_dropout > 0)
    recurrent_mask =
        dropout(ones_like(states[0]), options_.recurrent_dropout, seed_generator_.next());
  std::vector<Tensor> weights = recurrent_weights();

  // The GEMM terms of a step from its projected input xw ([batch, G*units]), the previous
  // output h and the recurrent weight u to multiply it by (h is multiplied by the recurrent
  // dropout mask first). (Captures by value: a traced loop's gradient runs the body again.)
  auto masked = [recurrent_mask](const Tensor& h) {
    return recurrent_mask.defined() ? h * recurrent_mask : h;
  };
  const bool product = recurrent_product();
  auto project_row = [this, weights, masked, product](const Tensor& xw, const Tensor& h,
                                                      const Tensor& u) {
    return project(xw, product ? matmul(masked(h), u) : Tensor(), weights);
  };
  // The step at `t` from the states and its terms: the new states, masked steps keeping the old.
  auto step_at = [this, weights, recurrent_mask, mask](const Tensor& t,
                                                       const std::vector<Tensor>& terms,
                                                       const std::vector<Tensor>& s) {
    std::vector<Tensor> in = s;
    if (recurrent_mask.defined()) in[0] = in[0] * recurrent_mask;
    std::vector<Tensor> next = gate_step(terms, in, weights);
    if (mask.defined()) {
      Tensor keep = expand_dims(gather(mask, t, 1), 1);  // [batch, 1]
      for (size_t i = 0; i < next.size(); ++i) next[i] = where(keep, next[i], s[i]);
    }
    return next;
  };
  const bool backwards = options_.go_backwards;
  auto time_of = [steps, backwards](const Tensor& k) {
    return backwards ? index_scalar(steps - 1) - k : k;
  };
  const size_t n_states = states.size();
  ScanResult r;
  if (!traced) {
    // Eagerly a C++ loop, each step projecting its own input (the tape keeps every product).
    r = scan(
        steps,
        [&](const Tensor& k, const std::vector<Tensor>& s) {
          const Tensor t = time_of(k);
          Tensor xw = matmul(gather(x_in, t, 1), kernel_value);
          if (bias_value.defined()) xw = xw + bias_value;
          return step_at(t, project_row(xw, s[0], weights[0]), s);
        },
        states);
  } else {
    // Traced: every step's input projection is one GEMM before the loop ([steps * batch, in]
    // x [in, G*units], steps in processing order), and the loop is a kiln::scan over its rows,
    // so the gradient loop returns the rows' gradients as one stack and the kernel's gradient
    // and the input's are single GEMMs after it. The state also carries the next step's terms
    // (recurrent.h), so step k reads the projection of input k + 1 (the last step that of its
    // own input again: unused), and the first step's terms are made before the loop. The bias
    // is added in the loop: its gradient is then summed over [batch] rows per step instead of
    // over all [steps * batch] rows after the loop.
    const int64_t in = xs[2], width = kernel_value.shape()[1];
    Tensor x_steps = transpose(x_in, {1, 0, 2});  // [steps, batch, in]
    if (backwards) x_steps = gather(x_steps, arange(double(steps - 1), -1, -1, DType::i64), 0);
    Tensor x_next = gather(
        x_steps, minimum(arange(1, double(steps) + 1, 1, DType::i64), index_scalar(steps - 1)), 0);
    Tensor xw_next = reshape(matmul(reshape(x_next, {-1, in}), kernel_value), {steps, -1, width});
    auto with_bias = [bias_value](const Tensor& xw) {
      return bias_value.defined() ? xw + bias_value : xw;
    };
    std::vector<Tensor> terms =
        project_row(with_bias(matmul(gather(x_steps, index_scalar(0), 0), kernel_value)), states[0],
                    weights[0]);
    states.insert(states.end(), terms.begin(), terms.end());
    // The loop multiplies by the recurrent weight with its gradient stopped; the gradients of
    // the products come back as the stack of a sequence's rows (xw_next's when the product is
    // added to it, else a zero sequence's added to each product), and that sequence's recorded
    // gradient gives the weight sum_k left_k^T d(product_k) as one GEMM after the loop, left_k
    // being the masked output of step k (filled in once the loop is traced).
    Tensor u_in_loop, product_rows;
    auto left = std::make_shared<Tensor>();
    if (product) {
      u_in_loop = stopped_gradient(weights[0]);
      if (product_adds_to_input())
        xw_next = with_product_gradient(xw_next, true, weights[0], left);
      else
        product_rows = with_product_gradient(zeros_like(xw_next), false, weights[0], left);
    }
    std::vector<Tensor> sequences{xw_next};
    if (product_rows.defined()) sequences.push_back(product_rows);
    r = scan(
        steps,
        [step_at, masked, with_bias, time_of, n_states, u_in_loop, weights, this](
            const Tensor& k, const std::vector<Tensor>& s, const std::vector<Tensor>& rows) {
          std::vector<Tensor> st(s.begin(), s.begin() + std::ptrdiff_t(n_states));
          std::vector<Tensor> terms(s.begin() + std::ptrdiff_t(n_states), s.end());
          std::vector<Tensor> next = step_at(time_of(k), terms, st);
          Tensor hu;
          if (u_in_loop.defined()) hu = matmul(masked(next[0]), u_in_loop);
          if (rows.size() > 1) hu = hu + rows[1];
          std::vector<Tensor> next_terms = project(with_bias(rows[0]), hu, weights);
          next.insert(next.end(), next_terms.begin(), next_terms.end());
          return next;
        },
        states, sequences);
    if (product) *left = masked(r.stacked[0]);  // [steps, batch, units]
  }
  r.final_state.resize(n_states);
  states = r.final_state;
  Tensor sequence;
  if (options_.return_sequences) {
    // [steps, batch, units] in processing order (reversed time with go_backwards, as Keras).
    sequence = transpose(r.stacked[0], {1, 0, 2});
    if (mask.defined() && options_.zero_output_for_mask) {
      Tensor keep = mask;  // [batch, steps]
      if (backwards) keep = gather(mask, arange(double(steps - 1), -1, -1, DType::i64), 1);
      sequence = where(expand_dims(keep, 2), sequence, zeros_like(sequence));
    }
  }

  std::vector<Tensor> result{options_.return_sequences ? sequence : states[0]};
  if (options_.return_state) result.insert(result.end(), states.begin(), states.end());
  return result;
}

class RecurrentImpl::FlagsScope {
 public:
  FlagsScope(RecurrentOptions& o, const SequenceFlags& f)
      : o_(o), saved_{o.return_sequences, o.return_state, o.go_backwards, o.zero_output_for_mask} {
    set(f);
  }
  ~FlagsScope() { set(saved_); }
  FlagsScope(const FlagsScope&) = delete;
  FlagsScope& operator=(const FlagsScope&) = delete;

 private:
  void set(const SequenceFlags& f) {
    o_.return_sequences = f.return_sequences;
    o_.return_state = f.return_state;
    o_.go_backwards = f.go_backwards;
    o_.zero_output_for_mask = f.zero_output_for_mask;
  }
  RecurrentOptions& o_;
  SequenceFlags saved_;
};

std::vector<Tensor> RecurrentImpl::call_with(const SequenceFlags& flags,
                                             const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& masks, bool training) {
  FlagsScope scope(options_, flags);
  return call_masked(inputs, masks, training);
}

std::vector<Tensor> RecurrentImpl::compute_mask_with(const SequenceFlags& flags,
                                                     const std::vector<Tensor>& inputs,
                                                     const std::vector<Tensor>& masks) {
  FlagsScope scope(options_, flags);
  return compute_mask(inputs, masks);
}

std::vector<Shape> RecurrentImpl::compute_output_shape_with(const SequenceFlags& flags,
                                                            const std::vector<Shape>& shapes) {
  FlagsScope scope(options_, flags);
  return compute_output_shape(shapes);
}

std::vector<Tensor> RecurrentImpl::compute_mask(const std::vector<Tensor>&,
                                                const std::vector<Tensor>& masks) {
  Tensor seq = options_.return_sequences && !masks.empty() ? masks[0] : Tensor();
  std::vector<Tensor> out{seq};
  if (options_.return_state) out.resize(size_t(1 + num_states_));
  return out;
}

std::vector<Shape> RecurrentImpl::compute_output_shape(const std::vector<Shape>& shapes) {
  if (shapes.empty() || shapes[0].rank() != 3)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects [batch, timesteps, "
                    "features]",
                    name()));
  const int64_t b = shapes[0][0];
  std::vector<Shape> out{options_.return_sequences ? Shape{b, shapes[0][1], units_}
                                                   : Shape{b, units_}};
  if (options_.return_state)
    for (int i = 0; i < num_states_; ++i) out.push_back(Shape{b, units_});
  return out;
}

Json RecurrentImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["units"] = units_;
  c["activation"] = options_.activation;
  c["use_bias"] = options_.use_bias;
  layer_util::weight_config(c, "kernel", options_.kernel_initializer, options_.kernel_regularizer,
                            options_.kernel_constraint);
  layer_util::weight_config(c, "recurrent", options_.recurrent_initializer,
                            options_.recurrent_regularizer, options_.recurrent_constraint);
  layer_util::weight_config(c, "bias", options_.bias_initializer, options_.bias_regularizer,
                            options_.bias_constraint);
  c["dropout"] = options_.dropout;
  c["recurrent_dropout"] = options_.recurrent_dropout;
  c["seed"] = options_.seed ? Json(*options_.seed) : Json(nullptr);
  c["return_sequences"] = options_.return_sequences;
  c["return_state"] = options_.return_state;
  c["go_backwards"] = options_.go_backwards;
  c["stateful"] = false;
  c["unroll"] = options_.unroll;
  c["zero_output_for_mask"] = options_.zero_output_for_mask;
  add_config(c);
  return c;
}

Layer recurrent_from_config(const Json& config, const std::string& class_name) {
  ConfigReader c(config, class_name);
  RecurrentOptions o;
  layer_config::recurrent_step_entries(c, o);
  layer_config::sequence_entries(c, o);
  const int64_t units = c.get<int64_t>("units");
  if (class_name == "LSTM") return LSTM(units, o);
  if (class_name == "GRU") return GRU(units, o);
  return SimpleRNN(units, o);
}

}  // namespace kiln
