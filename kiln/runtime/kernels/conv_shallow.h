// Direct convolutions of shallow windows (ConvGeom::shallow(): kh * kw * c <= kShallowDepth, a
// first layer over one or three channels): the forward pass and the filter gradient without an
// im2col matrix. Each output image row ("line": n, oy) reads kh zero-padded input rows
// ("strips": each input row copied once, in whole runs, and shared by the lines that read it)
// and keeps a block of outputs in 12 vector registers: pixels x 16 channels forward, taps x 16
// channels for the filter gradient (12 of them with AVX-512, 6 with AVX2). At such depths the
// im2col + GEMM path was bound by copying 3-value runs into its patches. A window over one
// channel with unit column stride and dilation and 3 or 5 taps per kernel row (a grayscale first
// layer) has kernels of its own that broadcast each strip value once for the up to kw
// (pixel, tap) pairs that read it, instead of once per FMA.
//
// Arithmetic: each output is one chain of fused multiply-adds over the taps in (kh, kw, c)
// order from zero, like the GEMM engine's element of the im2col product
// (runtime/gemm_microkernel.h); padding taps multiply zeros, as im2col's do. The filter gradient
// sums each range of lines in chunks fixed by the geometry, so results never depend on the
// thread count. The FMAs are explicit (vector_block.h's V::fma: an FMA instruction where the
// build's ISA has one, KILN_NATIVE; a build for a CPU without FMA multiplies and adds).
#pragma once

#include <cstdint>
#include <functional>

#include "kiln/ir/bfloat16.h"

#include "kiln/runtime/kernels/conv_geom.h"

namespace kiln::runtime {

// y's output lines [l0, l1) (line l: image l / oh, row l % oh; all ow pixels, all channels).
// Y: T, or bfloat16 for a float32 T (each output's chain rounded once as it is stored: a bf16
// convolution on the float32 kernels, runtime/kernels/conv_bf16.cc).
template <typename T, typename Y = T>
void shallow_conv_forward(const T* x, const T* w, Y* y, const ConvGeom& g, int64_t l0, int64_t l1);

// dw = (accumulate ? dw : 0) + the filter gradient of output lines [l0, l1) (their dy rows times
// their input windows), summed in chunks of lines fixed by the geometry. DY: T, or bfloat16 for
// a float32 T (dy widened as it is loaded, exact).
template <typename T, typename DY = T>
void shallow_conv_filter_gradient(const T* x, const DY* dy, T* dw, const ConvGeom& g, int64_t l0,
                                  int64_t l1, bool accumulate);

// The whole passes of a bf16 convolution's shallow window on the float32 kernels (conv.cc,
// split over the threads as its float32 passes are): the forward pass of float32 operands
// (bf16 values widened), each output rounded to bf16 as it is stored, handing each image to
// on_images (when set) right after it; and the filter gradient with dy read as bf16, in float32.
// The bits of the float32 passes on the widened operands, the forward pass rounded once.
void shallow_conv_forward_rounded(const float* x, const float* w, bfloat16* y, const ConvGeom& g,
                                  const std::function<void(int64_t, int64_t)>* on_images);
void shallow_conv_backprop_filter_bf16_dy(const float* x, const bfloat16* dy, float* dw,
                                          const ConvGeom& g);

}  // namespace kiln::runtime
