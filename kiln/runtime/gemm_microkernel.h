// The float32 GEMM microkernels: one register-blocked tile C[rows, cols] (+)= A_panel * B_rows
// per call, with broadcast FMAs (the BLIS structure, vectorised along C's rows). Each ISA has
// several tile shapes (12 x 32, 14 x 32, 8 x 48, 6 x 64 on AVX-512; 6 x 16, 4 x 24 on AVX2);
// a GEMM plan picks one (runtime/gemm_plan.h).
//
// Contract of MicroKernel::tile(t):
//   for i < t.rows, j < t.cols:  acc = t.accumulate ? C[i][j] : 0
//                                for p < t.kc: acc = fma(a(i, p), b[p][j], acc)
//                                C[i][j] = acc
// with a(i, p) = t.a[p * rows + i] (a packed A panel: kc steps of `rows` floats), or, if
// t.lda > 0, t.a[i * t.lda + p] (A's rows read directly), or, if t.lda_t > 0,
// t.a[p * t.lda_t + i] (a stored A^T's rows read directly), and b[p] = t.b + p * t.ldb. With
// t.seg_len > 0 A's k steps come in runs (a direct convolution reads its window's rows directly,
// runtime/kernels/conv_direct.h): the first run is t.seg_first steps, every later one t.seg_len,
// and after each run A's position moves t.seg_jump floats beyond where the run's steps took it
// (a(i, p) above then holds within a run, from the run's start).
//
// A product of depth k computed in k blocks calls the tile once per block in k order, the
// first with accumulate = 0 (or 1 to add to C), the later ones with 1: the accumulator then
// starts from C, so every element of C is ONE chain of float32 FMAs over all of k, in k order,
// whatever the k blocks, the tile shape, rows, cols, thread count or ISA. This is why a GEMM
// plan (block sizes, tile shape, grid) changes speed only, never a bit of the result
// (tests/runtime/gemm_test.cc runs every candidate plan).
//
// Reads b[p][0 .. cols) only, unless t.b_padded (packed B: rows of nr floats are readable);
// writes C[i][0 .. cols) only. If t.b_copy is set, the tile also copies the B rows it reads:
// b_copy[p * b_copy_ld + j] = b[p][j] for j < cols, zeros up to the next whole vector (a block of B
// packed by its first row panel's tiles, for the later panels to read; gemm_engine.cc). Every
// tile of more than one vector of columns prefetches B's row t.b_ahead rows ahead of the one it
// reads (a tile of one vector prefetches no operand: gemm_tile_kernel.h), and every tile the rows
// of the next tile's C (t.c_next) when set; prefetches never fault, so they may point past the
// operands.
//
// The kernels live in files compiled for their ISA (gemm_microkernel_avx512.cc, _avx2.cc) that
// include nothing but intrinsics and this header, so no inline function shared with other
// files is compiled for an ISA the CPU may lack. gemm_engine.cc picks the set at run time.
#pragma once

#include <cstdint>

