// Shape specialisation: the pass "refine-shapes" and specialize_parameters().
//
// refine-shapes re-runs the op table's shape rule of every op node in program order and keeps
// the result where it is more specific than the declared type (an unknown dimension becomes
// known because the inputs fix it); a result that contradicts a known dimension is a
// kiln::Error naming the node. Then broadcast_like(x, like) whose target shape is fully known
// becomes broadcast_to(x) {shape} (so `like` need not stay alive), and element_count over
// known dimensions is left to constant-fold. Sub-graph bodies, constants and assignments keep
// their types (their signatures are checked by the verifier).
//
// specialize_parameters(g, types) fixes the parameters' unknown dimensions (each type must
// conform: same dtype and rank, equal known dimensions) and runs refine-shapes, turning a
// shape-polymorphic graph into one for a concrete signature.
#pragma once

#include <memory>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_refine_shapes();

// Returns whether anything changed.
bool specialize_parameters(ir::Graph& g, const std::vector<TensorType>& types);

}  // namespace kiln::passes
