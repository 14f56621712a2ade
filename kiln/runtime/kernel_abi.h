// The kernel ABI between generated code (codegen/) and the runtime: one C-ABI function per
// kernel, called on a chunk [begin, end) of the kernel's outermost parallel dimension.
//
// Shapes are static: a kernel is compiled for one set of concrete shapes (concrete functions
// specialise a graph with unknown dimensions to the argument shapes before compiling), so
// sizes and strides are constants in the code and the frame carries only pointers.
#pragma once

#include <cstdint>

namespace kiln::runtime {

struct KernelFrame {
  // The kernel's operands, then its outputs, then its temporaries (codegen/ says how many
  // of each). Every buffer is 64-byte aligned, at least as large as its tensor, and no two
  // buffers overlap (the generated code marks them noalias, aligned and dereferenceable),
  // except that the buffer of an overwriting output (KernelLayout::overwrites) is unused and may
  // be anything, e.g. its input's buffer.
  void* const* buffers = nullptr;
  // Set to a nonzero KernelStatus by a kernel that meets bad data it cannot compute
  // (integer division by zero); the caller turns it into a kiln::Error after the call.
  int32_t* status = nullptr;
};

enum KernelStatus : int32_t { kKernelOk = 0, kKernelIntegerDivisionByZero = 1 };

// Computes rows [begin, end) of the kernel's parallel dimension (0 <= begin <= end <= extent).
// Chunks may run concurrently on different threads; each row is written by one call only.
using KernelEntry = void (*)(const KernelFrame* frame, int64_t begin, int64_t end);

}  // namespace kiln::runtime

#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/tensor_type.h"

namespace kiln::runtime {

// How to call one compiled kernel (made by codegen/, used by the executable).
struct KernelLayout {
  std::string symbol;                   // the kernel's name: its fusion group's name
  size_t num_inputs = 0;                // frame buffers [0, num_inputs)
  size_t num_outputs = 0;               // then num_outputs output buffers
  std::vector<TensorType> temporaries;  // then one buffer of each of these types
  std::string iteration;                // "flat", "rows" or "serial" (codegen/lower_kernel.h)
  int64_t extent = 1;  // rows of the parallel dimension: call with [0, extent) in chunks
  // Work per row in elements read or written, vector-math ops weighted (codegen's estimate):
  // a chunk holds about kElementwiseGrain of it.
  int64_t row_elements = 1;
  // Per input: true if computing row r (element r of a flat kernel) reads the input only at
  // its row r, so a producer may fill the input block by block (matmul epilogues).
  std::vector<bool> inputs_by_row;
  // Overwriting outputs, as (output index, input index): the kernel writes that output into the
  // input's buffer (element i of a flat kernel is read before element i is written, and no
  // other element of the input is read) and never touches the output's own frame buffer.
  // The executable updates variables in place this way (runtime/executable.h).
  std::vector<std::pair<size_t, size_t>> overwrites;
};

}  // namespace kiln::runtime
