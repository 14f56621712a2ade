#include "kiln/frontend/function/keep_old_values.h"

#include <unordered_map>

namespace kiln::detail {

int keep_old_variable_values(ir::Graph& graph) {
  std::vector<ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  std::unordered_map<int, ir::Value*> current;
  for (size_t v = 0; v < graph.variables().size(); ++v) current[int(v)] = graph.variable(v).entry;
  int copies = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    ir::Node* assignment = order[i];
    if (!assignment->is_assignment()) continue;
    ir::Value* old = current[assignment->variable()];
    current[assignment->variable()] = assignment->output();
    bool used_later = false;
    for (size_t j = i + 1; j < order.size() && !used_later; ++j)
      for (ir::Value* in : order[j]->inputs()) used_later = used_later || in == old;
    for (ir::Value* out : graph.outputs()) used_later = used_later || out == old;
    if (!used_later) continue;
    ir::Node* copy = graph.add_op(OpKind::Copy, {old});
    copy->set_name(assignment->name().empty() ? "keep_old_value" : assignment->name() + "/old");
    copy->set_location(assignment->location());
    graph.move_before(copy, assignment);
    for (size_t j = i + 1; j < order.size(); ++j)
      for (size_t k = 0; k < order[j]->inputs().size(); ++k)
        if (order[j]->input(k) == old) order[j]->set_input(k, copy->output());
    std::vector<ir::Value*> outputs = graph.outputs();
    for (ir::Value*& out : outputs)
      if (out == old) out = copy->output();
    graph.set_outputs(outputs);
    ++copies;
  }
  return copies;
}

}  // namespace kiln::detail
