#include "kiln/passes/refine_shapes.h"

#include <fmt/format.h>

#include "kiln/ir/graph_rewrite.h"
#include "kiln/ir/value_numbering.h"

namespace kiln::passes {
namespace {

// `refined` agrees with `declared` and knows at least as much; true when it knows more.
bool refines(const TensorType& declared, const TensorType& refined) {
  if (declared.dtype != refined.dtype || declared.shape.rank() != refined.shape.rank())
    return false;
  bool more = false;
  for (int d = 0; d < declared.shape.rank(); ++d) {
    if (declared.shape[d] == kUnknownDim) {
      more = more || refined.shape[d] != kUnknownDim;
    } else if (declared.shape[d] != refined.shape[d]) {
      return false;
    }
  }
  return more;
}

class RefineShapes final : public Pass {
 public:
  std::string_view name() const override { return "refine-shapes"; }

  bool run(ir::Graph& g) override {
    bool changed = false;
    ir::GraphRewrite rewrite(g);
    for (ir::Node* n : rewrite.original_nodes()) {
      rewrite.visit(*n);
      if (n->kind() != ir::NodeKind::kOp) continue;
      std::vector<TensorType> in;
      for (const ir::Value* v : n->inputs()) in.push_back(v->type());
      TensorType inferred = infer_type(n->op(), in, n->attrs());
      const TensorType& declared = n->output()->type();
      if (refines(declared, inferred)) {
        n->output()->set_type(inferred);
        statistics().add("types refined");
        changed = true;
      } else if (!(inferred == declared) && !refines(inferred, declared)) {
        ir::ValueNumbering numbering(g);
        throw Error(fmt::format("refine-shapes: node {} is declared {} but its inputs give {}",
                                ir::describe_node(*n, numbering), declared.to_string(),
                                inferred.to_string()));
      }
      if (n->is_op(OpKind::BroadcastLike) && n->output()->shape().is_fully_known()) {
        ir::Node* b = g.add_op(OpKind::BroadcastTo, {n->input(0)},
                               Attrs{{"shape", n->output()->shape().to_vector()}});
        b->set_name(n->name());
        b->set_location(n->location());
        rewrite.insert_before(b, n);
        rewrite.replace(n->output(), b->output());
        statistics().add("broadcast_like -> broadcast_to");
      }
    }
    return rewrite.finish() ||
           changed;  // replaced broadcast_like nodes have no uses left: dce removes them
  }
};

}  // namespace

std::unique_ptr<Pass> make_refine_shapes() { return std::make_unique<RefineShapes>(); }

bool specialize_parameters(ir::Graph& g, const std::vector<TensorType>& types) {
  if (types.size() != g.parameters().size())
    throw Error(fmt::format("specialize_parameters: graph @{} has {} parameters, got {} types",
                            g.name(), g.parameters().size(), types.size()));
  bool changed = false;
  for (size_t i = 0; i < types.size(); ++i) {
    const TensorType& declared = g.parameter(i)->type();
    if (types[i] == declared) continue;
    if (!refines(declared, types[i]))
      throw Error(fmt::format(
          "specialize_parameters: parameter %{} of graph @{} is {}; {} does not conform", i,
          g.name(), declared.to_string(), types[i].to_string()));
    g.parameter(i)->set_type(types[i]);
    changed = true;
  }
  return make_refine_shapes()->run(g) || changed;
}

}  // namespace kiln::passes
