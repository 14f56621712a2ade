#include "kiln/passes/optimize.h"

namespace kiln::passes {

GraphCounts count_graph(const ir::Graph& g) {
  GraphCounts c;
  for (const auto& n : g.nodes()) {
    ++c.nodes;
    if (n->kind() == ir::NodeKind::kFusion) {
      ++c.fusions;
      ++c.kernels;
    } else if (n->kind() == ir::NodeKind::kOp) {
      ++c.kernels;
    }
  }
  return c;
}

}  // namespace kiln::passes
