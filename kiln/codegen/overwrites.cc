#include "kiln/codegen/overwrites.h"

#include <algorithm>
#include <set>
#include <unordered_set>

namespace kiln::codegen {
namespace {

using ir::Node;
using ir::NodeKind;
using ir::Value;

enum class Read { kNone, kSameIndex, kElsewhere };

// How computing `root` at some index reads parameter `p`: not at all, only at that index,
// or (also) elsewhere. Other materialized values are read from their buffers, not followed.
class ReadsOf {
 public:
  ReadsOf(const Value* p, const std::unordered_set<const Value*>& materialized)
      : p_(p), materialized_(materialized) {}

  Read of(const Value* root) {
    result_ = Read::kNone;
    seen_.clear();
    if (root == p_) return Read::kSameIndex;
    const Node* n = root->producer();
    if (n != nullptr && n->kind() == NodeKind::kOp) operands(*n, true);
    return result_;
  }

 private:
  void visit(const Value* v, bool same) {
    if (v == p_) {
      result_ = std::max(result_, same ? Read::kSameIndex : Read::kElsewhere);
      return;
    }
    if (materialized_.count(v) || !seen_.insert({v, same}).second) return;
    const Node* n = v->producer();
    if (n != nullptr && n->kind() == NodeKind::kOp) operands(*n, same);
  }

  // Reductions, broadcasts and layout ops read their operands at other indices.
  void operands(const Node& n, bool same) {
    const bool elementwise = op_info(n.op()).has(kElementwise) && !is_reduction(n);
    for (const Value* in : n.inputs())
      visit(in, same && elementwise && in->shape() == n.output()->shape());
  }

  const Value* p_;
  const std::unordered_set<const Value*>& materialized_;
  std::set<std::pair<const Value*, bool>> seen_;
  Read result_ = Read::kNone;
};

bool safe_by_nests(const ir::Graph& g, const KernelPlan& plan, size_t o, size_t i) {
  const Value* out = g.outputs()[o];
  const Value* p = g.parameter(i);
  if (plan.mode == IterationMode::kRows && !plan.inputs_by_row[i]) return false;
  std::unordered_set<const Value*> materialized(plan.materialized.begin(), plan.materialized.end());
  ReadsOf reads(p, materialized);
  auto at = std::find(plan.materialized.begin(), plan.materialized.end(), out);
  if (at == plan.materialized.end() || reads.of(out) == Read::kElsewhere) return false;
  for (auto later = at + 1; later != plan.materialized.end(); ++later)
    if (reads.of(*later) != Read::kNone) return false;
  return true;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> honoured_overwrites(
    const ir::Graph& g, const KernelPlan& plan,
    const std::vector<std::pair<size_t, size_t>>& requested) {
  std::vector<std::pair<size_t, size_t>> out;
  std::vector<bool> input_used(g.parameters().size()), output_used(g.outputs().size());
  for (const auto& [o, i] : requested) {
    if (o >= g.outputs().size() || i >= g.parameters().size()) continue;
    if (input_used[i] || output_used[o]) continue;
    const TensorType& ot = g.outputs()[o]->type();
    if (!(ot == g.parameter(i)->type())) continue;
    const bool ok = plan.mode == IterationMode::kFlat ? ot.shape.num_elements() == plan.extent
                                                      : safe_by_nests(g, plan, o, i);
    if (!ok) continue;
    input_used[i] = output_used[o] = true;
    out.emplace_back(o, i);
  }
  return out;
}

}  // namespace kiln::codegen
