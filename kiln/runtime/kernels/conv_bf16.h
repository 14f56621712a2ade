// How a bf16 convolution pass runs (runtime/kernels/conv_bf16.cc, whose file comment gives the
// rule): exposed for its tests.
#pragma once

#include "kiln/ir/op_table.h"
#include "kiln/runtime/kernels/conv_geom.h"

namespace kiln::runtime {

enum class ConvBf16Plan {
  kIm2colBf16,     // bf16 im2col chunks through gemm_bf16 (no pass widens an operand)
  kWidenedDirect,  // operands widened, conv.cc's direct float32 kernel, result rounded
};

// The plan of pass `kind` (Conv2D, Conv2DBackpropInput or Conv2DBackpropFilter) of geometry g
// on the kernel sets in use (gemm_kernels(), gemm_bf16_kernels()).
ConvBf16Plan conv_bf16_plan(OpKind kind, const ConvGeom& g);

}  // namespace kiln::runtime
