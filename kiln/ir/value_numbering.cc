#include "kiln/ir/value_numbering.h"

#include <fmt/format.h>

namespace kiln::ir {

ValueNumbering::ValueNumbering(const Graph& graph) {
  int next = 0;
  for (const auto& p : graph.parameters()) numbers_[p.get()] = next++;
  for (const GraphVariable& v : graph.variables()) numbers_[v.entry] = next++;
  for (const auto& n : graph.nodes())
    for (size_t i = 0; i < n->num_outputs(); ++i) numbers_[n->output(i)] = next++;
}

int ValueNumbering::number(const Value* v) const {
  auto it = numbers_.find(v);
  return it == numbers_.end() ? -1 : it->second;
}

std::string ValueNumbering::ref(const Value* v) const {
  int n = number(v);
  return n < 0 ? std::string("%<foreign>") : fmt::format("%{}", n);
}

std::string describe_node(const Node& node, const ValueNumbering& numbering) {
  std::string s;
  for (size_t i = 0; i < node.num_outputs(); ++i) {
    if (i) s += ", ";
    s += numbering.ref(node.output(i));
  }
  if (node.num_outputs() > 0) s += " = ";
  s += node.op_name();
  if (!node.name().empty()) s += fmt::format(" \"{}\"", node.name());
  const SourceLocation& loc = node.location();
  if (loc.known()) s += fmt::format(" ({}:{}:{})", loc.file, loc.line, loc.column);
  return s;
}

}  // namespace kiln::ir
