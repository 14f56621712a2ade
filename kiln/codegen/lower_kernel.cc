#include "kiln/codegen/lower_kernel.h"

#include <fmt/format.h>

#include "kiln/codegen/decompose.h"
#include "kiln/codegen/kernel_emitter.h"
#include "kiln/codegen/kernel_plan.h"
#include "kiln/codegen/overwrites.h"
#include "kiln/codegen/row_passes.h"
#include "kiln/codegen/target_machine.h"
#include "kiln/ir/error.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeKind;

bool can_lower(const Node& n) { return n.kind() == NodeKind::kOp && op_info(n.op()).generated(); }

bool runs_in_library(const Node& n) {
  if (n.is_op(OpKind::Concat)) return true;
  if (!n.is_op(OpKind::Transpose)) return false;
  const auto& perm = n.attrs().get_ints("perm", "transpose");
  return !perm.empty() && perm.back() != int64_t(perm.size()) - 1;
}

LoweredKernel lower_kernel(const ir::Graph& body, const std::string& symbol,
                           const ir::Node* as_parameter,
                           const std::vector<std::pair<size_t, size_t>>& overwrites) {
  std::unique_ptr<ir::Graph> g = decompose_for_codegen(body, as_parameter);
  for (const auto& n : g->nodes())
    if (n->kind() == NodeKind::kOp && !can_lower(*n))
      throw Error(fmt::format("codegen: kernel {} holds op {}, which has no code generator rule",
                              symbol, n->op_name()));
  KernelPlan plan = plan_kernel(*g);
  LoweredKernel out;
  runtime::KernelLayout& l = out.layout;
  l.overwrites = honoured_overwrites(*g, plan, overwrites);
  out.module = new_kernel_module(symbol, symbol);
  RowPlan rows;
  if (plan.mode == IterationMode::kRows) rows = plan_row_passes(*g, plan, l.overwrites);
  KernelEmitter(*g, plan, rows, l.overwrites, out.module).emit();
  l.symbol = symbol;
  l.num_inputs = g->parameters().size();
  l.num_outputs = g->outputs().size();
  l.temporaries.resize(plan.temporaries.size() + plan.accumulators.size());
  for (const auto& [v, t] : plan.temporaries) l.temporaries[size_t(t)] = v->type();
  for (const auto& [v, t] : plan.accumulators)
    l.temporaries[size_t(t)] = TensorType{DType::f32, v->shape()};
  l.iteration = plan.mode == IterationMode::kFlat   ? "flat"
                : plan.mode == IterationMode::kRows ? "rows"
                                                    : "serial";
  l.extent = plan.extent;
  l.row_elements = plan.row_elements;
  l.inputs_by_row = plan.inputs_by_row;
  return out;
}

}  // namespace kiln::codegen
