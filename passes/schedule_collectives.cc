#include "kiln/passes/schedule_collectives.h"

#include <unordered_map>
#include <vector>

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;

class ScheduleCollectives : public Pass {
 public:
  std::string_view name() const override { return "schedule-collectives"; }

  bool run(Graph& g) override {
    // The node each all_reduce should follow (nullptr: the start of the graph), in program
    // order.
    std::unordered_map<const ir::Value*, const Node*> defined_by;
    std::vector<std::pair<const Node*, const Node*>> moves;  // (all_reduce, after)
    const Node* previous = nullptr;
    for (const auto& p : g.nodes()) {
      const Node& n = *p;
      if (n.is_op(OpKind::AllReduce)) {
        auto it = defined_by.find(n.input(0));
        const Node* after = it == defined_by.end() ? nullptr : it->second;
        if (after != previous) moves.emplace_back(&n, after);
      }
      for (size_t i = 0; i < n.num_outputs(); ++i) defined_by[n.output(i)] = &n;
      previous = &n;
    }
    bool changed = false;
    for (const auto& [reduce, after] : moves) {
      // The node now right after `after` (the first node for nullptr); all_reduce nodes
      // already placed there stay ahead of this one.
      const auto& nodes = g.nodes();
      size_t pos = 0;
      if (after)
        while (nodes[pos].get() != after) ++pos;
      if (after) ++pos;
      while (pos < nodes.size() && nodes[pos]->is_op(OpKind::AllReduce) &&
             nodes[pos].get() != reduce)
        ++pos;
      if (nodes[pos].get() == reduce) continue;
      g.move_before(reduce, nodes[pos].get());
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_schedule_collectives() {
  return std::make_unique<ScheduleCollectives>();
}

}  // namespace kiln::passes
