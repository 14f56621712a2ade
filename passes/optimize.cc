#include "passes/optimize.h"

#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/printer.h"

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

std::string OptimizedGraph::summary() const {
  std::string s = fmt::format("# nodes {} -> {}, kernels {} -> {} ({} fusions)\n", before.nodes,
                              after.nodes, before.kernels, after.kernels, after.fusions);
  if (plan)
    s += fmt::format("# memory plan: {}\n", plan->to_string());
  else
    s += "# memory plan: none (a shape is unknown; give the signature fixed dimensions)\n";
  return s;
}

OptimizedGraph optimize_copy(const ir::Graph& g, const PipelineOptions& options) {
  OptimizedGraph out;
  out.graph = ir::parse_graph(ir::print_graph(g), g.name());
  out.before = count_graph(*out.graph);
  optimize_pipeline(options).run(*out.graph);
  out.after = count_graph(*out.graph);
  bool known = true;
  for (const auto& p : out.graph->parameters()) known = known && p->shape().is_fully_known();
  for (const auto& n : out.graph->nodes())
    for (size_t i = 0; i < n->num_outputs(); ++i)
      known = known && n->output(i)->shape().is_fully_known();
  if (known) out.plan = plan_memory(*out.graph);
  return out;
}

}  // namespace kiln::passes
