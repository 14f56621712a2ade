// Graph::clone: a deep copy built through the graph's own builders (no text round trip).
#include <unordered_map>

#include "kiln/ir/graph.h"

namespace kiln::ir {

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  std::unordered_map<const Value*, Value*> map;
  for (const auto& p : parameters_) map[p.get()] = g->add_parameter(p->type());
  for (const GraphVariable& v : variables_) {
    int i = g->add_variable(v.name, v.type, v.trainable);
    map[v.entry] = g->variables_[size_t(i)].entry;
  }
  auto inputs_of = [&](const Node& n) {
    std::vector<Value*> in;
    in.reserve(n.inputs().size());
    for (const Value* v : n.inputs()) in.push_back(map.at(v));
    return in;
  };
  for (const auto& up : nodes_) {
    const Node& n = *up;
    std::vector<TensorType> types;
    for (size_t i = 0; i < n.num_outputs(); ++i) types.push_back(n.output(i)->type());
    std::vector<std::unique_ptr<Graph>> subs;
    for (const auto& s : n.subgraphs()) subs.push_back(s->clone());
    // Built directly (not through add_op), so every output keeps its exact type.
    auto copy = g->make_node(n.kind(), inputs_of(n), types);
    copy->op_ = n.op_;
    copy->attrs_ = n.attrs_;
    copy->name_ = n.name_;
    copy->loc_ = n.loc_;
    copy->variable_ = n.variable_;
    copy->literal_ = n.literal_;
    copy->subgraphs_ = std::move(subs);
    Node* added = g->append(std::move(copy));
    for (size_t i = 0; i < n.num_outputs(); ++i) map[n.output(i)] = added->output(i);
  }
  for (size_t i = 0; i < variables_.size(); ++i) {
    g->variables_[i].read = variables_[i].read;
    g->variables_[i].written = variables_[i].written;
  }
  std::vector<Value*> outs;
  for (const Value* v : outputs_) outs.push_back(map.at(v));
  g->set_outputs(std::move(outs));
  return g;
}

}  // namespace kiln::ir
