// kiln's float32 GEMM engine (internal to runtime/; users call runtime/gemm.h): it runs a
// GemmPlan (runtime/gemm_plan.h: every decision is there) on kiln's arena, around the
// register-blocked microkernels of gemm_microkernel.h.
//
// Execution (BLIS, transposed so that vectors run along C's rows): each task owns a block of C
// (rows x columns); per k block it runs every A panel (at most panel_rows rows, in L1) against
// every nr-column tile of a block of nc columns of B (in L2), B packed into panels of nr columns
// ([k block][panel][kc][nr], zero-padded), or read directly, or copied block by block into an
// L2 buffer by the first row panel's tiles, as the plan says. Every element of C is one FMA
// chain over k (the microkernel continues the chain from C in later k blocks), so results are
// bitwise identical for any plan, split, thread count or microkernel ISA.
#pragma once

#include <cstdint>
#include <functional>

#include "kiln/runtime/gemm_microkernel.h"
#include "kiln/runtime/gemm_plan.h"

namespace kiln::runtime::gemm_detail {

// C[m, n] (+)= op(A) op(B), row-major with leading dimensions; A is k x m stored if ta, B is
// n x k stored if tb. Sizes are > 0 (gemm.cc handles empty products). An operand stored as
// bfloat16 is given by its bits (a16 or b16, its leading dimension in elements) instead of a or
// b; its plan must have been made with GemmShape::a_bf16 / b_bf16 (it is packed, widened). A
// float32 operand read as bf16 (a_rounds / b_rounds: a fused cast, ir/operand_prologue.h) is
// given in a or b and has the same plan: each value is rounded to bf16 as it is packed.
struct SgemmArgs {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  const uint16_t* a16 = nullptr;
  const uint16_t* b16 = nullptr;
  bool a_rounds = false, b_rounds = false;
  // Set by run_gemm for pair kernels (MicroKernels::k_per_step 2): k then counts bf16 pairs and
  // this is the depth in elements.
  int64_t k_elements = 0;
  // A plan with BMode::kPrepacked: op(B) already packed in the plan's layout (pack_b_once).
  const float* packed_b = nullptr;
};

// Whether op(A) / op(B) is read as bf16 (stored as bf16, or float32 rounded as it is packed).
inline bool a_as_bf16(const SgemmArgs& g) { return g.a16 != nullptr || g.a_rounds; }
inline bool b_as_bf16(const SgemmArgs& g) { return g.b16 != nullptr || g.b_rounds; }

// Floats of op(B) packed in `plan`'s layout (k x the columns rounded up to whole nr panels).
int64_t packed_b_floats(const GemmPlan& plan);

// Packs op(B) of `args` in `plan`'s layout into `out` (packed_b_floats(plan) floats), on the
// calling thread: the buffer a kPrepacked plan reads. Float32 B only.
void pack_b_once(const MicroKernels& mk, const GemmPlan& plan, const SgemmArgs& args, float* out);

using RowsDone = std::function<void(int64_t, int64_t)>;

// Runs `plan` (made by make_gemm_plan for these args' shape on these kernels) on kiln's arena
// (one task: on the calling thread). If on_rows is set, the plan must have been made with
// shape.epilogue, and on_rows(r0, r1) runs on the thread that computed rows [r0, r1), right
// after their last product.
void run_gemm(const MicroKernels& mk, const GemmPlan& plan, const SgemmArgs& args,
              const RowsDone* on_rows = nullptr);

// The microkernels float GEMMs use: the best the CPU runs (AVX-512F, else AVX2 + FMA), or
// KILN_GEMM / set_gemm_kernels; nullptr means Eigen's GEMM (gemm.cc).
const MicroKernels* active_microkernels();

// The bf16 pair kernels products of bf16 operands use (runtime::gemm_bf16): where the float32
// kernels in use are avx512, amx where the CPU has AMX-BF16 (and Linux grants it), else
// avx512bf16 where it has AVX512-BF16 and vdpbf16ps_outruns_fma(); or KILN_GEMM_BF16 /
// set_gemm_bf16_kernels; nullptr: the float32 kernels on widened operands.
const MicroKernels* active_bf16_microkernels();

// The kernels an m x n x k product of bf16 operands runs on (runtime::gemm_bf16): the active
// pair kernels, unless a side of the product fills less than half of their tile (fewer rows
// than half the tile's mr and fewer columns than half its nr, either way round, as a plan may
// compute C^T; or a depth under half a step of k_quantum pairs), where most of each tile
// would multiply padding: then nullptr, the float32 kernels on widened operands. On Emerald
// Rapids AMX ran 6272 x 64 x 10 (ta) at 0.34x and 64 x 10 x 6272 (tb) at 0.59x the float32
// kernels' rate, products with every side at least 32 at 1.2-6x.
const MicroKernels* bf16_kernels_for(int64_t m, int64_t n, int64_t k);

// That rule for pair kernel set `pairs`: whether every side of an m x n x k product fills at
// least half of its tile (true: the product runs on `pairs`).
bool pair_tiles_fill(const MicroKernels& pairs, int64_t m, int64_t n, int64_t k);

// Whether VDPBF16PS outruns the float32 FMAs on this CPU (false where it lacks AVX512-BF16 or
// the float32 kernels in use are not avx512): the two kernel sets' loops on one core, measured
// once per process (about 30 ms; logged at info level). A VDPBF16PS does twice an FMA's
// multiply-adds, but Intel's cores issue it at a quarter of their FMA rate (Emerald Rapids: 80
// against 160 GFLOP/s), where widening the operands for the float32 kernels is twice as fast.
// Either gives the same values (each element one float32 chain in k order), up to the
// instruction's flushing of denormals.
bool vdpbf16ps_outruns_fma();
// What that measurement found ("" before it ran), for the plan printer.
std::string vdpbf16ps_choice_note();

}  // namespace kiln::runtime::gemm_detail
