// Direct float32 convolutions on the GEMM engine's microkernels (an implicit GEMM): the forward
// pass, the filter gradient, and the input gradient of a stride-1 convolution, without an im2col
// matrix.
//
// A band of output lines of one image copies the input rows it reads once into a zero-padded
// buffer (padding columns and rows outside the image are zeros). A tile of up to mr pixels of
// one output line is then the GEMM tile whose A row i is pixel i's window, read directly: the
// window's kernel rows are runs of kw * C consecutive floats of the buffer, one kernel row of
// the buffer apart (MicroTile's segmented k), and pixel i + 1's window starts sw * C floats after
// pixel i's. B is the filter as its K x O matrix (HWIO: rows in (kh, kw, c) order), read directly.
//
// The input gradient of a stride-1 convolution is such a forward convolution too: of dy, padded
// by (kh-1)*dh - ph rows and (kw-1)*dw - pw columns before, with the filter turned by 180
// degrees and its in/out channels swapped (a K' x C matrix of rows (kh, kw, o), built per call).
// That replaces the product with W^T and the col2im sum of its kh * kw overlapping terms per
// input value by one FMA chain.
//
// The filter gradient dW = window^T dy is a product whose A is read transposed, directly
// (MicroTile::lda_t): a tile's rows are up to mr consecutive (kw, c) taps of one kernel row, its
// k steps the band's pixels (a run per line, sw * C floats apart), B the band's dy rows.
//
// Arithmetic: every output is the microkernel's one FMA chain over its window in (kh, kw, c)
// order (gemm_microkernel.h: the chain continues across k blocks), so the forward pass is
// bitwise the GEMM of the im2col matrix (conv.cc's path), whatever the blocking, on any number
// of threads and with either kernel set; the
// input gradient's chain runs over (kh, kw, o) of the turned filter instead of a product and a
// sum, so it differs from conv.cc's in the last bits, and is equally independent of threads.
// The filter gradient sums fixed ranges of bands into partials (each one chain continued band
// by band) that are then added in order, like conv.cc's chunks: independent of threads.
//
// bf16 operands (runtime/kernels/conv_bf16.cc) run the forward pass and the stride-1 input
// gradient the same way on the VDPBF16PS pair kernels (gemm_microkernel.h, the kDot layout),
// where the summed channels (c forward, o for the input gradient) are even: two consecutive
// channels of a pixel are one 32-bit pair of k, so the band buffer holds the input's pairs as
// they are (halves swapped as they are copied: element k in the upper half), the filter is
// packed as pairs of its rows, and each tile step is one VDPBF16PS per vector. The chain of
// every output is the float32 kernels' chain over the widened operands in the same k order
// ((kh, kw, c), or (kh, kw, o) of the turned filter): the bits of the float32 direct kernel
// (and for the forward pass, of the im2col product), denormals aside (VDPBF16PS flushes them).
#pragma once

#include <cstdint>
#include <functional>

#include "kiln/ir/bfloat16.h"

#include "kiln/runtime/kernels/conv_geom.h"

namespace kiln::runtime {

// Whether direct_conv_forward / direct_conv_backprop_input take this float32 convolution: the
// engine's microkernels are in use, kernel columns are not dilated (dw == 1), lines are at least
// half a tile of pixels (shorter lines would leave the tiles' FMA chains too few; im2col's tiles
// run across lines), and the window is neither pointwise nor shallow (conv.cc and
// conv_shallow.h have their own paths). The input gradient also needs strides of 1; the filter
// gradient needs a kernel row of at least half a tile of taps (kw * c >= mr / 2) instead of
// long lines.
bool direct_conv_forward_applies(const ConvGeom& g);
bool direct_conv_backprop_input_applies(const ConvGeom& g);
bool direct_conv_backprop_filter_applies(const ConvGeom& g);
// The same for bf16 operands on the pair kernels in use (gemm_bf16_kernels(): avx512bf16 or its
// emulation; not the AMX sets, whose A panels are tiles), with an even channel count.
bool direct_conv_forward_pairs_applies(const ConvGeom& g);
bool direct_conv_backprop_input_pairs_applies(const ConvGeom& g);
// The filter gradient's k is the pixels: on pairs of consecutive pixels of a line (an even
// count of pixels per output line).
bool direct_conv_backprop_filter_pairs_applies(const ConvGeom& g);

// Called with [n0, n1) on the thread that computed output images n0 .. n1 - 1, right after
// them (runtime/kernels.h, conv_by_images).
using ImagesDone = std::function<void(int64_t, int64_t)>;

// y[n, oh, ow, o] = the convolution of x [n, h, w, c] with w [kh, kw, c, o] (parallel).
void direct_conv_forward(const float* x, const float* w, float* y, const ConvGeom& g,
                         const ImagesDone* on_images = nullptr);

// dx[n, h, w, c] = the input gradient of dy [n, oh, ow, o] through w [kh, kw, c, o] (parallel).
void direct_conv_backprop_input(const float* w, const float* dy, float* dx, const ConvGeom& g,
                                const ImagesDone* on_images = nullptr);

// The two passes on bf16 operands, float32 results (kiln::Error where *_pairs_applies is false).
void direct_conv_forward_pairs(const bfloat16* x, const bfloat16* w, float* y, const ConvGeom& g,
                               const ImagesDone* on_images = nullptr);
void direct_conv_backprop_input_pairs(const bfloat16* w, const bfloat16* dy, float* dx,
                                      const ConvGeom& g, const ImagesDone* on_images = nullptr);
void direct_conv_backprop_filter_pairs(const bfloat16* x, const bfloat16* dy, float* dw,
                                       const ConvGeom& g);

// dw[kh, kw, c, o] = the filter gradient of x [n, h, w, c] and dy [n, oh, ow, o] (parallel).
void direct_conv_backprop_filter(const float* x, const float* dy, float* dw, const ConvGeom& g);

}  // namespace kiln::runtime
