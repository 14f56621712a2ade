// MultiHeadAttention (attention.h): argument and shape checks, Keras' weights, the combined
// mask, and the attention itself in kiln ops.
#include "kiln/keras/layers/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kiln/frontend/function/trace_context.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {
namespace {

// reshape() takes -1 for one inferred dimension: a shape with one unknown dimension is its own
// reshape target.
static_assert(kUnknownDim == -1);

bool same_dim(int64_t a, int64_t b) { return a == b || a == kUnknownDim || b == kUnknownDim; }

void check_positive(const std::string& layer, const char* arg, int64_t value) {
  if (value <= 0)
    throw Error(
        fmt::format("layer \"{}\": Received an invalid value for argument `{}`, expected a "
                    "positive integer, got {}.",
                    layer, arg, value));
}

Tensor as_bool(const Tensor& mask) {
  return mask.dtype() == DType::b8 ? mask : not_equal(mask, scalar(0, mask.dtype()));
}

const char* const kRoles[] = {"query", "value", "key"};

}  // namespace

MultiHeadAttentionImpl::MultiHeadAttentionImpl(int64_t num_heads, int64_t key_dim,
                                               MultiHeadAttentionOptions options)
    : LayerImpl("MultiHeadAttention", options.name),
      num_heads_(num_heads),
      key_dim_(key_dim),
      value_dim_(options.value_dim.value_or(key_dim)),
      options_(std::move(options)) {
  check_positive(name(), "num_heads", num_heads);
  check_positive(name(), "key_dim", key_dim);
  check_positive(name(), "value_dim", value_dim_);
  if (options_.output_shape) check_positive(name(), "output_shape", *options_.output_shape);
  if (!(options_.dropout >= 0 && options_.dropout < 1))
    throw Error(
        fmt::format("layer \"{}\": `dropout` must be in [0, 1), got {}", name(), options_.dropout));
  use_dtype_option(options_.dtype);
  if (options_.dropout > 0) seed_generator_ = add_seed_generator(options_.seed);
  supports_masking = true;
}

void MultiHeadAttentionImpl::check_shapes(const std::vector<Shape>& shapes) const {
  if (shapes.empty() || shapes.size() > 4)
    throw Error(fmt::format(
        "layer \"{}\": MultiHeadAttention takes {{query, value}}, {{query, value, key}} or "
        "{{query, value, key, attention_mask}} ({{x}} for self-attention); got {} inputs",
        name(), shapes.size()));
  const size_t n = std::min<size_t>(shapes.size(), 3);
  for (size_t i = 0; i < n; ++i)
    if (shapes[i].rank() != 3 || shapes[i][2] == kUnknownDim)
      throw Error(fmt::format(
          "layer \"{}\": the {} must have shape [batch, length, features] with known features, "
          "got {}",
          name(), kRoles[i], shapes[i].to_string()));
  const Shape& q = shapes[0];
  const Shape& v = shapes.size() > 1 ? shapes[1] : q;
  const Shape& k = shapes.size() > 2 ? shapes[2] : v;
  if (!same_dim(q[0], v[0]) || !same_dim(q[0], k[0]) || !same_dim(v[0], k[0]))
    throw Error(fmt::format(
        "layer \"{}\": the query, value and key must have the same batch size; got query {}, "
        "value {}, key {}",
        name(), q.to_string(), v.to_string(), k.to_string()));
  if (!same_dim(v[1], k[1]))
    throw Error(fmt::format(
        "layer \"{}\": the key and the value must have the same length (axis 1); got value {} "
        "and key {}",
        name(), v.to_string(), k.to_string()));
  if (shapes.size() == 4) {
    const Shape& m = shapes[3];
    const Shape target{q[0], q[1], v[1]};
    bool ok = m.rank() == 2 || m.rank() == 3;
    for (int d = 0; ok && d < m.rank(); ++d) {
      int64_t got = m[m.rank() - 1 - d], want = target[2 - d];
      ok = got == 1 || same_dim(got, want);
    }
    if (!ok)
      throw Error(fmt::format(
          "layer \"{}\": the attention_mask must have shape [batch, Tq, Tv] = {} (from the "
          "query {} and the value {}), or [Tq, Tv], or size 1 on the axes to broadcast; got {}",
          name(), target.to_string(), q.to_string(), v.to_string(), m.to_string()));
  }
  if (!built_) return;
  const Variable* kernels[] = {&query_kernel, &value_kernel, &key_kernel};
  for (size_t i = 0; i < 3; ++i) {
    const Shape& s = i == 0 ? q : i == 1 ? v : k;
    const Shape& w = kernels[i]->shape();
    if (s[2] != w[0])
      throw Error(fmt::format(
          "layer \"{}\": the {} has {} features (shape {}), but the layer was built for {} "
          "(weight {}/kernel {}); call it with inputs like the first call's, or use a new layer",
          name(), kRoles[i], s[2], s.to_string(), w[0], kRoles[i], w.to_string()));
  }
}

