// Algebraic simplification: the pass "algebraic-simplify".
//
// Only rewrites that are exact for every input value (IEEE-754 floats included: NaN, inf,
// -0.0) and keep the rewritten value's type (dtype and shape, unknown dimensions included)
// identical. `1`, `0`, `-0.0` and `+0.0` below mean a constant node whose literal is a
// non-empty splat of that value (bitwise, so -0.0 and +0.0 differ).
//
//   mul(x, 1), mul(1, x)     -> x                  (x*1 == x for every x)
//                            -> broadcast_to(x)    when the 1 broadcasts x to a larger, fully
//                                                  known shape (autodiff's ones_like * g)
//   div(x, 1)                -> x
//   add(x, -0.0), add(-0.0, x) -> x   floats       (x + -0.0 == x, also for x = -0.0)
//   add(x, 0), add(0, x)     -> x     integers
//   sub(x, +0.0)             -> x     floats       (x - +0.0 == x, also for x = -0.0)
//   sub(x, 0)                -> x     integers
//   neg(neg(x))              -> x
//   transpose(x) {perm = identity}              -> x
//   transpose(transpose(x) {p1}) {p2}           -> transpose(x) {perm[i] = p1[p2[i]]}
//                                                  (or x when that is the identity)
//   reshape(reshape(x))      -> reshape(x) with the outer shape attribute
//   reshape(x) of x's own type -> x    (when x has at most one unknown dimension, so equal
//                                       types mean equal shapes)
//   broadcast_to(x), broadcast_like(x, y) of x's own, fully known type -> x
//   cast(x) {dtype = x's dtype} -> x
//   pad(a) + pad(b), adjacent windows along one axis -> pad(concat(a + 0.0, b + 0.0))
//   matmul(0, x), matmul(x, 0) of 2-d operands, fully known shapes
//                            -> broadcast_to(sum(x * 0, x's k axis) + 0.0)   (every element of
//                               the product is +0.0, or NaN where its line of x holds inf/NaN)
//
// Must never fire (not exact): x*0 -> 0 (NaN*0 and inf*0 are NaN, -1*0 is -0.0);
// x + +0.0 -> x on floats (-0.0 + +0.0 is +0.0); x - -0.0 -> x on floats; x - x -> 0 and
// x / x -> 1 (NaN, inf, 0); any reassociation or rewrite that changes rounding, such as
// sum(broadcast_to(s)) -> s * count. A rewrite whose result would not have exactly the old
// type does not fire. Introduces a use of a variable value (entry value or assignment result)
// that a later assignment supersedes only where that use comes before the assignment (the
// verifier's stale-value rule): reshape(v) of v's own type, used only before v's variable is
// assigned, becomes v; used after it, the reshape (a copy of the old value) stays. Edited nodes
// (transpose / reshape chains) are rewritten where they stand; replaced nodes are removed, their
// inputs are left for dce. Runs in every sub-graph too.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_algebraic_simplify();

}  // namespace kiln::passes
