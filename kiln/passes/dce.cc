#include "kiln/passes/dce.h"

#include <unordered_set>

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

bool has_side_effects(const Graph& g);

// True when removing `n` could change what the program does, whether or not it is used.
bool must_keep(const Node& n) {
  if (n.side_effecting()) return true;
  if (n.kind() == ir::NodeKind::kOp && op_info(n.op()).has(kSideEffecting)) return true;
  for (const auto& sub : n.subgraphs())
    if (has_side_effects(*sub)) return true;
  return false;
}

bool has_side_effects(const Graph& g) {
  for (const auto& n : g.nodes())
    if (must_keep(*n)) return true;
  return false;
}

// Removes the dead nodes of `g` and of its live nodes' sub-graphs; returns whether any went.
bool eliminate_dead_nodes(Graph& g, PassStatistics& stats) {
  std::unordered_set<const Value*> live(g.outputs().begin(), g.outputs().end());
  std::unordered_set<const Node*> dead;
  bool changed = false;
  // Program order is a topological order, so one backward sweep settles liveness.
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    Node& n = **it;
    bool needed = must_keep(n);
    for (size_t i = 0; i < n.num_outputs() && !needed; ++i) needed = live.contains(n.output(i));
    if (!needed) {
      dead.insert(&n);
      continue;
    }
    live.insert(n.inputs().begin(), n.inputs().end());
    for (const auto& sub : n.subgraphs()) changed |= eliminate_dead_nodes(*sub, stats);
  }
  if (!dead.empty()) {
    stats.add("nodes removed", int64_t(dead.size()));
    g.erase_nodes_if([&](const Node& n) { return dead.contains(&n); });
    changed = true;
  }
  return changed;
}

class Dce final : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  bool run(Graph& g) override { return eliminate_dead_nodes(g, statistics()); }
};

}  // namespace

std::unique_ptr<Pass> make_dce() { return std::make_unique<Dce>(); }

}  // namespace kiln::passes
