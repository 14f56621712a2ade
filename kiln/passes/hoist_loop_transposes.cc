#include "kiln/passes/hoist_loop_transposes.h"

#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {
namespace {

// One matmul operand of a while body to rewrite: body node `node`, operand 0 or 1, reading
// body parameter `param` (a capture) transposed.
struct Use {
  size_t node;
  size_t operand;
  size_t param;
};

// The perm swapping the last two axes of a rank-`rank` tensor.
std::vector<int64_t> swap_last_two(size_t rank) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 2], perm[rank - 1]);
  return perm;
}

std::vector<Use> transposed_capture_uses(const ir::Graph& body, size_t loop_vars) {
  std::map<const ir::Value*, size_t> param_index;
  for (size_t p = loop_vars; p < body.parameters().size(); ++p) param_index[body.parameter(p)] = p;
  std::vector<Use> uses;
  for (size_t i = 0; i < body.nodes().size(); ++i) {
    const ir::Node& n = *body.nodes()[i];
    if (!n.is_op(OpKind::MatMul)) continue;
    for (size_t operand = 0; operand < 2; ++operand) {
      const char* flag = operand == 0 ? "transpose_a" : "transpose_b";
      if (!n.attrs().get_bool(flag, "matmul")) continue;
      auto it = param_index.find(n.input(operand));
      if (it == param_index.end() || n.input(operand)->shape().rank() < 2) continue;
      uses.push_back({i, operand, it->second});
    }
  }
  return uses;
}

class HoistLoopTransposes final : public Pass {
 public:
  std::string_view name() const override { return "hoist-loop-transposes"; }

  bool run(ir::Graph& g) override {
    bool changed = false;
    for (const auto& node : g.nodes())
      for (const auto& sub : node->subgraphs()) changed = run(*sub) || changed;
    // Snapshot: hoisting replaces while nodes.
    std::vector<ir::Node*> whiles;
    for (const auto& node : g.nodes())
      if (node->kind() == ir::NodeKind::kWhile) whiles.push_back(node.get());
    for (ir::Node* w : whiles) changed = hoist(g, *w, statistics()) || changed;
    return changed;
  }

 private:
  static bool hoist(ir::Graph& g, ir::Node& w, PassStatistics& stats) {
    std::vector<Use> uses = transposed_capture_uses(w.subgraph(1), w.while_loop_variables());
    if (uses.empty()) return false;

    // One transpose before the loop per hoisted capture.
    std::vector<ir::Value*> inputs = w.inputs();
    std::map<size_t, size_t> new_param;  // body parameter -> the new parameter's index
    std::vector<ir::Node*> added;
    for (const Use& u : uses) {
      if (new_param.count(u.param)) continue;
      ir::Value* outer = w.input(u.param);
      ir::Node* t = g.add_op(OpKind::Transpose, {outer},
                             Attrs{{"perm", swap_last_two(outer->shape().rank())}});
      t->set_name(w.name().empty() ? "hoisted_transpose" : w.name() + "/hoisted_transpose");
      t->set_location(w.location());
      added.push_back(t);
      new_param[u.param] = inputs.size();
      inputs.push_back(t->output());
    }

    // The same loop with the new captures: both sub-graphs get the parameters.
    std::vector<std::unique_ptr<ir::Graph>> subs;
    for (const auto& sub : w.subgraphs()) {
      std::unique_ptr<ir::Graph> copy = sub->clone();
      for (size_t i = w.inputs().size(); i < inputs.size(); ++i)
        copy->add_parameter(inputs[i]->type());
      subs.push_back(std::move(copy));
    }
    ir::Graph& body = *subs[1];
    for (const Use& u : uses) {
      ir::Node& mm = *body.nodes()[u.node];
      mm.set_input(u.operand, body.parameter(new_param.at(u.param)));
      mm.mutable_attrs().set(u.operand == 0 ? "transpose_a" : "transpose_b", false);
    }
    std::vector<TensorType> types;
    for (size_t i = 0; i < w.num_outputs(); ++i) types.push_back(w.output(i)->type());
    ir::Node* loop = g.add_control_flow(ir::NodeKind::kWhile, inputs, std::move(subs), types);
    loop->mutable_attrs() = w.attrs();
    loop->set_name(w.name());
    loop->set_location(w.location());

    for (ir::Node* t : added) g.move_before(t, &w);
    g.move_before(loop, &w);
    for (size_t i = 0; i < w.num_outputs(); ++i) g.replace_all_uses(w.output(i), loop->output(i));
    const ir::Node* old = &w;
    g.erase_nodes_if([old](const ir::Node& n) { return &n == old; });
    stats.add("loops rewritten");
    stats.add("transposes hoisted", int64_t(added.size()));
    stats.add("matmuls reading a hoisted transpose", int64_t(uses.size()));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_hoist_loop_transposes() {
  return std::make_unique<HoistLoopTransposes>();
}

}  // namespace kiln::passes
