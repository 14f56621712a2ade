// Dead code elimination: the pass "dce".
//
// A node is dead when it has no side effect and none of its outputs is used by a live node
// or returned by its graph (liveness flows backwards from the graph's outputs and its
// side-effecting nodes, so whole dead chains go in one run). Removes every dead node, in the
// top-level graph and inside the sub-graphs of every live cond / while (a sub-graph's roots
// are the values it returns).
//
// Never removes:
//   - assignments (assign, assign_add, assign_sub), used or not: they update variables;
//   - op nodes whose op has the kSideEffecting trait (all_reduce: every rank must run it);
//   - a cond / while whose sub-graphs contain a side-effecting node at any depth (valid
//     graphs have none, the verifier forbids assignments in sub-graphs; checked to be safe);
//   - graph parameters, captured variables or their registry flags (the signature and the
//     variable registry are fixed), sub-graph parameters or outputs (the cond / while
//     signature is fixed: unused outputs of a live cond / while stay).
// A dead pure while loop is removed even if it would never terminate (as in XLA and LLVM).
// Never reorders or edits surviving nodes.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_dce();

}  // namespace kiln::passes
