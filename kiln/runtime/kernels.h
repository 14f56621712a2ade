// Eager kernels: one per op in the table, looked up by OpKind.
// A kernel receives concrete inputs, the call's attributes (already checked by the op's shape
// rule) and an output array allocated with the inferred type; it fills the output.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "kiln/ir/op_table.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/gemm.h"

namespace kiln::runtime {

using KernelFn = void (*)(std::span<const Array> inputs, const Attrs& attrs, Array& out);

// The kernel of `kind`; throws kiln::Error if the op has none.
KernelFn kernel_for(OpKind kind);

// Types the call with the op table, allocates the output and runs the kernel.
Array run_op(OpKind kind, std::span<const Array> inputs, const Attrs& attrs);
// Same, with the output type already inferred by the caller.
Array run_kernel(OpKind kind, std::span<const Array> inputs, const Attrs& attrs,
                 const TensorType& out_type);

// conv2d or conv2d_backprop_input into `out` image by image: on_images(n0, n1) runs on the
// thread that computed output images [n0, n1), right after them, so that a compiled
// contraction's epilogue reads them while they are in cache (runtime/executable.cc). The
// values are the kernel's own, bit for bit. Returns false, computing nothing, where the op,
// dtype or geometry has no such form (the direct and shallow float32 convolutions have it,
// runtime/kernels/conv.cc, bf16 ones that run on them and bf16 im2col passes of several
// chunks, conv_bf16.cc): the caller then runs the kernel and its epilogue after it.
bool conv_by_images(OpKind kind, std::span<const Array> inputs, const Attrs& attrs, Array& out,
                    const std::function<void(int64_t, int64_t)>& on_images);

// A matmul operand of a bf16 product as gemm_bf16 reads it: bf16 values, or float32 values
// rounded to bf16 as they are packed (a compiled group's fused cast, ir/operand_prologue.h).
// kiln::Error naming the dtype for any other.
Bf16Operand bf16_matmul_operand(const Array& x);

}  // namespace kiln::runtime
