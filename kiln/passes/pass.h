// Pass: one graph-to-graph rewrite of the kiln IR (ir/graph.h).
//
// Contract every pass follows (the pipeline relies on it):
//   - `run(g)` rewrites `g` in place and returns true exactly when it changed something
//     (a node added, removed, moved or edited; a use or a graph output redirected). A pass
//     that returns false left the graph untouched, so its printed text is identical.
//   - A valid graph in gives a valid graph out (ir::verify_graph passes) with the same
//     parameters, variables, output types and observable behaviour: the same outputs and the
//     same variable updates, in the same order.
//   - Errors are kiln::Error (the pipeline prefixes them with the pass name).
//   - Passes recurse into cond / while sub-graphs themselves where their rewrite applies there.
//
// Each pass's header comment says what it rewrites and what it must never do (see
// passes/passes.h); the pipeline that runs them is passes/pipeline.h.
#pragma once

#include <string_view>

#include "kiln/ir/graph.h"

namespace kiln::passes {

class Pass {
 public:
  virtual ~Pass();
  // The pass's name as used by KILN_DISABLE_PASSES, KILN_DUMP_PASSES and `kiln-opt --passes`
  // ("cse", "constant-fold"); stable, lower-case, words joined by '-'.
  virtual std::string_view name() const = 0;
  // Rewrites `g`; returns whether it changed anything.
  virtual bool run(ir::Graph& g) = 0;
};

}  // namespace kiln::passes
