// Loop-invariant transposed GEMM operands made once before the loop: the pass
// "hoist-loop-transposes".
//
// Inside a while body, matmul(a, c) {transpose_b=true} (likewise transpose_a) whose transposed
// operand `c` is an invariant capture of the loop (a body parameter after the loop variables)
// reads `c` in the other layout on every iteration, and the GEMM engine transposes it into its
// panels every time (a recurrent layer's gradient loop does this with its weights: dh = dz U^T
// per time step). The pass computes transpose(c) once before the while (a new capture of the
// loop, appended after the others in both sub-graphs) and gives the matmul that with the flag
// cleared. Captures used by several such matmuls share one transpose; the old capture stays
// (other uses may read it). Nested whiles are handled from the inside out, so an operand
// invariant in both loops is transposed in the outer loop's body; running the pass again
// moves it further out.
//
// Exact with kiln's GEMM engine: each C element is the same FMA chain over k either way
// (runtime/gemm_engine.h), so results are bitwise unchanged. Eigen's GEMM (CPUs without AVX2
// and FMA) and the reference executor may sum in another order for the other layout (a few
// ulps, as transpose-folding). Costs one transposed copy of each hoisted capture, alive while
// the loop runs. Never fires outside while bodies, on cond sub-graphs, on loop variables, or
// when the capture is not at least 2-D.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_hoist_loop_transposes();

}  // namespace kiln::passes
