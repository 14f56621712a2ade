// Variables a kernel may update in their own buffers (the kernel writes the new value over the
// entry value it reads, runtime::KernelLayout::overwrites): which (output, input) pairs of a
// node's kernel codegen asks for. compile_graph.cc builds one per graph it compiles; whether the
// kernel can honour a pair is codegen/overwrites.h's question.
//
// Contract: an output of node n is updated in its variable's buffer when
//   - it is assigned to a variable (an `assign` node) that has no other assignment in the graph,
//   - n reads that variable's entry value, and n is the entry value's last reader (no later
//     node reads it, and it is not a graph output), and
//   - `contraction` (the contraction of n's fusion body, if any) does not read the entry value,
//     directly or through an operand's prologue cast (ir/operand_prologue.h): its GEMM runs
//     block by block alongside the epilogue that overwrites it.
// Points at the graph's nodes and values: valid while the graph lives unchanged.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::codegen {

class VariableUpdates {
 public:
  // The top-level nodes of `g` (not its sub-graphs').
  explicit VariableUpdates(const ir::Graph& g);

  // The (output index, input index) pairs of n's kernel that update a variable in its own
  // buffer (see the contract above).
  std::vector<std::pair<size_t, size_t>> pairs(const ir::Node& n,
                                               const ir::Node* contraction) const;
  // Whether `v` is the new value of a variable's only assignment.
  bool assigned(const ir::Value* v) const { return assigned_to_.count(v) != 0; }
  // Whether a top-level node reads `v` or the graph returns it.
  bool read(const ir::Value* v) const { return last_reader_.count(v) != 0; }

 private:
  const ir::Graph& g_;
  std::unordered_map<const ir::Node*, size_t> position_;      // program position
  std::unordered_map<const ir::Value*, size_t> last_reader_;  // position of the last reader
  std::unordered_map<const ir::Value*, int> assigned_to_;     // value -> variable
};

}  // namespace kiln::codegen
