#include "kiln/passes/cse.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::NodeKind;
using ir::Value;

bool is_candidate(const Node& n) {
  if (n.kind() == NodeKind::kConstant) return n.literal() != nullptr;
  return n.kind() == NodeKind::kOp && n.num_outputs() == 1 && !op_info(n.op()).has(kSideEffecting);
}

// Float maximum / minimum are commutative except for signed zeros: the kernels return one
// operand when they compare equal (minimum(+0.0, -0.0) is +0.0, minimum(-0.0, +0.0) is -0.0),
// so they only match with their inputs in the same order.
bool swappable(const Node& n) {
  if (n.kind() != NodeKind::kOp || n.inputs().size() != 2 || !op_info(n.op()).has(kCommutative))
    return false;
  bool min_max = n.op() == OpKind::Maximum || n.op() == OpKind::Minimum;
  return !(min_max && is_floating(n.output(0)->dtype()));
}

// The inputs in the order used for hashing and comparing (sorted for commutative ops).
std::pair<const Value*, const Value*> ordered_pair(const Node& n) {
  const Value* a = n.input(0);
  const Value* b = n.input(1);
  return std::less<const Value*>()(b, a) ? std::pair{b, a} : std::pair{a, b};
}

void combine(size_t& seed, size_t h) {
  seed ^= h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

size_t hash_node(const Node& n) {
  size_t h = std::hash<int>()(int(n.kind()));
  combine(h, std::hash<int>()(int(n.output(0)->dtype())));
  if (n.kind() == NodeKind::kConstant) {
    const ir::Literal& lit = *n.literal();
    // A prefix of the bytes keeps hashing of large literals cheap; equality compares them all.
    size_t prefix = std::min<size_t>(lit.byte_size(), 256);
    combine(h, std::hash<std::string_view>()(
                   std::string_view(static_cast<const char*>(lit.data()), prefix)));
    combine(h, std::hash<int64_t>()(lit.num_elements()));
    return h;
  }
  combine(h, std::hash<int>()(int(n.op())));
  combine(h, std::hash<size_t>()(n.inputs().size()));
  if (swappable(n)) {
    auto [a, b] = ordered_pair(n);
    combine(h, std::hash<const Value*>()(a));
    combine(h, std::hash<const Value*>()(b));
  } else {
    for (const Value* v : n.inputs()) combine(h, std::hash<const Value*>()(v));
  }
  return h;
}

// Attributes equal by name and value, in any order.
bool same_attrs(const Attrs& a, const Attrs& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, value] : a.items()) {
    const AttrValue* other = b.find(name);
    if (other == nullptr || !(*other == value)) return false;
  }
  return true;
}

bool identical(const Node& a, const Node& b) {
  if (a.kind() != b.kind() || !(a.output(0)->type() == b.output(0)->type())) return false;
  if (a.kind() == NodeKind::kConstant) return a.literal()->equals(*b.literal());
  if (a.op() != b.op() || a.inputs().size() != b.inputs().size()) return false;
  if (!same_attrs(a.attrs(), b.attrs())) return false;
  if (swappable(a)) return ordered_pair(a) == ordered_pair(b);
  return a.inputs() == b.inputs();
}

bool eliminate_common_subexpressions(Graph& g, PassStatistics& stats) {
  bool changed = false;
  std::unordered_map<size_t, std::vector<const Node*>> seen;  // hash -> kept nodes
  std::unordered_map<const Value*, Value*> replaced;          // removed value -> kept value
  std::unordered_set<const Node*> removed;
  for (const auto& owned : g.nodes()) {
    Node& n = *owned;
    // Uses of removed values move to the kept ones as the sweep reaches them.
    for (size_t i = 0; i < n.inputs().size(); ++i)
      if (auto it = replaced.find(n.input(i)); it != replaced.end()) n.set_input(i, it->second);
    for (const auto& sub : n.subgraphs()) changed |= eliminate_common_subexpressions(*sub, stats);
    if (!is_candidate(n)) continue;
    std::vector<const Node*>& bucket = seen[hash_node(n)];
    auto match = std::find_if(bucket.begin(), bucket.end(),
                              [&](const Node* kept) { return identical(*kept, n); });
    if (match == bucket.end()) {
      bucket.push_back(&n);
      continue;
    }
    replaced.emplace(n.output(0), (*match)->output(0));
    removed.insert(&n);
    stats.add(n.kind() == NodeKind::kConstant ? "constants merged" : "nodes merged");
  }
  if (removed.empty()) return changed;
  std::vector<Value*> outputs = g.outputs();
  for (Value*& v : outputs)
    if (auto it = replaced.find(v); it != replaced.end()) v = it->second;
  g.set_outputs(std::move(outputs));
  g.erase_nodes_if([&](const Node& n) { return removed.contains(&n); });
  return true;
}

class Cse final : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  bool run(Graph& g) override { return eliminate_common_subexpressions(g, statistics()); }
};

}  // namespace

std::unique_ptr<Pass> make_cse() { return std::make_unique<Cse>(); }

}  // namespace kiln::passes
