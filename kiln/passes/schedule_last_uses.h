// Scheduling last uses early: the pass "schedule-last-uses".
//
// Moves a top-level node earlier when it is the last reader of intermediate values larger than
// everything it defines: to just after the last node it depends on, or after the last other
// reader of a value whose last reader it is, whichever comes later, and from there on before
// the first node that adds at least as many bytes to the arena as it does (at its new step the
// values that die at the nodes it now precedes are still live). So the larger values are freed
// sooner (the live bytes at the steps it passes shrink by the difference, and at its new step
// they grow by no more than the node it lands before added) and read while they are still in
// cache from their previous use. In a training step a weight gradient x^T dy is the last reader
// of the layer input x (batch x features) and defines a gradient of the weights' size; traced
// after the rest of the layer's backward pass, it read x from memory milliseconds after the
// forward pass had (XLA's memory scheduler prefers, among the ready nodes, the one freeing the
// most bytes, for the same reason).
//
// "Freed" counts storage, not SSA values: a reshape's result and its operand are one buffer (a
// view, codegen/memory_plan.h), and so may be a concat's operands and its result (computed in
// place); a node frees such a group only as the last reader of all its values, and counts the
// largest value it reads from it (that buffer at least dies with it). Sizes are rounded up to
// the arena's alignment, as the memory plan counts them, so the plan's live bytes never grow
// at any step (tests/codegen/memory_plan_test.cc). Graph parameters, variable entries,
// constants, assignment results and the values they store (pooled: they outlive the call), cond
// / while results (outside the arena) and graph outputs are never freed. A value of unknown size
// counts as not freed; a node with an output of unknown size does not move.
//
// A node computing a variable's new value from its entry value (an optimizer update) also stays
// after the entry value's other readers, so that it is still its last reader and updates the
// variable in place (codegen/variable_updates.h).
//
// Never moves assignments, all_reduce nodes, constants or reshapes, never moves a node later,
// and never reorders two nodes that depend on each other: results are bitwise unchanged (every
// node is a pure function of its inputs; assignments keep their order and the stale-value rule
// still holds, since a node read a variable's value before its next store and moves earlier).
// Top level only (sub-graphs run as one node).
#pragma once

#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

std::unique_ptr<Pass> make_schedule_last_uses();

}  // namespace kiln::passes