namespace kiln::runtime::gemm_detail {

// How a kernel set's packed panels hold bf16 operands (MicroKernels::pair_layout).
enum class PairLayout : uint8_t {
  kNone,   // float32 panels (bf16 operands widened as they are packed)
  kDot,    // VDPBF16PS pairs: element k in the upper half, A panels as float32 ones
  kTiles,  // AMX pairs: element k in the lower half, A in tiles of 16 pairs (gemm_amx_tile.h)
};

// Rows of one AMX tile (kTiles: a 32-row panel is two of them; a tile load reads all its rows).
inline constexpr int64_t kAmxTileRows = 16;

// Where pair q (of a k block), column j of a packed B panel of the kTiles layout lies
// (gemm_amx_tile.h): per 16 pairs, the panel's two 16-column halves, each 16 rows of 16.
constexpr int64_t tiles_b_offset(int64_t q, int64_t j) {
  return (q / 16) * 512 + (j / 16) * 256 + (q % 16) * 16 + j % 16;
}

struct MicroTile {
  int64_t kc = 0;            // depth of the k block (>= 1)
  const float* a = nullptr;  // packed panel a[p * rows + i], or rows a[i * lda + p]
  int64_t lda = 0;           // 0: packed (or lda_t)
  int64_t lda_t = 0;         // > 0: A^T's rows read directly, a(i, p) = a[p * lda_t + i]
  const float* b = nullptr;  // row p of the k block at b + p * ldb
  int64_t ldb = 0;
  float* c = nullptr;  // row i at c + i * ldc
  int64_t ldc = 0;
  int64_t seg_len = 0;            // 0: one run of kc steps
  int64_t seg_first = 0;          // steps of the first run (when seg_len > 0)
  int64_t seg_jump = 0;           // floats A moves after each run, beyond the run's own steps
  float* b_copy = nullptr;        // set: B's rows are also copied here, b_copy_ld apart
  int64_t b_copy_ld = 0;          // floats between copied rows (the shape's nr)
  const float* c_next = nullptr;  // set: the next tile's C (same rows and ldc), prefetched
  int32_t b_ahead = 8;            // rows of B prefetched into L1 ahead of the one read
  int32_t rows = 0;               // 1 .. mr
  int32_t cols = 0;               // 1 .. nr
  int32_t accumulate = 0;         // 1: the chain starts from C; 0: from zero
  int32_t b_padded = 0;           // 1: b's rows are readable up to nr floats
};

using TileFn = void (*)(const MicroTile& t);

// One tile shape: at most mr rows and nr columns (a whole number of vectors) per call.
struct MicroKernel {
  const char* name;  // "12x32"
  int32_t mr, nr;
  // Runs any tile of this shape (t.rows <= mr, t.cols <= nr).
  TileFn tile;
  // The function tile() dispatches to for tiles of `rows` x `cols`, A packed (t.lda == 0) or
  // not, copying B or not: callers that run many tiles of one kind resolve it once.
  TileFn (*select)(int32_t rows, int32_t cols, bool packed_a, bool copy_b);
};

inline constexpr int kMaxTileShapes = 4;

struct MicroKernels {
  const char* isa;  // "avx512" or "avx2": the name KILN_GEMM takes
  int32_t lanes;    // floats per vector
  // The tile shapes this ISA offers; shapes[0] is the one a plan uses unless the machine's
  // tuned table says otherwise. Packed B panels are nr floats wide for the shape in use.
  MicroKernel shapes[kMaxTileShapes];
  int32_t shape_count;
  // The machine's FMA peak for this ISA: `iterations` rounds of independent vector FMAs
  // (enough accumulators to cover the FMA latency), fma_loop_flops per round; returns a sum
  // of the accumulators so the loop is not optimised away (runtime/machine_peak.h).
  float (*fma_loop)(int64_t iterations);
  int32_t fma_loop_flops;
  // Transposing copy for packing: dst[p * dst_ld + i] = src[i * src_ld + p] for i < rows,
  // p < cols (a panel of A from its rows, or of B from the rows of a stored B^T).
  void (*transpose)(const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                    int64_t dst_ld);
  // The same from bf16 bits, widening each value to float32 (exact): a panel of a bf16 operand
  // (runtime/gemm_widen.h). (The AMX sets, gemm_amx_tile.h, have the same two copies.)
  void (*widen_transpose)(const uint16_t* src, int64_t src_ld, int64_t rows, int64_t cols,
                          float* dst, int64_t dst_ld);
  // 1: the float32 kernels above. 2: bf16 dot-product kernels (VDPBF16PS): every 32-bit element
  // of a packed panel is a PAIR of bf16 values of consecutive k, element k in its upper half
  // and k + 1 in its lower half (zero past the end of k), and fma(a, b, c) adds both products
  // of each lane's pairs to c, the upper (k) first, each rounded (the products of two bf16 are
  // exact in float32), so each element of C is the float32 chain over k in k order, as the
  // float32 kernels compute it from the widened operands (runtime/gemm_bf16_kernels.cc). The
  // tile contract holds with kc counting pairs.
  int32_t k_per_step = 1;
  // kTiles: the AMX layout instead (gemm_amx_tile.h): the first element of a pair in the lower
  // half, A panels in tiles of 16 pairs x 32 rows, B panels in tiles of 16 pairs x 16 columns,
  // k padded with zero pairs to whole tiles.
  PairLayout pair_layout = PairLayout::kNone;
  // Sets with state beside the vector registers (AMX: the tile configuration). begin_tiles
  // prepares the calling thread for this set's tiles (AMX: LDTILECFG, about 100 ns on Emerald
  // Rapids, a third of a 32 x 32 x 176-pair tile); the engine calls it at the start of each
  // task, before its first tile, and end_tiles (TILERELEASE) after its last, so nothing else
  // runs on the thread in between. Null where a set needs neither.
  void (*begin_tiles)() = nullptr;
  void (*end_tiles)() = nullptr;
  // kTiles sets: row q (a pair of k) of the 32-column panels of a packed B block that hold
  // columns [0, cols), `panel_floats` apart from `block`, from two rows of bf16 read from column
  // 0: element k (`first`) and k + 1 (`second`, null past the end of k: zero halves), in the
  // layout of tiles_b_offset, zeros past `cols`. Null: the portable packer (gemm_pack_bf16.cc).
  void (*tiles_b_row)(const uint16_t* first, const uint16_t* second, int64_t cols,
                      int64_t panel_floats, int64_t q, float* block) = nullptr;
  // kTiles sets: the A panel (gemm_amx_tile.h) of `rows` (<= 32) rows and `pairs` (a multiple
  // of 16) pairs of k from a stored A^T: element e of row i at at[e * ld + i], for e <
  // `elements` (zeros past it and past `rows`). Null: the portable packer does it.
  void (*tiles_a_from_columns)(const uint16_t* at, int64_t ld, int64_t rows, int64_t elements,
                               int64_t pairs, float* out) = nullptr;
  // kTiles sets: `count` whole mr x nr blocks of one packed A panel side by side (t describes
  // the first: block j's C at t.c + j * nr, its packed B panel at t.b + j * b_step), each
  // block's products overlapping its neighbours' stores and loads of C; bitwise the tile
  // function's results. Null: the engine calls the tile function per block.
  void (*tile_row)(const MicroTile& t, int64_t count, int64_t b_step) = nullptr;

