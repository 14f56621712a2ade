// Constant folding: the pass "constant-fold".
//
// Replaces an op node whose inputs are all constant nodes by a constant node holding the
// result, computed by the eager kernel (runtime::run_op, so the folded value is bit-identical
// to what eager execution gives). The constant is placed where the op was and keeps its
// name() and location(); chains fold in one run. Also folds `element_count` when the counted
// dimensions of its input are known, whatever the input is (gradients of `mean` use it).
// Works in every sub-graph too. The inputs are left for dce to remove.
//
// Skips (leaves the node as it is):
//   - random ops (kRandom). Folding a constant-seed draw would be correct (the kernels are
//     deterministic) but would bake possibly large random tensors into the IR; left to run
//     time.
//   - results with unknown dimensions or more than `max_elements` elements (the IR would
//     carry a large literal; default 1M elements);
//   - calls whose kernel throws (e.g. gather with an out-of-range index): the error stays a
//     run-time error of that node instead of becoming a compile error;
//   - results whose type differs from the node's declared type (not in a valid graph).
// Never folds assignments, cond or while; never touches a node it does not fold.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

inline constexpr int64_t kDefaultConstantFoldMaxElements = int64_t(1) << 20;

std::unique_ptr<Pass> make_constant_fold(int64_t max_elements = kDefaultConstantFoldMaxElements);

}  // namespace kiln::passes
