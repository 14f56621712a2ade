// Packing float32 operands into the GEMM engine's panels (internal to runtime/: the engine,
// gemm_engine.cc, packs as its plan says; bf16 operands are widened as they are packed,
// gemm_pack_bf16.h). Packed B: [k block][panel of nr columns][kc][nr], zero-padded past n; a
// packed A panel: out[p * h + i] for its h rows.
#pragma once

#include <cstdint>

#include "kiln/runtime/gemm_engine.h"

namespace kiln::runtime::gemm_detail {

// Packs columns [panel * nr, panel * nr + nr) of op(B) in k block q into `out` (the whole
// packed B, n_pad = n rounded up to nr), zero-padding columns >= n.
void pack_b_block(const MicroKernels& mk, int64_t nr, const SgemmArgs& g, const KBlocks& kb,
                  int64_t panel, int64_t q, int64_t n_pad, float* out);

// Packs rows [p0, p1) of k block q of a B that is not transposed, into every panel of `out`.
void pack_b_rows(const MicroKernels& mk, int64_t nr, const SgemmArgs& g, const KBlocks& kb,
                 int64_t q, int64_t p0, int64_t p1, int64_t n_pad, float* out);

// Packs columns [j0, j1) (j0 a multiple of nr) of rows [k0, k0 + kc) of a float32 B that is
// not transposed into `dst` as the panels of one block: dst[(j / nr - j0 / nr) * kc * nr +
// p * nr + j % nr], zero-padded past n (BMode::kPackedBlocks' block buffer; the float32
// kernels: a B rounded to bf16 is rounded in place). Row by row, each read once, sequentially.
void pack_b_columns(int64_t nr, const SgemmArgs& g, int64_t k0, int64_t kc, int64_t j0, int64_t j1,
                    float* dst);

// Rows [p0, p1) of a bf16 B (stored as bf16, or float32 rounded to bf16), not transposed, as
// float32 rows out[p * n + j] (BMode::kWidened).
void widen_b_rows(const SgemmArgs& g, int64_t p0, int64_t p1, float* out);

// Rows [r0, r0 + h) of a bf16 A (stored as bf16, or float32 rounded to bf16), not transposed,
// columns [k0, k0 + kc), as float32 rows out[i * kc + p] (AMode::kRowsWidened).
void widen_a_rows(const SgemmArgs& g, int64_t r0, int64_t h, int64_t k0, int64_t kc, float* out);

// Packs rows [r0, r0 + h) of op(A), columns [k0, k0 + kc), as out[p * h + i].
void pack_a_panel(const MicroKernels& mk, const SgemmArgs& g, int64_t r0, int64_t h, int64_t k0,
                  int64_t kc, float* out);

}  // namespace kiln::runtime::gemm_detail
