// Pass: one graph-to-graph rewrite of the kiln IR (ir/graph.h).
//
// Contract every pass follows (the pipeline relies on it):
//   - `run(g)` edits `g` itself and returns true exactly when it changed something
//     (a node added, removed, moved or edited; a use or a graph output redirected). A pass
//     that returns false left the graph untouched, so its printed text is identical.
//   - A valid graph in gives a valid graph out (ir::verify_graph passes) with the same
//     parameters, variables, output types and observable behaviour: the same outputs and the
//     same variable updates, in the same order.
//   - Errors are kiln::Error (the pipeline prefixes them with the pass name).
//   - Passes recurse into cond / while sub-graphs themselves where their rewrite applies there.
//   - A pass counts what it did in statistics() ("nodes merged", "x*1 -> x"), as MLIR passes
//     keep theirs (-mlir-pass-statistics); counting never changes what it rewrites. The
//     pipeline adds each run's counters to the pass's total and clears them.
//
// Each pass's header comment says what it rewrites and what it must never do (see
// passes/passes.h); the pipeline that runs them is passes/pipeline.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {

// Named counters of what a pass did, in the order each was first counted.
class PassStatistics {
 public:
  // Adds `n` to the counter `name` (created at 0 on first use).
  void add(std::string_view name, int64_t n = 1);
  // The counter's value; 0 when it was never counted.
  int64_t get(std::string_view name) const;
  // Adds every counter of `other` to this one's.
  void merge(const PassStatistics& other);
  void clear() { counters_.clear(); }
  bool empty() const { return counters_.empty(); }
  const std::vector<std::pair<std::string, int64_t>>& counters() const { return counters_; }
  // "nodes merged: 3, constants merged: 1" (empty when nothing was counted).
  std::string to_string() const;

 private:
  std::vector<std::pair<std::string, int64_t>> counters_;
};

class Pass {
 public:
  virtual ~Pass();
  // The pass's name as used by KILN_DISABLE_PASSES, KILN_DUMP_PASSES and `kiln-opt --passes`
  // ("cse", "constant-fold"); stable, lower-case, words joined by '-'.
  virtual std::string_view name() const = 0;
  // Rewrites `g`; returns whether it changed anything.
  virtual bool run(ir::Graph& g) = 0;
  // What run() counted since the counters were last cleared.
  PassStatistics& statistics() { return statistics_; }
  const PassStatistics& statistics() const { return statistics_; }

 private:
  PassStatistics statistics_;
};

}  // namespace kiln::passes
