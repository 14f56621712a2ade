// Internal to keras/saving/: Keras 3's serialized configs (config.json of a .keras file) and
// the configs kiln's factories read, both ways. The layer configs themselves are the same
// (kiln's get_config is Keras' form and layer_from_config refuses what it does not honour);
// what differs, and what kiln refuses here, is around them:
//   - every object carries "module" and "registered_name": an object whose module is not Keras'
//     is a custom object, and is a kiln::Error unless custom_objects or the registry has a
//     factory for it (by registered name or class name);
//   - a functional model's single input or output may be written as one [name, node, tensor];
//   - a node's "kwargs" that are not null (a mask or training flag given to the call) are
//     refused: kiln replays nodes with their tensors only;
//   - MultiHeadAttention's "attention_axes": [1] (the sequence axis, what kiln attends over) and
//     "use_gate": false are Keras' values for what kiln computes;
//   - the compile config: optimizer settings (use_ema, loss_scale_factor,
//     gradient_accumulation_steps, weight_decay outside AdamW), losses as Keras objects
//     ({"class_name": "SparseCategoricalCrossentropy", "config": {...}}: reduction, label_smoothing
//     and axis at their defaults only), metrics as names or argument-free objects,
//     steps_per_execution 1.
// Errors name the entry ("config.json: layers[2] ...", "compile_config.optimizer.use_ema ...").
#pragma once

#include "kiln/keras/saving/serialization.h"

namespace kiln::saving_detail {

// {"class_name", "config", ...} of Keras -> of kiln (layer_from_config's input).
Json kiln_layer_spec_from_keras(const Json& spec, const CustomObjects& custom_objects);
// Keras' compile_config -> kiln's (compile_options_from_config's input).
Json kiln_compile_config_from_keras(const Json& compile_config);
// kiln's serialize_layer(model) -> Keras' form ("module", "registered_name" on every layer).
Json keras_layer_spec_from_kiln(const Json& spec);
// kiln's compile_config -> Keras' (optimizer and losses as Keras objects).
Json keras_compile_config_from_kiln(const Json& compile_config);

}  // namespace kiln::saving_detail
