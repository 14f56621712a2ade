// Eager kernels: one per op in the table, looked up by OpKind.
// A kernel receives concrete inputs, the call's attributes (already checked by the op's shape
// rule) and an output array allocated with the inferred type; it fills the output.
#pragma once

#include <span>

#include "kiln/ir/op_table.h"
#include "kiln/runtime/array.h"

namespace kiln::runtime {

using KernelFn = void (*)(std::span<const Array> inputs, const Attrs& attrs, Array& out);

// The kernel of `kind`; throws kiln::Error if the op has none.
KernelFn kernel_for(OpKind kind);

// Types the call with the op table, allocates the output and runs the kernel.
Array run_op(OpKind kind, std::span<const Array> inputs, const Attrs& attrs);
// Same, with the output type already inferred by the caller.
Array run_kernel(OpKind kind, std::span<const Array> inputs, const Attrs& attrs,
                 const TensorType& out_type);

}  // namespace kiln::runtime