void MultiHeadAttentionImpl::build_many(const std::vector<Shape>& shapes) {
  check_shapes(shapes);
  const Shape& q = shapes[0];
  const Shape& v = shapes.size() > 1 ? shapes[1] : q;
  const Shape& k = shapes.size() > 2 ? shapes[2] : v;
  const int64_t out = options_.output_shape.value_or(q[2]);
  const MultiHeadAttentionOptions& o = options_;
  auto dense = [&](const std::string& prefix, const Shape& kernel_shape, const Shape& bias_shape,
                   Variable& kernel, Variable& bias) {
    kernel = add_weight(prefix + "/kernel", kernel_shape, o.kernel_initializer, true,
                        variable_dtype(), o.kernel_regularizer, o.kernel_constraint);
    if (o.use_bias)
      bias = add_weight(prefix + "/bias", bias_shape, o.bias_initializer, true, variable_dtype(),
                        o.bias_regularizer, o.bias_constraint);
  };
  dense("query", {q[2], num_heads_, key_dim_}, {num_heads_, key_dim_}, query_kernel, query_bias);
  dense("key", {k[2], num_heads_, key_dim_}, {num_heads_, key_dim_}, key_kernel, key_bias);
  dense("value", {v[2], num_heads_, value_dim_}, {num_heads_, value_dim_}, value_kernel,
        value_bias);
  dense("attention_output", {num_heads_, value_dim_, out}, {out}, output_kernel, output_bias);
}

std::vector<Tensor> MultiHeadAttentionImpl::call_many(const std::vector<Tensor>& inputs,
                                                      bool training) {
  return call_masked(inputs, {}, training);
}

