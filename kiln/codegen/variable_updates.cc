#include "kiln/codegen/variable_updates.h"

#include "kiln/ir/operand_prologue.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeKind;
using ir::Value;

VariableUpdates::VariableUpdates(const ir::Graph& g) : g_(g) {
  std::unordered_map<int, int> assignments;
  for (size_t p = 0; p < g.nodes().size(); ++p) {
    const Node& n = *g.nodes()[p];
    position_[&n] = p;
    for (const Value* v : n.inputs()) last_reader_[v] = p;
    if (n.kind() == NodeKind::kAssign || n.kind() == NodeKind::kAssignAdd ||
        n.kind() == NodeKind::kAssignSub)
      ++assignments[n.variable()];
  }
  for (const Value* v : g.outputs()) last_reader_[v] = g.nodes().size();
  for (const auto& up : g.nodes())
    if (up->kind() == NodeKind::kAssign && assignments[up->variable()] == 1)
      assigned_to_[up->input(0)] = up->variable();
}

std::vector<std::pair<size_t, size_t>> VariableUpdates::pairs(const Node& n,
                                                              const Node* contraction) const {
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t o = 0; o < n.num_outputs(); ++o) {
    auto it = assigned_to_.find(n.output(o));
    if (it == assigned_to_.end()) continue;
    const Value* entry = g_.variables()[size_t(it->second)].entry;
    if (entry == nullptr) continue;
    auto last = last_reader_.find(entry);
    if ((last == last_reader_.end() ? 0 : last->second) != position_.at(&n)) continue;
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      if (n.input(i) != entry) continue;
      bool read_by_contraction = false;
      if (contraction != nullptr)
        for (const Value* cv : contraction->inputs()) {
          if (const Value* source = ir::prologue_source(*contraction, cv)) cv = source;
          read_by_contraction |= cv->def() == Value::Def::kParameter && size_t(cv->index()) == i;
        }
      if (!read_by_contraction) pairs.emplace_back(o, i);
      break;
    }
  }
  return pairs;
}

}  // namespace kiln::codegen
