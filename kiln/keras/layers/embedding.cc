#include "kiln/keras/layers/embedding.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/keras/layers/layer_config.h"
#include "kiln/keras/layers/layer_util.h"

namespace kiln {

EmbeddingImpl::EmbeddingImpl(int64_t input_dim, int64_t output_dim, EmbeddingOptions options)
    : LayerImpl("Embedding", options.name),
      input_dim_(input_dim),
      output_dim_(output_dim),
      options_(std::move(options)) {
  use_dtype_option(options_.dtype);
  autocast = false;  // Keras: indices stay as given; the rows are cast to the compute dtype
  if (input_dim <= 0 || output_dim <= 0)
    throw Error(
        fmt::format("layer \"{}\": Both `input_dim` and `output_dim` should be positive, "
                    "Received input_dim = {} and output_dim = {}",
                    name(), input_dim, output_dim));
  activity_regularizer = options_.activity_regularizer;
}

void EmbeddingImpl::build(const Shape&) {
  embeddings =
      add_weight("embeddings", {input_dim_, output_dim_}, options_.embeddings_initializer, true,
                 variable_dtype(), options_.embeddings_regularizer, options_.embeddings_constraint);
}

Tensor EmbeddingImpl::call(const Tensor& indices, bool) {
  Tensor idx = indices;
  if (idx.dtype() == DType::u8) idx = cast(idx, DType::i32);
  if (is_floating(idx.dtype())) {
    // Keras casts float indices (Input(shape=(20,)) is float32) to int32. Concrete values
    // must be whole numbers; traced ones are cast as Keras casts them (toward zero).
    Tensor as_int = cast(idx, DType::i32);
    if (!idx.is_symbolic()) {
      Tensor off = sum(cast(not_equal(cast(as_int, idx.dtype()), idx), DType::f32));
      if (off.item<float>() != 0)
        throw Error(fmt::format(
            "layer \"{}\": Embedding casts float indices to int32, but {} of the {} values "
            "of its {} input of shape {} are not whole numbers (or do not fit in int32); pass "
            "integer indices",
            name(), int64_t(off.item<float>()), idx.size(), dtype_name(idx.dtype()),
            idx.shape().to_string()));
    }
    idx = as_int;
  }
  if (idx.dtype() != DType::i32 && idx.dtype() != DType::i64)
    throw Error(
        fmt::format("layer \"{}\": Embedding expects integer indices (int32 or int64) or "
                    "float indices holding whole numbers, but received a {} input of shape {}; "
                    "cast the indices first, e.g. kiln::cast(x, kiln::DType::i32)",
                    name(), dtype_name(idx.dtype()), idx.shape().to_string()));
  // Keras: the table is read in its own dtype (no autocast) and the rows cast to the compute
  // dtype.
  Tensor rows = gather(embeddings.read(), idx, 0);
  return rows.dtype() == compute_dtype() || !is_floating(compute_dtype())
             ? rows
             : cast(rows, compute_dtype());
}

std::vector<Shape> EmbeddingImpl::compute_output_shape(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1 || input_shapes[0].rank() >= kMaxRank)
    throw Error(
        fmt::format("layer \"{}\": compute_output_shape expects one input shape of rank "
                    "< {}",
                    name(), kMaxRank));
  Shape out = input_shapes[0];
  out.push_back(output_dim_);
  return {out};
}

std::vector<Tensor> EmbeddingImpl::compute_mask(const std::vector<Tensor>& inputs,
                                                const std::vector<Tensor>&) {
  if (!options_.mask_zero) return {};
  return {not_equal(inputs[0], scalar(0, inputs[0].dtype()))};
}

Json EmbeddingImpl::get_config() const {
  Json c = layer_util::base_config(*this);
  c["input_dim"] = input_dim_;
  c["output_dim"] = output_dim_;
  layer_util::weight_config(c, "embeddings", options_.embeddings_initializer,
                            options_.embeddings_regularizer, options_.embeddings_constraint);
  c["mask_zero"] = options_.mask_zero;
  return c;
}

Layer embedding_from_config(const Json& config) {
  using namespace layer_config;
  ConfigReader c(config, "Embedding");
  EmbeddingOptions o;
  o.name = c.name();
  o.dtype = policy_entry(c);
  o.embeddings_initializer =
      initializer_entry(c, "embeddings_initializer", o.embeddings_initializer);
  o.embeddings_regularizer = regularizer_entry(c, "embeddings_regularizer");
  o.embeddings_constraint = constraint_entry(c, "embeddings_constraint");
  o.activity_regularizer = regularizer_entry(c, "activity_regularizer");
  o.mask_zero = c.get<bool>("mask_zero", o.mask_zero);
  return Embedding(c.get<int64_t>("input_dim"), c.get<int64_t>("output_dim"), o);
}

Embedding::Embedding(int64_t input_dim, int64_t output_dim, EmbeddingOptions options)
    : Layer(std::make_shared<EmbeddingImpl>(input_dim, output_dim, std::move(options))) {}

}  // namespace kiln
