#include "kiln/passes/schedule_collectives.h"

#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;

class ScheduleCollectives : public Pass {
 public:
  std::string_view name() const override { return "schedule-collectives"; }

  bool run(Graph& g) override {
    // The all_reduce nodes in their program order (kept: it is the order every rank traced
    // them in), each emitted as soon as its input and the all_reduce before it are.
    std::deque<const Node*> queue;
    for (const auto& p : g.nodes())
      if (p->is_op(OpKind::AllReduce)) queue.push_back(p.get());
    if (queue.empty()) return false;
    std::unordered_set<const ir::Value*> defined;
    std::vector<const Node*> order;
    auto emit_ready = [&] {
      while (!queue.empty()) {
        const ir::Value* in = queue.front()->input(0);
        if (in->def() == ir::Value::Def::kNodeOutput && !defined.contains(in)) return;
        order.push_back(queue.front());
        for (size_t i = 0; i < queue.front()->num_outputs(); ++i)
          defined.insert(queue.front()->output(i));
        queue.pop_front();
      }
    };
    emit_ready();
    for (const auto& p : g.nodes()) {
      if (p->is_op(OpKind::AllReduce)) continue;
      order.push_back(p.get());
      for (size_t i = 0; i < p->num_outputs(); ++i) defined.insert(p->output(i));
      emit_ready();
    }
    // (Every all_reduce's input is defined before it in program order, so none is left.)
    std::unordered_map<const Node*, size_t> old_position;
    for (size_t i = 0; i < g.nodes().size(); ++i) old_position[g.nodes()[i].get()] = i;
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i]->is_op(OpKind::AllReduce) && i < old_position.at(order[i]))
        statistics().add("all_reduce nodes moved earlier");
    bool changed = false;
    for (size_t i = 0; i < order.size(); ++i) {
      const Node* at = g.nodes()[i].get();
      if (at == order[i]) continue;
      g.move_before(order[i], at);
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
