#include "kiln/passes/transpose_folding.h"

#include <unordered_map>

#include "kiln/ir/graph.h"

namespace kiln::passes {
namespace {

// perm is the identity on all but the last two axes, which it swaps.
bool swaps_last_two(const std::vector<int64_t>& perm) {
  size_t r = perm.size();
  if (r < 2) return false;
  for (size_t k = 0; k + 2 < r; ++k)
    if (perm[k] != int64_t(k)) return false;
  return perm[r - 2] == int64_t(r - 1) && perm[r - 1] == int64_t(r - 2);
}

// The variable a value is a version of (entry value or assignment result), or -1.
int variable_of(const ir::Value* v) {
  if (v->def() == ir::Value::Def::kVariableEntry) return v->index();
  const ir::Node* p = v->producer();
  return p && p->is_assignment() ? p->variable() : -1;
}

class TransposeFolding final : public Pass {
 public:
  std::string_view name() const override { return "transpose-folding"; }

  bool run(ir::Graph& g) override {
    bool changed = false;
    for (const auto& sub : g.nodes())
      for (const auto& body : sub->subgraphs()) changed = run(*body) || changed;
    std::unordered_map<const ir::Node*, size_t> position;
    for (size_t i = 0; i < g.nodes().size(); ++i) position[g.nodes()[i].get()] = i;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      ir::Node& mm = *g.nodes()[i];
      if (!mm.is_op(OpKind::MatMul)) continue;
      for (size_t operand = 0; operand < 2; ++operand) {
        const ir::Node* t = mm.input(operand)->producer();
        if (t == nullptr || !t->is_op(OpKind::Transpose)) continue;
        if (!swaps_last_two(t->attrs().get_ints("perm", "transpose"))) continue;
        ir::Value* source = t->input(0);
        if (assigned_between(g, variable_of(source), position.at(t), i)) continue;
        const char* flag = operand == 0 ? "transpose_a" : "transpose_b";
        bool was = mm.attrs().get_bool(flag, "matmul");
        mm.mutable_attrs().set(flag, !was);
        mm.set_input(operand, source);
        statistics().add(operand == 0 ? "transposes folded into transpose_a"
                                      : "transposes folded into transpose_b");
        changed = true;
      }
    }
    return changed;
  }

 private:
  static bool assigned_between(const ir::Graph& g, int variable, size_t from, size_t to) {
    if (variable < 0) return false;
    for (size_t k = from + 1; k < to; ++k) {
      const ir::Node& n = *g.nodes()[k];
      if (n.is_assignment() && n.variable() == variable) return true;
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_transpose_folding() { return std::make_unique<TransposeFolding>(); }

}  // namespace kiln::passes
