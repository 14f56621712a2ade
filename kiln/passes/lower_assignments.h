// Lowering read-modify-write assignments to pure stores: the pass "lower-assignments".
//
//   %k = assign_add $v, %d   ->   %n = add(current($v), %d)   %k = assign $v, %n
//   %k = assign_sub $v, %d   ->   %n = sub(current($v), %d)   %k = assign $v, %n
//
// current($v) is the variable's newest value at that point: its entry value, or the value the
// last assignment to $v before the node stored. The new add / sub takes the assignment's name
// and location and sits just before it; the new assign replaces it. Every use of an
// assignment's result (%k, also of a plain `assign $v, %x` unless %x is itself a variable's
// entry value or an assignment's result) moves to the stored value (%n, %x):
// the same tensor, so no node reads an assignment's output afterwards and the computation of
// a variable's new value and its later uses can share one fusion. (The verifier's stale-value
// rule already guarantees these uses come before the next store into $v.) The operand order is the
// one the reference executor and the runtime use for assign_add / assign_sub (current first), so
// results are bitwise identical.
//
// Afterwards every assignment is a plain store of a computed value, so fusion (passes/fusion.h)
// can compute a variable's new value inside a kernel and the store stays outside it.
//
// Never reorders or removes stores, never changes registry flags (the variable stays read:
// the add / sub reads it). Sub-graphs have no assignments, so there is nothing to do there.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_lower_assignments();

}  // namespace kiln::passes
