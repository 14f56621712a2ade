// Run at the end of a trace: a variable value read before an assignment and used after it
// (`old = v.read(); v.assign_add(d); return old;`) would be a stale variable value in the IR
// (see ir/graph.h). For each such value a `copy` is inserted just before the assignment and
// the later uses read the copy, so the graph keeps eager semantics (a read is a snapshot) and
// the runtime may still update the variable in place.
#pragma once

#include "kiln/ir/graph.h"

namespace kiln::detail {

// Returns the number of copies inserted.
int keep_old_variable_values(ir::Graph& graph);

}  // namespace kiln::detail
