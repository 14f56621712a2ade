// The iteration plan of one kernel body (see codegen/lower_kernel.h): which values it
// materializes, and whether it runs flat, by rows, or serially.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::codegen {

enum class IterationMode { kFlat, kRows, kSerial };

// The work of one vector-math op per element, in elements moved: calibrated with
// bench/kernel_grain_bench.cc (tanh(exp(x) * x) gains from two threads at ~1/16 of the chunk
// size a cheap x * x + x needs).
inline constexpr int64_t kTranscendentalWork = 8;

// A kernel whose inputs and outputs span this many bytes stores its outputs with streaming
// stores (KernelPlan::streaming_stores): a last-level cache's size on common CPUs (32 MiB:
// one Zen CCD's L3; Intel client parts have less). Fixed rather than read from the host, so
// the same graph gives the same kernel everywhere (virtual machines report odd cache sizes:
// 320 MiB here).
inline constexpr int64_t kStreamingFootprintBytes = int64_t{32} << 20;

struct KernelPlan {
  IterationMode mode = IterationMode::kSerial;
  int64_t extent = 1;  // rows (flat: elements; serial: 1)
  // Work per row, in elements read or written; each vector-math op (exp, log, tanh, ...)
  // evaluated counts kTranscendentalWork (sizes the runtime's chunks).
  int64_t row_elements = 1;
  // Values the kernel stores, in dependency order: body outputs and reductions.
  std::vector<const ir::Value*> materialized;
  // Materialized values that are not outputs: temporary buffer index of each.
  std::unordered_map<const ir::Value*, int> temporaries;
  // bf16 reductions a serial kernel accumulates through memory (those that keep the last axis,
  // such as a bias gradient's sum over the batch): each accumulates along contiguous rows in a
  // float32 temporary of its shape (buffer index after the temporaries) and is rounded into its
  // own buffer once at the end, instead of reducing one strided column per output element.
  std::unordered_map<const ir::Value*, int> accumulators;
  // Per parameter: read only at the row being computed (runtime::KernelLayout::inputs_by_row).
  std::vector<bool> inputs_by_row;
  // Outputs are stored with non-temporal (streaming) stores: the kernel runs flat or by rows
  // and its buffers (inputs and outputs) span kStreamingFootprintBytes or more, so its
  // outputs would leave the cache before anything reads them, and a streaming store does not
  // read the line before writing it (y = f(x) then moves 2 bytes per output byte, not 3).
  bool streaming_stores = false;
};

// The op node that produces `v` (null for parameters, variable entries and constants).
const ir::Node* op_producer(const ir::Value* v);

bool is_reduction(const ir::Node& n);
// A reduction (not argmax/argmin) of a rank >= 2 input over axes that leave its last one: it
// can accumulate along contiguous rows through memory.
bool keeps_last_axis(const ir::Node& n);
// Reduction axes of a reduction node, normalized (non-negative, sorted, each once; [] = all).
std::vector<int> reduction_axes(const ir::Node& n);

// A concat in a kernel body (fusion role Output, passes/fusion.h rule 8) is always
// materialized: its operands are stored into their windows of its buffer as they are computed
// (a pass over all of them at once where they share one shape), and whatever else in the
// kernel reads it loads it back. Its normalized axis, and the shape every operand has (null
// when they differ).
int concat_axis(const ir::Node& n);
const Shape* shared_piece_shape(const ir::Node& n);

// `body` must be decomposed (codegen/decompose.h) with fully known shapes.
KernelPlan plan_kernel(const ir::Graph& body);

}  // namespace kiln::codegen
