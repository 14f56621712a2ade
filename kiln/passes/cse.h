// Common subexpression elimination: the pass "cse".
//
// Two nodes of the same graph are identical when they are
//   - op nodes with the same op, the same attributes (by name and value, in any order), the
//     same output type and the same input values; for a two-input op with the kCommutative
//     trait (add, mul, maximum, equal, ...) the inputs also match swapped, except for float
//     maximum / minimum (their kernels return the first of +0.0 / -0.0, so swapping them
//     can change the sign of a zero); or
//   - constants with the same type and bitwise-equal data (0.0 and -0.0 stay distinct, and so
//     do NaNs with different payloads).
// Of identical nodes the first in program order is kept; the uses of the later ones (node
// inputs and graph outputs) take its value and the later ones are removed. Program order
// makes this valid: the kept node is defined before every use of the removed one. Runs in
// every sub-graph separately (sub-graphs are closed, so nothing is shared across them).
//
// Random ops (kRandom: random_uniform, random_normal, random_int) ARE merged when their seed
// inputs and attributes match: the kernels are counter-based (Philox), so such an op is a pure
// function of its seed value and attributes and two identical ones give the same tensor. A
// tracer that wants independent draws gives them different seeds (it must anyway).
//
// Never merges assignments (each is its own variable update, even with equal operands) or
// cond / while nodes (sub-graphs are not compared). Never adds or reorders nodes.
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_cse();

}  // namespace kiln::passes
