// Helpers shared by the built-in layers (not part of the user API): Keras-style config values
// for initializers and regularizers, argument checks with Keras' wording, and the input cast
// every weighted layer applies (Keras' autocast to the layer's dtype).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer.h"

namespace kiln::layer_util {

// An initializer in a config: its Keras name ("glorot_uniform"), or Keras' serialized form
// {"class_name": "RandomNormal", "config": {"stddev": 0.5, "seed": 3}} when it was made with
// arguments other than Keras' defaults or a seed (read back by layer_config's initializer_entry);
// null when undefined.
inline Json initializer_config(const Initializer& init) {
  if (!init.defined()) return nullptr;
  if (init.args().empty() && !init.seed()) return init.name();
  Json config = Json::object();
  for (const auto& [name, value] : init.args()) config[name] = value;
  config["seed"] = init.seed() ? Json(*init.seed()) : Json(nullptr);
  return Json{{"class_name", init.class_name()}, {"config", config}};
}

// A regularizer in a config: null when inactive, else Keras' L1 / L2 / L1L2 form.
inline Json regularizer_config(const Regularizer& r) {
  if (!r.active()) return nullptr;
  if (r.l2 == 0) return Json{{"class_name", "L1"}, {"config", {{"l1", r.l1}}}};
  if (r.l1 == 0) return Json{{"class_name", "L2"}, {"config", {{"l2", r.l2}}}};
  return Json{{"class_name", "L1L2"}, {"config", {{"l1", r.l1}, {"l2", r.l2}}}};
}

// A weight's entries in a config: "<weight>_initializer", "<weight>_regularizer" and
// "<weight>_constraint" (Keras' serialized constraint, or null).
inline void weight_config(Json& c, const std::string& weight, const Initializer& init,
                          const Regularizer& regularizer, const Constraint& constraint) {
  c[weight + "_initializer"] = initializer_config(init);
  c[weight + "_regularizer"] = regularizer_config(regularizer);
  c[weight + "_constraint"] = constraint.config();
}

// Keras' data_format argument: "channels_last" or "channels_first" (any case); true for
// channels-first. kiln::Error naming the layer otherwise.
inline bool channels_first_arg(const std::string& layer, const std::string& data_format) {
  std::string f = data_format;
  for (char& ch : f) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (f != "channels_last" && f != "channels_first")
    throw Error(
        fmt::format("layer \"{}\": invalid data_format \"{}\"; expected \"channels_last\" or "
                    "\"channels_first\"",
                    layer, data_format));
  return f == "channels_first";
}

// [batch, channels, d1, ..., dn] -> [batch, d1, ..., dn, channels] (to_last) and back, with the
// transpose op (traced like any op).
inline Tensor to_channels_last(const Tensor& x) {
  Axes perm{0};
  for (int d = 2; d < x.rank(); ++d) perm.push_back(d);
  perm.push_back(1);
  return transpose(x, perm);
}
inline Tensor to_channels_first(const Tensor& x) {
  Axes perm{0, x.rank() - 1};
  for (int d = 1; d < x.rank() - 1; ++d) perm.push_back(d);
  return transpose(x, perm);
}
// The same permutations of a shape.
inline Shape shape_to_channels_last(const Shape& s) {
  std::vector<int64_t> d{s[0]};
  for (int i = 2; i < s.rank(); ++i) d.push_back(s[i]);
  d.push_back(s[1]);
  return Shape(d);
}
inline Shape shape_to_channels_first(const Shape& s) {
  std::vector<int64_t> d{s[0], s[s.rank() - 1]};
  for (int i = 1; i < s.rank() - 1; ++i) d.push_back(s[i]);
  return Shape(d);
}

// The channel count (last axis) of a convolution's input shape; kiln::Error when unknown.
inline int64_t known_channels(const std::string& layer, const Shape& input_shape) {
  int64_t channels = input_shape.dim(-1);
  if (channels == kUnknownDim)
    throw Error(
        fmt::format("layer \"{}\": the channel dimension (last axis) of the inputs should "
                    "be defined. Found None. Full input shape received: {}",
                    layer, input_shape.to_string()));
  return channels;
}

// Keras' base config plus the dtype policy as Keras 3 serializes it: {"name", "trainable",
// "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name"}, ...}}.
inline Json base_config(const LayerImpl& layer) {
  Json c = layer.LayerImpl::get_config();
  c["dtype"] = layer.dtype_policy().serialize();
  if (layer.activity_regularizer.active())
    c["activity_regularizer"] = regularizer_config(layer.activity_regularizer);
  return c;
}

// "valid" / "same" (any case; also "causal" when allowed) -> lowercase; anything else throws
// naming the layer.
inline std::string padding_arg(const std::string& layer, const std::string& padding,
                               bool allow_causal = false) {
  std::string p = padding;
  for (char& c : p) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (p != "valid" && p != "same" && !(allow_causal && p == "causal"))
    throw Error(
        fmt::format("layer \"{}\": invalid padding \"{}\"; expected {}", layer, padding,
                    allow_causal ? "\"valid\", \"same\" or \"causal\"" : "\"valid\" or \"same\""));
  return p;
}

// A positive integer argument such as Conv1D's kernel_size.
inline int64_t positive_arg(const std::string& layer, const char* arg, int64_t value) {
  if (value <= 0)
    throw Error(
        fmt::format("layer \"{}\": The `{}` argument must be a positive integer. Received: {}={}",
                    layer, arg, arg, value));
  return value;
}

// A (height, width) argument such as kernel_size: two positive integers.
inline Axes pair_arg(const std::string& layer, const char* arg, const Axes& value) {
  bool ok = value.size() == 2 && value[0] > 0 && value[1] > 0;
  if (!ok)
    throw Error(
        fmt::format("layer \"{}\": The `{}` argument must be a tuple of 2 positive "
                    "integers. Received: {}=({})",
                    layer, arg, arg, fmt::join(value, ", ")));
  return value;
}

// The layer's input in `dtype` (the compute dtype: LayerImpl::invoke already autocasts; this
// covers inputs that reach call another way, such as a cell's inputs inside an RNN loop).
inline Tensor cast_input(const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x : cast(x, dtype);
}

// A mask for the first two axes of x ([batch, timesteps] for x [batch, timesteps, ...]) as
// bool (numeric masks: nonzero is kept, as Keras casts them). Throws naming the layer when
// its shape does not match.
inline Tensor sequence_mask(const std::string& layer, const Tensor& x, const Tensor& mask) {
  bool ok = mask.rank() == 2 && x.rank() >= 2;
  for (int d = 0; ok && d < 2; ++d)
    ok = mask.shape()[d] == x.shape()[d] || mask.shape()[d] == kUnknownDim ||
         x.shape()[d] == kUnknownDim;
  if (!ok)
    throw Error(fmt::format(
        "layer \"{}\": the mask must have shape [batch, timesteps] matching the input's first "
        "two axes; got a mask of shape {} for an input of shape {}",
        layer, mask.shape().to_string(), x.shape().to_string()));
  if (mask.dtype() == DType::b8) return mask;
  return not_equal(mask, scalar(0, mask.dtype()));
}

// The 1-D layers view their input through reshapes (adding or dropping a unit axis), which can
// infer only one unknown dimension: throws naming the layer when a traced input has more.
inline void require_one_unknown_dim(const LayerImpl& layer, const Tensor& x) {
  int unknown = 0;
  for (int64_t d : x.shape()) unknown += d == kUnknownDim ? 1 : 0;
  if (unknown > 1 && x.is_traced())
    throw Error(fmt::format(
        "layer \"{}\": {} cannot run on a traced input of shape {} with more than one unknown "
        "dimension (it views the input through a reshape, which infers only one); trace with "
        "the timesteps known (an input_signature with a fixed timesteps dimension)",
        layer.name(), layer.class_name(), x.shape().to_string()));
}

}  // namespace kiln::layer_util
