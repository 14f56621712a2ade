#include "passes/lower_assignments.h"

#include <unordered_set>
#include <vector>

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

// An entry value or an assignment's result: a version of some variable.
bool is_variable_value(const Value* v) {
  return v->def() == Value::Def::kVariableEntry ||
         (v->producer() != nullptr && v->producer()->is_assignment());
}

// Replaces every use of `from` by `to`; returns whether there was one.
bool redirect(Graph& g, Value* from, Value* to) {
  bool used = false;
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs()) used = used || in == from;
  for (const Value* out : g.outputs()) used = used || out == from;
  if (used) g.replace_all_uses(from, to);
  return used;
}

bool lower(Graph& g) {
  bool changed = false;
  // The variable's newest value: its entry value, then the value last stored into it.
  std::vector<Value*> current(g.variables().size());
  for (size_t i = 0; i < current.size(); ++i) current[i] = g.variable(i).entry;
  std::vector<Node*> order;  // lowering appends nodes; visit only the original ones
  for (const auto& n : g.nodes()) order.push_back(n.get());
  std::unordered_set<const Node*> lowered;
  for (Node* n : order) {
    if (!n->is_assignment()) continue;
    auto v = size_t(n->variable());
    if (n->kind() == NodeKind::kAssign) {
      // Readers of the assignment's result read the stored value itself, unless that is a
      // variable's value (which a later store may supersede while the result lives on).
      if (is_variable_value(n->input(0))) {
        current[v] = n->output(0);
      } else {
        changed |= redirect(g, n->output(0), n->input(0));
        current[v] = n->input(0);
      }
    } else {
      OpKind op = n->kind() == NodeKind::kAssignAdd ? OpKind::Add : OpKind::Sub;
      Node* value = g.add_op(op, {current[v], n->input(0)});
      value->set_name(n->name());
      value->set_location(n->location());
      g.move_before(value, n);
      Node* store = g.add_assignment(NodeKind::kAssign, n->variable(), value->output(0));
      store->set_name(n->name());
      store->set_location(n->location());
      g.move_before(store, n);
      g.replace_all_uses(n->output(0), value->output(0));
      lowered.insert(n);
      current[v] = value->output(0);
    }
  }
  if (lowered.empty()) return changed;
  g.erase_nodes_if([&](const Node& n) { return lowered.contains(&n); });
  return true;
}

class LowerAssignments final : public Pass {
 public:
  std::string_view name() const override { return "lower-assignments"; }
  bool run(Graph& g) override { return lower(g); }
};

}  // namespace

std::unique_ptr<Pass> make_lower_assignments() { return std::make_unique<LowerAssignments>(); }

}  // namespace kiln::passes
