#include "kiln/passes/lower_assignments.h"

#include <unordered_set>
#include <vector>

#include "kiln/ir/graph_rewrite.h"

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

bool lower(Graph& g, PassStatistics& stats) {
  // The values read anywhere (node inputs, graph outputs): redirecting an unread value is
  // no change.
  std::unordered_set<const Value*> read(g.outputs().begin(), g.outputs().end());
  for (const auto& n : g.nodes()) read.insert(n->inputs().begin(), n->inputs().end());
  // The variable's newest value: its entry value, then the value last stored into it.
  std::vector<Value*> current(g.variables().size());
  for (size_t i = 0; i < current.size(); ++i) current[i] = g.variable(i).entry;
  ir::GraphRewrite rewrite(g);  // lowering appends nodes; visit only the original ones
  for (Node* n : rewrite.original_nodes()) {
    rewrite.visit(*n);
    if (!n->is_assignment()) continue;
    auto v = size_t(n->variable());
    if (n->kind() == NodeKind::kAssign) {
      // Readers of the assignment's result read the stored value itself, unless that is a
      // variable's value (which a later store may supersede while the result lives on).
      if (is_variable_value(n->input(0))) {
        current[v] = n->output(0);
      } else {
        if (read.contains(n->output(0))) {
          rewrite.replace(n->output(0), n->input(0));
          stats.add("assign results read from the stored value");
        }
        current[v] = n->input(0);
      }
    } else {
      OpKind op = n->kind() == NodeKind::kAssignAdd ? OpKind::Add : OpKind::Sub;
      Node* value = g.add_op(op, {current[v], n->input(0)});
      value->set_name(n->name());
      value->set_location(n->location());
      rewrite.insert_before(value, n);
      Node* store = g.add_assignment(NodeKind::kAssign, n->variable(), value->output(0));
      store->set_name(n->name());
      store->set_location(n->location());
      rewrite.insert_before(store, n);
      rewrite.replace(n->output(0), value->output(0));
      rewrite.erase(n);
      current[v] = value->output(0);
      stats.add(op == OpKind::Add ? "assign_add lowered" : "assign_sub lowered");
    }
  }
  return rewrite.finish();
}

class LowerAssignments final : public Pass {
 public:
  std::string_view name() const override { return "lower-assignments"; }
  bool run(Graph& g) override { return lower(g, statistics()); }
};

}  // namespace

std::unique_ptr<Pass> make_lower_assignments() { return std::make_unique<LowerAssignments>(); }

}  // namespace kiln::passes
