// Packing bf16 operands into the GEMM engine's panels (internal to runtime/: gemm_engine.cc
// calls these where an operand is given as bf16, SgemmArgs::a16 / b16). Two forms, by the
// kernel set (gemm_microkernel.h):
//  - the float32 kernels: each value widened to float32 (exact, gemm_widen.h), the panels those
//    of a float32 operand;
//  - the pair kernels (SgemmArgs::k_elements > 0, k counting pairs): two bf16 of consecutive k
//    per 32-bit element in the set's half order (PairLayout kDot, kTiles), zero pairs past the
//    end of k; AMX's A panels in tiles of 32 rows x 16 pairs, its B panels in tiles of 16 pairs x
//    16 columns (gemm_amx_tile.h).
// A float32 operand read as bf16 (SgemmArgs::a_rounds / b_rounds) by the pair kernels is packed
// the same way: the block of it a packer reads is first rounded to bf16 (nearest even, as a cast
// does) into the calling thread's scratch, which the packer then reads as a bf16 operand. (The
// float32 kernels pack it as a float32 operand and round the packed panel: gemm_pack.cc.)
// Block and panel arguments are in the engine's units (k0, kc: elements or pairs).
#pragma once

#include <cstdint>

#include "kiln/runtime/gemm_engine.h"

namespace kiln::runtime::gemm_detail {

// Columns [j0, j0 + cols) of op(B), k block [k0, k0 + kc), as the panel dst[p * nr + j]
// (AMX: dst[tiles_b_offset(p, j)]; zeros in columns cols .. nr).
void pack_bf16_b_panel(const MicroKernels& mk, const SgemmArgs& g, int64_t j0, int64_t cols,
                       int64_t nr, int64_t k0, int64_t kc, float* dst);

// Row p of k block [k0, k0 + kc) of a B that is not transposed, into every panel of the packed
// block `block` (panel i at block + i * kc * nr, its row p as in pack_bf16_b_panel; zeros past
// column n).
void pack_bf16_b_row(const MicroKernels& mk, const SgemmArgs& g, int64_t nr, int64_t k0, int64_t p,
                     int64_t kc, float* block);

// Rows [r0, r0 + h) of op(A), k block [k0, k0 + kc), as the engine's packed A panel (AMX: its
// tile panel).
void pack_bf16_a_panel(const MicroKernels& mk, const SgemmArgs& g, int64_t r0, int64_t h,
                       int64_t k0, int64_t kc, float* out);

}  // namespace kiln::runtime::gemm_detail
