// Column sums split by their leading axis: the pass "split-reductions".
//
// sum(x, axes = every axis but the last) of a float32 or bf16 x of rank >= 3, [n, ..., c] (a
// convolution's or a sequence layer's bias gradient: dy summed over the batch and the pixels or
// positions), reduces all of x's rows into one row of c. A kernel that does so runs serially
// (codegen/kernel_plan.h: a reduction across the leading axis walks every row on one thread),
// and the ops computing x go into a kernel of their own that stores x for it. The pass computes
// it in two steps instead:
//   partial = sum(reshape(x, [n, R / n, c]), axes=[1])   [n, c]: one row per leading index
//   y       = sum(partial, axes=[0])                     [c]: n rows
// (keepdims: y reshaped to the sum's shape). The first step keeps x's leading axis, so it runs
// by rows, in parallel, and joins the kernel whose ops compute x (fusion's row rule: the same
// leading dimension), summing each row while it is computed; the second is small. A bf16 x is
// summed as float32 in both steps (cast before the first, the result cast back), as a bf16 sum
// accumulates in float32 and rounds once. The parts are x's leading indices, fixed by the
// shape: the results never depend on the thread count. Each output is then the sum of its
// parts' sums in order, each a chain over its part's rows in order: another order than one
// chain over all rows, so values may change in the last bits, within the bound of float32
// summation in any order that the reference executor's sums are held to. Taken where each part
// has at least kMinPartRows rows and x at least kMinSplitElements elements (smaller sums cost
// less than a kernel launch). Where x is a contraction's epilogue (a convolution's input
// gradient followed by the pooling and ReLU gradients), the first sum joins that epilogue too
// (fusion rule 5 lets a contraction's group take such a per-row sum), summing each image right
// after the product computed it. On a 2-core Xeon VM (Emerald Rapids class), against the same
// build without the pass (`kiln_bench --benchmark_filter='PassAB/.*/split-reductions'`, two
// runs): the CNN step 0.935-0.94x, its bf16 step 0.96-0.98x, the transformer block
// 0.96-0.98x (bf16 0.97-0.98x); the CNN's two bias gradients had been serial kernels of 112
// and 53 us.
//
// Never splits another reduction (mean, max, ...), a sum over other axes, one of another dtype,
// or a rank-2 x (its leading axis is the rows it sums: an MLP's bias gradient); recurses into
// cond / while sub-graphs.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/passes/pass.h"

namespace kiln::passes {

inline constexpr int64_t kMinPartRows = 16;
inline constexpr int64_t kMinSplitElements = int64_t{1} << 16;

// The parts a column sum of x is split into: x's leading dimension, or 0 (not split).
int64_t split_parts(const Shape& x);

std::unique_ptr<Pass> make_split_reductions();

}  // namespace kiln::passes