  // Pairs of k a k block's depth is a multiple of (16 for AMX tiles, else 1).
  int64_t k_quantum() const { return pair_layout == PairLayout::kTiles ? 16 : 1; }
  // The depth the tiles step through for a product of depth k: k, or its pairs (AMX: rounded up
  // to whole tiles).
  int64_t steps(int64_t k) const {
    const int64_t pairs = (k + k_per_step - 1) / k_per_step;
    return (pairs + k_quantum() - 1) / k_quantum() * k_quantum();
  }

  // The shape named `name` ("12x32"), or nullptr.
  const MicroKernel* find(const char* name) const;
  // The widest shape's nr (packed buffers are sized for it) and the most rows of any shape.
  int32_t max_nr() const;
  int32_t max_mr() const;
};

// The AVX transposing copies (8 x 8 blocks), shared by both kernel sets (every AVX-512F CPU has
// AVX2); defined in gemm_microkernel_avx2.cc.
void transpose_avx2(const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst,
                    int64_t dst_ld);
void widen_transpose_avx2(const uint16_t* src, int64_t src_ld, int64_t rows, int64_t cols,
                          float* dst, int64_t dst_ld);

// The kernel tables; each may be called only on a CPU with its ISA (gemm_engine.cc checks).
const MicroKernels& avx512_microkernels();  // AVX-512F: 12x32, 14x32, 8x48, 6x64
const MicroKernels& avx2_microkernels();    // AVX2 + FMA: 6x16, 4x24
// bf16 pairs (k_per_step 2): VDPBF16PS (AVX512-BF16), 12x32 and 8x48; and its emulation on
// AVX-512F (two float32 FMAs per instruction, in the order above; denormals are not flushed as
// VDPBF16PS flushes them), which tests the pair layout and the engine on CPUs without the
// instruction (KILN_GEMM_BF16=avx512bf16-emulated).
const MicroKernels& avx512bf16_microkernels();
const MicroKernels& avx512bf16_emulated_microkernels();
// AMX-BF16 (TDPBF16PS), one 32x32 shape, and its emulation (scalar tile registers: tests of the
// AMX layout on any AVX2 CPU, KILN_GEMM_BF16=amx-emulated; denormals not flushed).
const MicroKernels& amx_microkernels();
const MicroKernels& amx_emulated_microkernels();

// The pair packers' transposing copy (AVX2): dst[p * dst_ld + i] = the pair of
// src[i * src_ld + 2p] (the upper half if first_high, else the lower) and src[i * src_ld + 2p + 1]
// (the other half; 0 when 2p + 1 == elements) for i < rows, p < ceil(elements / 2).
void pair_transpose_avx2(const uint16_t* src, int64_t src_ld, int64_t rows, int64_t elements,
                         float* dst, int64_t dst_ld, bool first_high);

// The same from an operand stored with k along its rows (a B, or a stored A^T): dst[p * dst_ld +
// j] = the pair of src[2p * src_ld + j] and src[(2p + 1) * src_ld + j] (0 when 2p + 1 ==
// elements) for j < cols, p < ceil(elements / 2); the pair's first element in the upper half if
// first_high, else in the lower. Reads nothing past column `cols` of any row.
void pair_interleave_avx2(const uint16_t* src, int64_t src_ld, int64_t cols, int64_t elements,
                          float* dst, int64_t dst_ld, bool first_high);

}  // namespace kiln::runtime::gemm_detail