std::vector<Tensor> MultiHeadAttentionImpl::call_masked(const std::vector<Tensor>& inputs,
                                                        const std::vector<Tensor>& masks,
                                                        bool training) {
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  check_shapes(shapes);
  const size_t n = inputs.size();
  const Tensor& query = inputs[0];
  const Tensor& value = n > 1 ? inputs[1] : query;
  const Tensor& key = n > 2 ? inputs[2] : value;
  const Tensor attention_mask = n > 3 ? inputs[3] : Tensor();
  // The keras masks of the query, value and key (Keras: none for a key not given).
  Tensor seq_masks[3];
  for (size_t i = 0; i < 3 && i < masks.size() && i < n; ++i) seq_masks[i] = masks[i];
  if (n == 1) seq_masks[1] = seq_masks[0];
  const Tensor* seqs[] = {&query, &value, &key};
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& m = seq_masks[i];
    const Shape& s = seqs[i]->shape();
    if (!m.defined()) continue;
    if (m.rank() != 2 || !same_dim(m.shape()[0], s[0]) || !same_dim(m.shape()[1], s[1]))
      throw Error(fmt::format(
          "layer \"{}\": the {}'s mask must have shape [batch, length] = {} (the first two "
          "axes of the {} {}); got a mask of shape {}",
          name(), kRoles[i], Shape{s[0], s[1]}.to_string(), kRoles[i], s.to_string(),
          m.shape().to_string()));
    seq_masks[i] = as_bool(m);
  }
  const Flags flags =
      call_flags_.value_or(Flags{options_.use_causal_mask, options_.return_attention_scores});

  bool placeholder = false;
  for (const Tensor& t : inputs) placeholder = placeholder || t.is_placeholder();
  if (placeholder) {  // a functional model being built: types only
    const int64_t b = query.shape()[0], tq = query.shape()[1], tv = value.shape()[1];
    std::vector<Tensor> out{
        Tensor::symbolic({compute_dtype(), Shape{b, tq, output_kernel.shape()[2]}}, nullptr)};
    if (flags.scores)
      out.push_back(Tensor::symbolic({compute_dtype(), Shape{b, num_heads_, tq, tv}}, nullptr));
    return out;
  }
  // kiln's reshape (and expand_dims) infers one unknown dimension: splitting the heads of a
  // projection [batch, T, heads * k] needs batch or T known.
  for (size_t i = 0; i < 3; ++i) {
    const Shape& s = seqs[i]->shape();
    if (s[0] == kUnknownDim && s[1] == kUnknownDim)
      throw Error(fmt::format(
          "layer \"{}\": MultiHeadAttention was traced with the {}'s batch size and length both "
          "unknown (shape {}); trace with one of them known (an input_signature with a fixed "
          "batch size or a fixed length)",
          name(), kRoles[i], s.to_string()));
  }
  // The fused attention op takes causality as an attribute; the composed ops need the
  // causal mask as a tensor.
  const bool fused = use_fused(query, value, flags, training);
  Tensor mask = combined_mask(query, value, seq_masks[0], seq_masks[1], seq_masks[2],
                              attention_mask, flags.causal && !fused);
  return compute(query, value, key, mask, flags, fused, training);
}

Tensor MultiHeadAttentionImpl::combined_mask(const Tensor& query, const Tensor& value,
                                             const Tensor& query_mask, const Tensor& value_mask,
                                             const Tensor& key_mask, const Tensor& attention_mask,
                                             bool causal) const {
  Tensor mask;
  auto and_with = [&mask](const Tensor& m) { mask = mask.defined() ? logical_and(mask, m) : m; };
  if (query_mask.defined()) and_with(expand_dims(query_mask, 2));  // [batch, Tq, 1]
  if (value_mask.defined()) and_with(expand_dims(value_mask, 1));  // [batch, 1, Tv]
  if (key_mask.defined()) and_with(expand_dims(key_mask, 1));
  if (causal) {
    const int64_t tq = query.shape()[1], tv = value.shape()[1];
    if (tq == kUnknownDim || tv == kUnknownDim)
      throw Error(fmt::format(
          "layer \"{}\": use_causal_mask needs the query and value lengths, but this trace has "
          "them unknown (query {}, value {}); trace with known lengths (an input_signature "
          "with a fixed axis 1)",
          name(), query.shape().to_string(), value.shape().to_string()));
    // Keras: query i sees the keys j <= i. [Tq, Tv]
    Tensor rows = reshape(arange(0, double(tq), 1, DType::i64), {tq, 1});
    Tensor cols = reshape(arange(0, double(tv), 1, DType::i64), {1, tv});
    and_with(less_equal(cols, rows));
  }
  if (attention_mask.defined()) and_with(as_bool(attention_mask));
  return mask;  // [batch, Tq, Tv], [1, Tq, Tv] or [Tq, Tv]
}

