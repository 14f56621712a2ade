// Gradient rules: one per differentiable op, written with kiln ops (never raw loops) so that
// a tape records them too (higher-order gradients) and a trace can record them unchanged.
#pragma once

#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/ir/op_table.h"

namespace kiln::detail {

// What a rule sees of one recorded op call.
struct GradContext {
  OpKind kind;
  const Attrs& attrs;
  const std::vector<Tensor>& inputs;
  const Tensor& output;
  const Tensor& grad;              // d(target)/d(output)
  const std::vector<bool>& needs;  // needs[i]: input i wants a gradient

  bool needs_grad(size_t i) const { return needs[i]; }
};

// Returns one entry per input: its gradient (same shape and dtype as the input) or an
// undefined Tensor when the input needs none.
using GradRule = std::vector<Tensor> (*)(const GradContext& ctx);

// The rule of `kind`, or nullptr when the op has no rule.
GradRule gradient_rule(OpKind kind);

// Sums `g` over the axes that broadcasting added or stretched, giving a tensor of `shape`.
Tensor unbroadcast(const Tensor& g, const Shape& shape);

using GradTable = std::vector<GradRule>;
void register_elementwise_gradients(GradTable& t);
void register_reduce_gradients(GradTable& t);
void register_shape_gradients(GradTable& t);
void register_nn_gradients(GradTable& t);
void register_attention_gradients(GradTable& t);

}  // namespace kiln::detail
