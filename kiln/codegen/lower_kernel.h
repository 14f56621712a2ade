// Lowering: one kernel body (a fusion group's body, or a graph of one op) -> one LLVM
// function with the kernel ABI (runtime/kernel_abi.h), built with IRBuilder.
//
// The body is first decomposed (codegen/decompose.h). Values the kernel must store are
// "materialized": the body's outputs and every reduction (its result is read by its
// consumers many times, e.g. layer normalization's mean). Every other value is computed
// where it is used, from its operands, at the index being computed (XLA's elemental
// emission): broadcasts, reshapes, transposes and slices become index arithmetic.
//
// Iteration, chosen per kernel:
//   flat    no reductions or transposes and every value has the outputs' element count or
//           one element: a single loop over the elements (rows = elements);
//   rows    every materialized value has the same leading dimension P and reads the others
//           only at its own row: for each row of the chunk, each materialized value's
//           remaining dimensions in turn (a layer normalization row: mean, variance, output,
//           while the row is in cache);
//   serial  otherwise: extent 1, every materialized value computed in full in one call.
// Reductions loop over their reduced axes inside the output element's loop, with
// reassociation allowed on the combining operation so the vectorizer uses several vector
// accumulators; each output element is reduced entirely within one call, in an order fixed
// by the compiled code, so results do not depend on threads or chunking.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/codegen/jit.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel_abi.h"

namespace kiln::codegen {

struct LoweredKernel {
  KernelModule module;
  runtime::KernelLayout layout;
};

// True if the emitter lowers `node`: an op node whose op-table row says `Generated`
// (ir/ops.def, the codegen column).
bool can_lower(const ir::Node& node);

// True for a node that, standing alone (not in a fusion group), runs as the library's kernel
// rather than a generated loop:
//   - a transpose that moves the innermost axis. The library copies it tile by tile with both
//     sides in cache (runtime/kernels/strided_copy.h); a generated kernel reads a strided
//     column per output row (whose loads, at a power-of-two stride, share one L1 set), 4x
//     slower on a 256 x 1024 float32 matrix;
//   - a concat: the library copies its pieces as runs of lines and skips a piece that the
//     memory plan already computed in its window of the result (codegen/memory_plan.h, concat
//     regions). Inside a fusion group (fusion role Output) its pieces are stored into their
//     windows as the group computes them.
// The executable runs such a node as an op step; inside a fusion group a transpose stays index
// arithmetic.
bool runs_in_library(const ir::Node& node);

// Lowers `body` into a kernel named `symbol`. With `as_parameter`, that node of the body (a
// contraction) is not computed: its result is an extra input after the body's parameters.
// `overwrites` asks for outputs written into input buffers, as (output index, input index);
// the pairs honoured (codegen/overwrites.h says which are safe) are in the layout: each such
// output is stored through the input's pointer (one noalias pointer reads and writes it).
LoweredKernel lower_kernel(const ir::Graph& body, const std::string& symbol,
                           const ir::Node* as_parameter = nullptr,
                           const std::vector<std::pair<size_t, size_t>>& overwrites = {});

}  // namespace kiln::codegen
