// Memory planning: where every value of a graph lives while it runs, with one arena of
// scratch memory per executable. A function rather than a Pass: it produces a plan and leaves
// the graph alone.
//
// Contract of plan_memory(g):
//   - Every dimension of every top-level value must be known; otherwise a kiln::Error naming
//     the first such value ("memory planning needs known shapes; %3 is f32[?,128]: specialise
//     the signature").
//   - Schedule: the top-level nodes in program order; node i runs at step i. Parameters and
//     variable entry values are defined at step -1 (function entry); graph outputs live until
//     step num_steps (the return). A value's lifetime is [defining step, last use step] (a
//     value nobody uses still lives at its defining step, where it is written).
//   - Nodes with sub-graphs (cond, while, fusion) are planned as one step (v1): their operands
//     are used and their outputs defined at the node's step; values inside sub-graphs are not
//     planned (the executor gives them their own memory). Their results never reuse an
//     operand's buffer in place.
//   - Values outside the arena: parameters (the caller's buffers), variable entry values and
//     assignment results (the new value of a variable is written in place into the variable's
//     buffer), constants (their literal data) and graph outputs (returned to the caller; a
//     value that is both a graph output and one of the kinds before keeps that kind and has
//     `graph_output` set).
//   - Everything else (op results, cond / while results) lives in the arena at a 64-byte
//     aligned offset. In place: the result of an elementwise op (or a reshape) takes the buffer
//     of an operand that is an arena value, dies at this node and has the same number of
//     elements and element size (so no operand that is broadcast, no dtype size change); the
//     first such operand wins and `in_place_of` records it. Values sharing a buffer this way
//     form one buffer whose lifetime is the union of theirs.
//   - Offsets: greedy by size (as TFLite / XLA): buffers sorted by aligned size, largest first
//     (ties: earlier start, then value order); each goes into the smallest gap (best fit, ties:
//     lowest offset) between the already placed buffers whose lifetimes overlap its own, or
//     after the last of them when no gap fits. Deterministic.
//   - lower_bound_bytes: max over steps of the sum of the aligned sizes of the arena buffers
//     alive at that step (a buffer shared in place counts once). No offset assignment for the
//     same buffers does better, so arena_bytes >= lower_bound_bytes.
// The plan points at the graph's values: it is valid while the graph is unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {

struct MemoryPlanOptions {
  // Arena offsets and the sizes used for packing are multiples of this (a power of two).
  size_t alignment = 64;
  // Let elementwise results reuse the buffer of an operand that dies at their node.
  bool in_place = true;
  // Accept parameters of unknown shape (planned with no bytes): the sub-graphs of a while that
  // receive a stacked while's stacks (codegen sets it; a stack's length is the trip count).
  bool unknown_parameters = false;
};

// Where a value lives.
enum class BufferKind : uint8_t {
  kArena,      // in the executable's arena at `offset`
  kParameter,  // the caller's argument
  kVariable,   // a variable's buffer (its entry value or an assignment's new value)
  kConstant,   // the constant's literal data
  kOutput,     // its own buffer, returned to the caller
};

// "arena", "parameter", "variable", "constant", "output".
std::string_view buffer_kind_name(BufferKind kind);

struct ValuePlan {
  const ir::Value* value = nullptr;
  BufferKind kind = BufferKind::kArena;
  size_t size = 0;     // bytes (elements * dtype size), not rounded up
  size_t offset = 0;   // arena offset (kArena only; 0 otherwise)
  int first_step = 0;  // defining step (-1: parameters and variable entries)
  int last_step = 0;   // last use (num_steps when it is a graph output)
  // kArena: the operand whose buffer this value reuses in place (null if none).
  const ir::Value* in_place_of = nullptr;
  // kVariable: the variable's index.
  int variable = -1;
  bool graph_output = false;

  bool in_arena() const { return kind == BufferKind::kArena; }
};

struct MemoryPlan {
  // One entry per top-level value in ValueNumbering order (parameters, variable entries, node
  // outputs in program order).
  std::vector<ValuePlan> values;
  int num_steps = 0;  // top-level nodes
  size_t alignment = 64;
  size_t arena_bytes = 0;
  size_t lower_bound_bytes = 0;

  // The plan of `v` (a top-level value of the planned graph); kiln::Error otherwise.
  const ValuePlan& of(const ir::Value* v) const;
  // Number of arena values, and how many of them reuse an operand's buffer in place.
  int arena_values() const;
  int in_place_values() const;
  // "arena 1.2 MiB (lower bound 1.1 MiB, 1.05x), 37 buffers, 12 in place".
  std::string to_string() const;
  // to_string() then one line per value: `%7 arena [3, 5] 32768 B @ 65536 in place of %6`.
  std::string to_table(const ir::Graph& g) const;

 private:
  friend MemoryPlan plan_memory(const ir::Graph& g, const MemoryPlanOptions& options);
  std::unordered_map<const ir::Value*, size_t> index_;
};

MemoryPlan plan_memory(const ir::Graph& g, const MemoryPlanOptions& options = {});

// "512 B", "3.0 KiB", "1.2 MiB", "2.0 GiB".
std::string format_bytes(size_t bytes);

}  // namespace kiln::passes
