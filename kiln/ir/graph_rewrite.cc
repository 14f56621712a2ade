#include "kiln/ir/graph_rewrite.h"

#include "kiln/ir/error.h"

namespace kiln::ir {

GraphRewrite::GraphRewrite(Graph& g) : g_(g) {
  original_.reserve(g.nodes().size());
  for (const auto& n : g.nodes()) original_.push_back(n.get());
}

Value* GraphRewrite::resolve(Value* v) const {
  // Chains are short (a replaced value's replacement is rarely replaced again); the bound
  // turns a cyclic replacement (a bug in the pass) into an error instead of a hang.
  for (size_t steps = 0; steps <= replacement_.size(); ++steps) {
    auto it = replacement_.find(v);
    if (it == replacement_.end()) return v;
    v = it->second;
  }
  KILN_ASSERT(false, "GraphRewrite: the replacements form a cycle");
  return v;
}

void GraphRewrite::visit(Node& n) const {
  if (replacement_.empty()) return;
  for (size_t i = 0; i < n.inputs().size(); ++i)
    if (Value* to = resolve(n.inputs()[i]); to != n.inputs()[i]) n.set_input(i, to);
}

void GraphRewrite::replace(Value* from, Value* to) {
  KILN_ASSERT(from != nullptr && to != nullptr && from != to,
              "GraphRewrite::replace needs two different values");
  replacement_[from] = to;
}

void GraphRewrite::insert_before(const Node* added, const Node* anchor) {
  KILN_ASSERT(added != anchor && inserted_.insert(added).second,
              "GraphRewrite::insert_before: a node is inserted once, before another node");
  before_[anchor].push_back(added);
}

void GraphRewrite::erase(const Node* n) { erased_.insert(n); }

bool GraphRewrite::finish() {
  const bool changed = !replacement_.empty() || !inserted_.empty() || !erased_.empty();
  if (!replacement_.empty()) {
    for (const auto& n : g_.nodes()) visit(*n);
    std::vector<Value*> outputs = g_.outputs();
    for (Value*& v : outputs) v = resolve(v);
    g_.set_outputs(std::move(outputs));
  }
  if (!inserted_.empty()) {
    std::vector<const Node*> order;
    order.reserve(g_.nodes().size());
    // Inserted nodes may anchor further inserted nodes: place each with its own prefix.
    auto place = [&](auto&& self, const Node* n) -> void {
      if (auto it = before_.find(n); it != before_.end())
        for (const Node* added : it->second) self(self, added);
      order.push_back(n);
    };
    for (const auto& n : g_.nodes())
      if (!inserted_.contains(n.get())) place(place, n.get());
    g_.reorder_nodes(order);  // an anchor outside the graph leaves a node out: an Error there
  }
  if (!erased_.empty()) g_.erase_nodes_if([&](const Node& n) { return erased_.contains(&n); });
  replacement_.clear();
  before_.clear();
  inserted_.clear();
  erased_.clear();
  return changed;
}

}  // namespace kiln::ir