// x [batch, T, d] through a kernel [d, heads, k] and a bias [heads, k]: [heads, batch, T, k]
// (heads first: the [batch, Tq, Tv] mask then broadcasts over the heads as it is).
Tensor MultiHeadAttentionImpl::project(const Tensor& x, const Variable& kernel,
                                       const Variable& bias) {
  const Shape& w = kernel.shape();
  const int64_t d = w[0], heads = w[1], k = w[2], batch = x.shape()[0], t = x.shape()[1];
  // One GEMM: [batch, T, d] @ [d, heads * k]. (At most one of batch and T is unknown:
  // call_masked checks it, so reshape infers it.)
  Tensor y = matmul(x, reshape(read_weight(kernel), {d, heads * k}));
  if (options_.use_bias) y = y + reshape(read_weight(bias), {heads * k});
  y = transpose(reshape(y, {batch, t, heads, k}), {2, 0, 1, 3});
  if (options_.activity_regularizer.active()) add_loss(options_.activity_regularizer(y));
  return y;
}

bool MultiHeadAttentionImpl::use_fused(const Tensor& query, const Tensor& value, Flags flags,
                                       bool training) const {
  // The gradient of the fused op cuts dq, dk and dv out of one tensor, which needs the query
  // length or the key length known (frontend/grad_nn.cc).
  const bool lengths = query.shape()[1] != kUnknownDim || value.shape()[1] != kUnknownDim;
  return !flags.scores && !(training && options_.dropout > 0) && lengths;
}

std::vector<Tensor> MultiHeadAttentionImpl::compute(const Tensor& query, const Tensor& value,
                                                    const Tensor& key, const Tensor& mask,
                                                    Flags flags, bool fused, bool training) {
  const DType dt = compute_dtype();
  const double scale = 1.0 / std::sqrt(double(key_dim_));
  Tensor q = project(layer_util::cast_input(query, dt), query_kernel, query_bias);
  Tensor k = project(layer_util::cast_input(key, dt), key_kernel, key_bias);
  Tensor v = project(layer_util::cast_input(value, dt), value_kernel, value_bias);
  Tensor heads_out, probs;  // [heads, batch, Tq, value_dim], [heads, batch, Tq, Tv]
  if (fused) {
    // One kernel: scores, mask, softmax and the weighted sum per block of query rows.
    heads_out = attention(q, k, v, mask, scale, flags.causal);
  } else {
    Tensor scores = matmul(q * scale, k, false, true);
    if (mask.defined()) scores = where(mask, scores, scalar(-1e9, dt));
    probs = softmax(scores, -1);
    Tensor dropped = probs;
    // (Not on symbolic inputs: a draw would advance the seed state for a type-only call.)
    if (training && options_.dropout > 0 && !probs.is_placeholder())
      dropped = dropout(probs, options_.dropout, seed_generator_.next());
    heads_out = matmul(dropped, v);
  }

  const Shape& w = output_kernel.shape();
  const int64_t batch = query.shape()[0], tq = query.shape()[1], hv = w[0] * w[1];
  // [batch, Tq, heads * value_dim] @ [heads * value_dim, out]
  Tensor out = matmul(reshape(transpose(heads_out, {1, 2, 0, 3}), {batch, tq, hv}),
                      reshape(read_weight(output_kernel), {hv, w[2]}));
  if (options_.use_bias) out = out + read_weight(output_bias);
  if (options_.activity_regularizer.active()) add_loss(options_.activity_regularizer(out));
  std::vector<Tensor> result{out};
  if (flags.scores) result.push_back(transpose(probs, {1, 0, 2, 3}));  // [batch, heads, ..]
  return result;
}

