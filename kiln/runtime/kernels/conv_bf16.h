// How a bf16 convolution pass runs (runtime/kernels/conv_bf16.cc, whose file comment gives the
// rule): exposed for its tests.
#pragma once

#include <functional>
#include <span>

#include "kiln/ir/op_table.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/kernels/conv_geom.h"

namespace kiln::runtime {

enum class ConvBf16Plan {
  kIm2colBf16,     // bf16 im2col chunks through gemm_bf16 (no pass widens an operand)
  kWidenedDirect,  // operands widened, conv.cc's direct float32 kernel, result rounded
  kPairDirect,     // the direct kernel on bf16 pairs (VDPBF16PS, conv_direct.h), result rounded
};

// The plan of pass `kind` (Conv2D, Conv2DBackpropInput or Conv2DBackpropFilter) of geometry g
// on the kernel sets in use (gemm_kernels(), gemm_bf16_kernels()).
ConvBf16Plan conv_bf16_plan(OpKind kind, const ConvGeom& g);

// conv_by_images (kernels.h) of a bf16 conv2d or conv2d_backprop_input: with plan
// kWidenedDirect or kPairDirect the direct kernel image by image into float32 scratch (on the
// widened operands, or on bf16 pairs); with kIm2colBf16 the im2col chunks of whole images
// (forward) or groups of images (input gradient), where there are several. Each image is
// rounded into `out` right before on_images sees it (so an epilogue reads bf16 values still in
// cache; bitwise the unblocked kernel). False, computing nothing, for any other op, dtype or
// geometry (a single im2col chunk or group: one product the engine splits over the threads).
bool conv_bf16_by_images(OpKind kind, std::span<const Array> in, const Attrs& attrs, Array& out,
                         const std::function<void(int64_t, int64_t)>& on_images);

}  // namespace kiln::runtime
