// The kiln graph-optimization passes, and the registry that names them (for kiln-opt
// --passes=a,b, KILN_DISABLE_PASSES and KILN_DUMP_PASSES). Each pass's contract is in its
// own header; the pipeline that runs them is passes/pipeline.h.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/passes/algebraic_simplify.h"
#include "kiln/passes/constant_fold.h"
#include "kiln/passes/cse.h"
#include "kiln/passes/dce.h"
#include "kiln/passes/fusion.h"
#include "kiln/passes/hoist_loop_transposes.h"
#include "kiln/passes/lower_assignments.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/refine_shapes.h"
#include "kiln/passes/schedule_collectives.h"
#include "kiln/passes/schedule_last_uses.h"
#include "kiln/passes/split_reductions.h"
#include "kiln/passes/transpose_folding.h"

namespace kiln::passes {

// The names of every registered pass, sorted: algebraic-simplify, constant-fold, cse, dce,
// fusion, hoist-loop-transposes, lower-assignments, refine-shapes, schedule-collectives,
// schedule-last-uses, split-reductions, transpose-folding.
std::vector<std::string_view> registered_pass_names();

// "algebraic-simplify, constant-fold, cse, dce, ..." (for error messages).
std::string registered_pass_list();

// A new instance of the pass called `name` with its default options; kiln::Error listing the
// known passes when there is none.
std::unique_ptr<Pass> create_pass(std::string_view name);

}  // namespace kiln::passes
