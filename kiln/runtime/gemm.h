// Row-major GEMM on kiln's thread arena: C = op(A) * op(B) (or C += ...), where op(X) is X or
// its transpose.
//
// float32 runs kiln's GEMM engine (runtime/gemm_engine.h): packed operands and
// register-blocked microkernels for AVX-512 or AVX2 + FMA, chosen at run time for the CPU
// (KILN_GEMM / set_gemm_kernels override it), split into tasks on kiln's arena. float64, and
// float32 on CPUs without AVX2 (or with KILN_GEMM=eigen), run Eigen's single-threaded GEMM on
// blocks of C. Integer types use a simple exact loop (wrapping arithmetic, like numpy).
//
// Determinism. kiln's kernels compute every element of C as the same chain of float32 FMAs
// whatever the split, so gemm, gemm_serial and gemm_rows give bitwise-identical results for
// any thread count, and the avx512 and avx2 kernels agree bitwise too. Eigen's blocking depends
// on the block's size, so its split of C depends only on (m, n, k) and the machine's hardware
// thread count, never on kiln's thread setting: gemm() is bitwise identical on 1 or N threads,
// but gemm_serial() (one block) may differ from it in the last bits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kiln {
struct bfloat16;
}

namespace kiln::runtime {

// Below this many flops (2*m*n*k) a GEMM is never split (measured: see gemm.cc).
inline constexpr int64_t kGemmParallelMinFlops = int64_t{1} << 20;  // ~ 2 * 80^3

// C[m, n] = op(A) * op(B) (accumulate: C += ...). A is m x k (k x m stored if trans_a) with
// row stride lda; B is k x n (n x k stored if trans_b) with row stride ldb; C has row stride
// ldc. Any of m, n, k may be 0 (k == 0 gives zeros, or leaves C unchanged when accumulating).
// C must not overlap A or B. Throws kiln::Error on negative sizes or too-small strides.
// Instantiated for float, double, int32_t, int64_t and uint8_t.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate = false);

// Same contract, computed as one block on the calling thread (for callers that parallelise
// over many independent products themselves).
template <typename T>
void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate = false);

// How many tasks gemm() cuts an m x n x k product of T into (1: it runs on the calling thread).
template <typename T>
int64_t gemm_tasks(int64_t m, int64_t n, int64_t k, bool trans_a = false, bool trans_b = false);

// gemm() computed in blocks of whole rows of C (gemm_row_blocks of them, in parallel), calling
// on_rows(r0, r1) for each block [r0, r1) on the thread that computed it, right after the
// block's last product: an epilogue that reads the rows while they are in cache. C = op(A)
// op(B) (no accumulation). Instantiated for float and double.
template <typename T>
void gemm_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc,
               const std::function<void(int64_t, int64_t)>& on_rows);
template <typename T>
int64_t gemm_row_blocks(int64_t m, int64_t n, int64_t k, bool trans_a = false,
                        bool trans_b = false);
// Whether gemm<float>() splits the product's columns over its tasks so that each packs its own
// blocks of B (a B that outgrows L2 under fewer rows, runtime/gemm_plan.cc): faster so than in
// row blocks, so an epilogue is better run after it than by gemm_rows.
bool gemm_packs_b_by_columns(int64_t m, int64_t n, int64_t k, bool trans_a = false,
                             bool trans_b = false);

// An operand of gemm_bf16: bfloat16 values, or float32 values read as bf16, each rounded to the
// nearest bf16 (ties to even, as bfloat16::from_float and a cast do) while it is packed: the
// product of a fused cast (ir/operand_prologue.h) without a stored bf16 copy, bit for bit the
// product of the rounded values.
struct Bf16Operand {
  const void* data = nullptr;
  bool rounds_float32 = false;

  Bf16Operand(const bfloat16* values) : data(values) {}  // NOLINT(google-explicit-constructor)
  static Bf16Operand rounded(const float* values) {
    Bf16Operand o(nullptr);
    o.data = values;
    o.rounds_float32 = true;
    return o;
  }
  // The operand from `elements` further on.
  Bf16Operand offset(int64_t elements) const {
    Bf16Operand o = *this;
    o.data = static_cast<const char*>(data) + elements * (rounds_float32 ? 4 : 2);
    return o;
  }
};

// A product of bfloat16 operands into float32: C[m, n] = op(A) * op(B), A and B stored as bf16
// (gemm's layout contract) or float32 rounded to bf16 (Bf16Operand), C float32, each element
// the float32 chain of FMAs over k in k order of the widened operands. On the bf16 pair kernels
// (gemm_bf16_kernels(): TDPBF16PS where the CPU has AMX-BF16, VDPBF16PS where it has AVX512-BF16)
// the operands are packed as pairs of bf16 and the instruction adds the two products of each pair
// in k order (as documented; the AMX test on such a CPU holds it to the float32 dot-product bound,
// in any order): bitwise gemm<float> of the widened operands except where denormals occur (the
// instructions flush them) and for the sign of a zero result when k is odd or padded (zero pairs
// add +0). Elsewhere bitwise gemm<float> (or gemm_serial<float> when !parallel) of the widened
// operands: kiln's engine widens each operand as it packs it (runtime/gemm_widen.h), or on the
// float32 kernels as it copies the rows of A's panels or, for a B small enough to stay in L2,
// all of B before the tasks (GemmPlan's AMode::kRowsWidened, BMode::kWidened); Eigen's path
// widens both operands first. With on_rows (parallel only), C is
// computed in blocks of whole rows and on_rows(r0, r1) runs for each right after its last product,
// on the thread that computed it (gemm_rows' contract): the place to round the rows back to bf16
// while they are in cache. accumulate (not with on_rows): C += op(A) * op(B), each element's chain
// continuing from C.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, Bf16Operand a,
               int64_t lda, Bf16Operand b, int64_t ldb, float* c, int64_t ldc, bool parallel,
               const std::function<void(int64_t, int64_t)>* on_rows = nullptr,
               bool accumulate = false);

// The kernels of products of bf16 operands: "amx" (TDPBF16PS), "avx512bf16" (VDPBF16PS),
// "amx-emulated" / "avx512bf16-emulated" (their layouts with float32 FMAs: tests on CPUs
// without the instructions) or "float32" (the float32 kernels on widened operands).
// set_gemm_bf16_kernels("auto") (the default; KILN_GEMM_BF16=NAME at start) picks, where the
// float32 kernels are avx512, amx if the CPU has AMX-BF16 (and Linux grants this process the
// tile data), else avx512bf16 if it has AVX512-BF16 and its VDPBF16PS loop outruns the float32
// FMA loop (measured once, gemm_engine.h); else float32. kiln::Error for an unknown name or
// kernels this CPU cannot run.
std::string gemm_bf16_kernels();
void set_gemm_bf16_kernels(const std::string& name);

// The float32 GEMM kernels in use: "avx512", "avx2" (kiln's microkernels) or "eigen".
std::string gemm_kernels();
// Selects them ("auto": the best this CPU runs, the default); KILN_GEMM=NAME does the same at
// start. Throws kiln::Error for an unknown name or kernels this CPU cannot run.
void set_gemm_kernels(const std::string& name);

}  // namespace kiln::runtime
