// Elemental emission of max_pool2d and max_pool2d_grad (NHWC) inside a kernel
// (codegen/lower_kernel.cc): the value at one index is computed from a window of the input,
// read through a callback, so whatever produces the input (a ReLU, a bias add) is computed at
// the window's elements, and a consumer reads the pool at its own index.
//
// The windows are unrolled (kh x kw straight-line elements, no inner loop), so the loop over
// channels, innermost, vectorizes. With "same" padding an element outside the image is read
// at a clamped index and never taken. Results are those of the eager kernels
// (runtime/kernels/pool.cc), bit for bit:
//   max_pool2d       the first maximum of the window in row-major order, where v replaces the
//                    running maximum m when v > m, or v is NaN and m is not (the first NaN);
//   max_pool2d_grad  dx at (h, w) = +0 plus, for each window covering (h, w) in row-major
//                    order of windows, dy of that window if its first maximum is at (h, w),
//                    else +0 (the eager kernel's scatter adds in the same order).
// The gradient recomputes each window's argmax from the pooled input (no index tensor from
// the forward pass): the ReLU gradient fused after it reads that input at the same index
// anyway, so the argmax costs loads that hit cache, not memory traffic (docs/codegen.md).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/codegen/operand_index.h"
#include "kiln/ir/graph.h"

namespace kiln::codegen {

// The window geometry of a max_pool2d / max_pool2d_grad node.
struct PoolWindow {
  int64_t h = 0, w = 0;    // input image
  int64_t kh = 0, kw = 0;  // window
  int64_t sh = 0, sw = 0;  // strides
  int64_t pt = 0, pl = 0;  // padding before (top, left)
  int64_t oh = 0, ow = 0;  // output image
  bool clipped = false;    // some window reaches outside the image ("same" padding)
};
PoolWindow pool_window(const ir::Node& n);

// The window being walked by a loop nest over a tiled max-pool gradient's output
// (lower_kernel.cc's window_nest, tiling_pool_grad below): its output row and column, and the
// index values of its sh rows and sw columns, which the nest's own indices are.
struct WindowTile {
  llvm::Value* out_row = nullptr;
  llvm::Value* out_col = nullptr;
  std::vector<llvm::Value*> rows, cols;
};

// The value of max_pool2d or max_pool2d_grad node `n` at `idx` (NHWC: batch, row, column,
// channel), reading its operand i at an index through `read(i, index)`. With `tile` (idx is one
// of its positions, and n's windows are the tile's), max_pool2d_grad reads the window at the
// tile's own index values, so that every position of a window reads the same (cached)
// elements and computes the same argmax.
using OperandRead = std::function<llvm::Value*(size_t operand, const Index& at)>;
llvm::Value* emit_pool(llvm::IRBuilder<>& b, const ir::Node& n, const Index& idx,
                       const OperandRead& read, const WindowTile* tile = nullptr);

// The strides (sh, sw) of a max_pool2d_grad in `body` whose output has shape `s` and whose
// windows tile that output exactly (window == stride, no padding, every row and column in a
// window), if there is one. A loop nest over such a value can visit each window's sh * sw
// positions together (lower_kernel.cc): each position recomputes its window's argmax from the
// same loads, which LLVM then computes once per window instead of once per position.
std::optional<std::pair<int64_t, int64_t>> tiling_pool_grad(const ir::Graph& body, const Shape& s);

}  // namespace kiln::codegen