std::vector<Tensor> MultiHeadAttentionImpl::attend(const Tensor& query, const Tensor& value,
                                                   const Tensor& key,
                                                   const AttentionCallOptions& call, bool training,
                                                   std::source_location loc) {
  const Flags flags{call.use_causal_mask.value_or(options_.use_causal_mask),
                    call.return_attention_scores.value_or(options_.return_attention_scores)};
  std::vector<Tensor> inputs{query, value};
  if (key.defined() || call.attention_mask.defined()) inputs.push_back(key.defined() ? key : value);
  if (call.attention_mask.defined()) inputs.push_back(call.attention_mask);
  bool placeholder = false;
  for (const Tensor& t : inputs) placeholder = placeholder || (t.defined() && t.is_placeholder());
  if (placeholder) note_origin(detail::user_location(loc));  // where it joined a model
  if (placeholder && (flags.causal != options_.use_causal_mask ||
                      flags.scores != options_.return_attention_scores))
    throw Error(fmt::format(
        "layer \"{}\": attend on symbolic inputs (a functional model) with use_causal_mask={} "
        "and return_attention_scores={}, but the layer's options are {} and {}; a model runs "
        "its layers with their own options: set them in MultiHeadAttentionOptions",
        name(), flags.causal, flags.scores, options_.use_causal_mask,
        options_.return_attention_scores));
  detail::NameScope at(/*name=*/"", &loc);
  struct Reset {
    std::optional<Flags>& flags;
    ~Reset() { flags.reset(); }
  } reset{call_flags_};
  call_flags_ = flags;
  return invoke(inputs, training);
}

std::vector<Tensor> MultiHeadAttentionImpl::compute_mask(const std::vector<Tensor>&,
                                                         const std::vector<Tensor>& masks) {
  return {masks.empty() ? Tensor() : masks[0]};
}

std::vector<Shape> MultiHeadAttentionImpl::compute_output_shape(const std::vector<Shape>& shapes) {
  check_shapes(shapes);
  const Shape& q = shapes[0];
  const Shape& v = shapes.size() > 1 ? shapes[1] : q;
  std::vector<Shape> out{Shape{q[0], q[1], options_.output_shape.value_or(q[2])}};
  if (options_.return_attention_scores) out.push_back(Shape{q[0], num_heads_, q[1], v[1]});
  return out;
}

Json MultiHeadAttentionImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["num_heads"] = num_heads_;
  c["key_dim"] = key_dim_;
  c["value_dim"] = value_dim_;
  c["dropout"] = options_.dropout;
  c["use_bias"] = options_.use_bias;
  c["output_shape"] = options_.output_shape ? Json::array({*options_.output_shape}) : Json(nullptr);
  c["attention_axes"] = nullptr;
  layer_util::weight_config(c, "kernel", options_.kernel_initializer, options_.kernel_regularizer,
                            options_.kernel_constraint);
  layer_util::weight_config(c, "bias", options_.bias_initializer, options_.bias_regularizer,
                            options_.bias_constraint);
  c["activity_regularizer"] = layer_util::regularizer_config(options_.activity_regularizer);
  c["seed"] = options_.seed ? Json(*options_.seed) : Json(nullptr);
  // kiln: Keras' call arguments held as layer options.
  c["use_causal_mask"] = options_.use_causal_mask;
  c["return_attention_scores"] = options_.return_attention_scores;
  return c;
}

Layer multi_head_attention_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "MultiHeadAttention");
  MultiHeadAttentionOptions o;
  common_weights(c, o);
  o.value_dim = c.optional<int64_t>("value_dim");
  o.dropout = c.get<double>("dropout", o.dropout);
  o.use_bias = c.get<bool>("use_bias", o.use_bias);
  if (c.has("output_shape")) o.output_shape = single(c, "output_shape", 0);
  if (c.has("attention_axes"))
    c.fail("attention_axes", "is set; kiln attends over the sequence axis only (use null)");
  o.seed = c.optional<int64_t>("seed");
  o.use_causal_mask = c.get<bool>("use_causal_mask", o.use_causal_mask);
  o.return_attention_scores = c.get<bool>("return_attention_scores", o.return_attention_scores);
  return MultiHeadAttention(c.get<int64_t>("num_heads"), c.get<int64_t>("key_dim"), o);
}

MultiHeadAttention::MultiHeadAttention(int64_t num_heads, int64_t key_dim,
                                       MultiHeadAttentionOptions options)
    : Layer(std::make_shared<MultiHeadAttentionImpl>(num_heads, key_dim, std::move(options))) {}

}  // namespace kiln
