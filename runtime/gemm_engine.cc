// The float32 GEMM engine: packing, blocking and tasks around the microkernels (contract and
// blocking scheme: gemm_engine.h).
#include "kiln/runtime/gemm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <utility>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime::gemm_detail {
namespace {

// Below this many flops a product runs as one task (2^20, ~ 2 * 80^3: measured on Eigen's
// GEMM, docs/benchmarks.md), and tasks carry at least kMinTaskFlops.
constexpr double kParallelMinFlops = double(int64_t{1} << 20);
constexpr double kMinTaskFlops = double(int64_t{1} << 19);
// The fewest rows a row block is given to make the tasks a multiple of the thread count.
constexpr int64_t kMinRoundedRows = 4;
// B is packed when its rows are C's columns (transposed), or when at least this many rows of
// C reuse each packed panel (measured: docs/benchmarks.md, "GEMM engine").
constexpr int64_t kPackBMinRows = 192;
// A task's block of C at most this many columns wide reads A in place (its panel's rows stay
// in L1 across the block's tiles) instead of packing it (measured: docs/benchmarks.md).
constexpr int64_t kInPlaceAMaxCols = 128;
// A B read in place larger than this is packed block by block (run_block).
constexpr int64_t kPackBBlocksMinBytes = int64_t{4} << 20;

// Packs columns [j0, j0 + nr) of op(B) in k block q, zero-padding columns >= n.
void pack_b_block(const MicroKernels& mk, const SgemmArgs& g, const KBlocks& kb, int64_t panel,
                  int64_t q, int64_t n_pad, float* out) {
  const int64_t nr = mk.nr;
  const int64_t j0 = panel * nr, cols = std::min(nr, g.n - j0);
  const int64_t k0 = kb.begin(q), kc = kb.depth(q, g.k);
  float* dst = out + k0 * n_pad + panel * kc * nr;
  if (!g.tb) {
    for (int64_t p = 0; p < kc; ++p) {
      std::memcpy(dst + p * nr, g.b + (k0 + p) * g.ldb + j0, size_t(cols) * sizeof(float));
      std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
    }
  } else {
    mk.transpose(g.b + j0 * g.ldb + k0, g.ldb, cols, kc, dst, nr);
    if (cols < nr)
      for (int64_t p = 0; p < kc; ++p) std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
  }
}

// Packs columns [j0, j0 + nr) of op(B), every k block.
void pack_b_panel(const MicroKernels& mk, const SgemmArgs& g, const KBlocks& kb, int64_t panel,
                  int64_t n_pad, float* out) {
  for (int64_t q = 0; q < kb.count; ++q) pack_b_block(mk, g, kb, panel, q, n_pad, out);
}

// out[p * H + i] = src[p * ld + i] for p < kc, i < H: copies of a compile-time size, which the
// compiler inlines (a call to memcpy per 48 bytes cost a quarter of a filter gradient).
template <int H>
void copy_panel(const float* src, int64_t ld, int64_t kc, float* out) {
  for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * H, src + p * ld, H * sizeof(float));
}

template <int... H>
void copy_panel_of(int64_t h, const float* src, int64_t ld, int64_t kc, float* out,
                   std::integer_sequence<int, H...>) {
  bool done = false;
  ((h == H + 1 ? (copy_panel<H + 1>(src, ld, kc, out), done = true) : false), ...);
  if (!done)
    for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * h, src + p * ld, size_t(h) * 4);
}

// Packs rows [r0, r0 + h) of op(A), columns [k0, k0 + kc), as out[p * h + i].
void pack_a_panel(const MicroKernels& mk, const SgemmArgs& g, int64_t r0, int64_t h, int64_t k0,
                  int64_t kc, float* out) {
  if (g.ta)
    copy_panel_of(h, g.a + k0 * g.lda + r0, g.lda, kc, out, std::make_integer_sequence<int, 16>{});
  else
    mk.transpose(g.a + r0 * g.lda + k0, g.lda, h, kc, out, h);
}

// Prefetches the line at p into L2. An asm statement, which the compiler keeps: GCC counts
// __builtin_prefetch as free of side effects, judges a function that only prefetches pure, and
// drops its calls (SlicedPrefetch::slice was compiled away so).
inline void prefetch_l2(const float* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*p));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// A region of `rows` rows of `width` floats, `ld` floats apart, prefetched into L2 a slice at a
// time while tiles run (slice s of `slices` after the s-th tile), so that the next step that
// reads it (a copy, a packing) finds it in cache, without a burst of requests.
struct SlicedPrefetch {
  const float* base = nullptr;  // null: nothing to prefetch
  int64_t ld = 0, rows = 0, width = 0, slices = 1;
  void slice(int64_t s) const {
    if (base == nullptr) return;
    for (int64_t p = rows * s / slices; p < rows * (s + 1) / slices; ++p) {
      const float* row = base + p * ld;
      const int64_t skew = int64_t(reinterpret_cast<uintptr_t>(row) & 63) / 4;
      for (int64_t l = 0; l < (skew + width + 15) / 16; ++l) prefetch_l2(row - skew + 16 * l);
    }
  }
};

// One task: C[r0:r1, c0:c1] for every k block. `packed_b` is op(B) packed (or null). A task
// at most kInPlaceAMaxCols wide reads each row of A a few times at most, from L1: the
// microkernels read A in place then instead of packing it (A's rows, or a transposed A's rows:
// a panel's values for one k are contiguous there too, as in a packed panel; a convolution's
// filter gradient is such a product).
void run_block(const MicroKernels& mk, const SgemmArgs& g, const KBlocks& kb, const float* packed_b,
               int64_t n_pad, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const bool pack_a = c1 - c0 > kInPlaceAMaxCols;
  const APanels panels(r0, r1 - r0, !pack_a && !g.ta ? mk.mr_in_place : mk.mr);
  // B read in place but too large to stay in cache (a weight gradient's k x n activations):
  // each kc x kNc/2 block is copied into an L2 buffer by the first row panel's tiles, which
  // read it in place (prefetching rows ahead) and store what they load; the later panels read
  // the copy (nr-float rows instead of B's stride, where every row is a page of its own), while
  // the next block's rows are prefetched (half-width blocks, so that the block, the next one
  // and the A panels fit L2 together).
  const bool pack_b_blocks = packed_b == nullptr && !g.tb && panels.count > 1 &&
                             g.k * g.n * int64_t(sizeof(float)) > kPackBBlocksMinBytes;
  std::optional<Scratch> b_block;
  if (pack_b_blocks) b_block.emplace(ScratchSlot::kGemmB, size_t(kb.step * kNc) * sizeof(float));
  const int64_t nc = pack_b_blocks ? kNc / 2 : kNc;
  // Packed A: every panel of the k block at its start when several column blocks reuse them;
  // with one column block, each panel right before its tiles, into one panel's buffer (it stays
  // in L1 instead of streaming freshly written lines of a buffer as large as the task's rows).
  const bool one_column_block = c1 - c0 <= nc;
  std::optional<Scratch> a_buf;
  if (pack_a)
    a_buf.emplace(ScratchSlot::kGemmA,
                  size_t((one_column_block ? mk.mr : r1 - r0) * kb.step) * sizeof(float));
  auto a_panel = [&](int64_t i, int64_t kc) {
    return a_buf->as<float>() + (one_column_block ? 0 : panels.start(i) * kc);
  };
  MicroTile t;
  t.ldc = g.ldc;
  t.lda = pack_a || g.ta ? 0 : g.lda;
  t.lda_t = !pack_a && g.ta ? g.lda : 0;
  for (int64_t q = 0; q < kb.count; ++q) {
    const int64_t k0 = kb.begin(q), kc = kb.depth(q, g.k);
    if (pack_a && !one_column_block)
      for (int64_t i = 0; i < panels.count; ++i)
        pack_a_panel(mk, g, r0 + panels.start(i), panels.height(i), k0, kc, a_panel(i, kc));
    t.kc = kc;
    t.accumulate = g.accumulate || q > 0;
    for (int64_t jc = c0; jc < c1; jc += nc) {
      const int64_t jc_end = std::min(c1, jc + nc);
      // While this block's tiles run, the next block's rows are prefetched a slice per tile,
      // so that its copy reads cache instead of memory.
      SlicedPrefetch next_b;
      if (pack_b_blocks) {
        int64_t nq = q, njc = jc + nc;
        if (njc >= c1) ++nq, njc = c0;
        if (nq < kb.count)
          next_b = {g.b + kb.begin(nq) * g.ldb + njc, g.ldb, kb.depth(nq, g.k),
                    std::min(c1, njc + nc) - njc, panels.count * ceil_div(jc_end - jc, mk.nr)};
      }
      int64_t tile_index = 0;
      for (int64_t i = 0; i < panels.count; ++i) {
        const int64_t row = r0 + panels.start(i);
        t.rows = int32_t(panels.height(i));
        if (pack_a && one_column_block)
          pack_a_panel(mk, g, row, panels.height(i), k0, kc, a_panel(i, kc));
        t.a = pack_a ? a_panel(i, kc) : g.ta ? g.a + k0 * g.lda + row : g.a + row * g.lda + k0;
        for (int64_t j = jc; j < jc_end; j += mk.nr) {
          t.cols = int32_t(std::min<int64_t>(mk.nr, g.n - j));
          // A copied block: the first panel's tiles read B in place and copy it, the later
          // panels read the copy.
          const bool copying = pack_b_blocks && i == 0;
          t.b = packed_b                    ? packed_b + k0 * n_pad + (j / mk.nr) * kc * mk.nr
                : pack_b_blocks && !copying ? b_block->as<float>() + (j - jc) * kc
                                            : g.b + k0 * g.ldb + j;
          t.ldb = copying ? g.ldb : packed_b || pack_b_blocks ? mk.nr : g.ldb;
          t.b_padded = packed_b != nullptr || (pack_b_blocks && !copying);
          t.b_copy = copying ? b_block->as<float>() + (j - jc) * kc : nullptr;
          t.c = g.c + row * g.ldc + j;
          mk.tile(t);
          next_b.slice(tile_index++);
        }
      }
    }
  }
}

}  // namespace

SgemmGrid plan_sgemm(const MicroKernels& mk, int64_t m, int64_t n, int64_t k, int threads,
                     bool whole_rows) {
  // Row blocks for an epilogue (whole_rows) hold at most this much of C, so that the epilogue
  // reads them from L2, whatever the thread count.
  constexpr int64_t kEpilogueBlockBytes = int64_t{256} << 10;
  const int64_t cache_blocks =
      whole_rows ? std::min(ceil_div(m, mk.mr), ceil_div(m * n * 4, kEpilogueBlockBytes)) : 1;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  if (threads <= 1 || flops < kParallelMinFlops) return {cache_blocks, 1};
  const int64_t max_tasks =
      std::max<int64_t>(1, std::min<int64_t>(4 * int64_t(threads), int64_t(flops / kMinTaskFlops)));
  SgemmGrid grid;
  grid.row_blocks = std::max(cache_blocks, std::min(ceil_div(m, mk.mr), max_tasks));
  // Splitting columns re-packs A in every column block; do it only to occupy the threads.
  if (!whole_rows && grid.row_blocks < 2 * int64_t(threads))
    grid.col_blocks = std::min(ceil_div(n, mk.nr), ceil_div(max_tasks, grid.row_blocks));
  // Equal tasks in a multiple of the thread count, where the panels allow it (9 tasks on 2
  // threads leave one running alone at the end). Row blocks may hold fewer than mr rows (down
  // to 4) for it: 32 rows with an epilogue were 3 blocks of 10-11 rows on 2 threads, one
  // thread computing two of them (0.72 of peak); 4 blocks of 8 rows run at 0.94.
  const int64_t t = threads;
  auto round_up = [t](int64_t blocks, int64_t others, int64_t limit) {
    const int64_t tasks = blocks * others;
    if (tasks % t == 0) return blocks;
    for (int64_t b = blocks + 1; b <= limit; ++b)
      if ((b * others) % t == 0) return b;
    return blocks;
  };
  if (grid.col_blocks > 1)
    grid.col_blocks = round_up(grid.col_blocks, grid.row_blocks, ceil_div(n, mk.nr));
  else
    grid.row_blocks = round_up(grid.row_blocks, 1, ceil_div(m, kMinRoundedRows));
  return grid;
}

namespace {

// Two products are computed as their transpose C^T = op(B)^T op(A)^T:
//  - at most one column tile of rows against a transposed B of many columns (an RNN step's
//    input gradient dz U^T, 32 x 1024 x 256): B's stored rows are then the left operand, read
//    in place (one column tile), and the right operand is A, m x k, small to pack, instead of
//    all of B transposed into panels for a few rows;
//  - a narrow C = A^T B of many rows (a classifier's kernel gradient, n = 10 classes): its
//    tiles would be nr columns wide for n of them; transposed, the n rows fill one row panel
//    and A's stored rows are read in place as the right operand.
// Each element is the same FMA chain (a*b == b*a, the same k blocks), so the bits are those of
// the direct product. Neither transposed problem is one of these again.
bool compute_transposed(const MicroKernels& mk, const SgemmArgs& g) {
  if (g.tb && g.m <= mk.nr && g.n >= 4 * mk.nr && g.k >= mk.nr) return true;
  return g.ta && !g.tb && g.n <= mk.nr / 2 && g.n <= mk.mr && g.m >= 4 * mk.nr && g.k >= mk.mr;
}

void sgemm_transposed(const MicroKernels& mk, const SgemmArgs& g, SgemmGrid grid,
                      const std::function<void(int64_t, int64_t)>* on_rows) {
  Scratch ct_buf(ScratchSlot::kGemmC, size_t(g.n * g.m) * sizeof(float));
  float* ct = ct_buf.as<float>();
  if (g.accumulate) mk.transpose(g.c, g.ldc, g.m, g.n, ct, g.m);
  SgemmArgs t;
  t.ta = !g.tb;  // op(B)^T: B stored n x k is A' itself; B stored k x n is A' transposed
  t.a = g.b;
  t.lda = g.ldb;
  t.tb = !g.ta;  // op(A)^T: A stored m x k is B' transposed; A stored k x m is B' itself
  t.b = g.a;
  t.ldb = g.lda;
  t.m = g.n;
  t.n = g.m;
  t.k = g.k;
  t.c = ct;
  t.ldc = g.m;
  t.accumulate = g.accumulate;
  const bool parallel = grid.row_blocks * grid.col_blocks > 1;
  if (on_rows == nullptr && t.m >= 4 * int64_t(mk.mr)) {
    // Without an epilogue, each task transposes its own rows of C^T (columns of C) into C
    // right after computing them, instead of a phase of its own after a barrier (with rows
    // enough to split: tasks of whole rows of C^T; a narrow C^T splits its columns below).
    const std::function<void(int64_t, int64_t)> back = [&](int64_t r0, int64_t r1) {
      mk.transpose(ct + r0 * g.m, g.m, r1 - r0, g.m, g.c + r0, g.ldc);
    };
    return sgemm(mk, t, parallel ? plan_sgemm(mk, t.m, t.n, t.k, num_threads(), true) : SgemmGrid{},
                 &back);
  }
  sgemm(mk, t, parallel ? plan_sgemm(mk, t.m, t.n, t.k, num_threads(), false) : SgemmGrid{},
        nullptr);
  // C = (C^T)^T by blocks of rows (the caller's row blocks, each finished by on_rows).
  const int64_t blocks = on_rows    ? grid.row_blocks
                         : parallel ? std::min<int64_t>(g.m, grid.row_blocks * grid.col_blocks)
                                    : 1;
  parallel_tasks(blocks, [&](int64_t b) {
    const int64_t r0 = g.m * b / blocks, r1 = g.m * (b + 1) / blocks;
    if (r0 >= r1) return;
    mk.transpose(ct + r0, g.m, g.n, r1 - r0, g.c + r0 * g.ldc, g.ldc);
    if (on_rows) (*on_rows)(r0, r1);
  });
}

}  // namespace

void sgemm(const MicroKernels& mk, const SgemmArgs& g, SgemmGrid grid,
           const std::function<void(int64_t, int64_t)>* on_rows) {
  if (compute_transposed(mk, g)) return sgemm_transposed(mk, g, grid, on_rows);
  const KBlocks kb(g.k);
  const int64_t panels_n = ceil_div(g.n, mk.nr), n_pad = panels_n * mk.nr;
  // A large B under one row block (one thread) is copied block by block in run_block instead:
  // the same reads of B, without writing all of it to a buffer larger than the cache first.
  const bool large_b = g.k * g.n * int64_t(sizeof(float)) > kPackBBlocksMinBytes;
  const bool pack_b = g.tb || (g.m >= kPackBMinRows && !(large_b && grid.row_blocks == 1));
  // A transposed B under a product of few rows (an RNN step's input gradient): the tasks split
  // the columns only and each packs its own panels, instead of a packing phase and a barrier
  // before them (any grid gives the same bits).
  const bool tasks_pack_b =
      pack_b && !on_rows && grid.row_blocks * grid.col_blocks > 1 && g.m <= 4 * int64_t(mk.mr);
  if (tasks_pack_b) grid = {1, std::min(panels_n, grid.row_blocks * grid.col_blocks)};
  const int64_t tasks = grid.row_blocks * grid.col_blocks;
  std::optional<Scratch> b_buf;
  float* packed_b = nullptr;
  if (pack_b) {
    b_buf.emplace(ScratchSlot::kGemmB, size_t(g.k * n_pad) * sizeof(float));
    packed_b = b_buf->as<float>();
    // In parallel by (panel, k block): a transposed B of one panel (the transposed product of an
    // RNN step's input gradient) packs its k blocks on several threads.
    const int64_t block_work = std::max<int64_t>(1, kb.step * mk.nr);
    auto pack = [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u)
        pack_b_block(mk, g, kb, u / kb.count, u % kb.count, n_pad, packed_b);
    };
    if (tasks_pack_b)
      ;  // each task packs its panels below
    else if (tasks > 1)
      parallel_for(panels_n * kb.count, std::max<int64_t>(1, kElementwiseGrain / 4 / block_work),
                   pack);
    else
      pack(0, panels_n * kb.count);
  }
  // Row blocks of near-equal heights, column blocks of whole nr tiles.
  auto run = [&](int64_t task) {
    const int64_t rb = task / grid.col_blocks, cb = task % grid.col_blocks;
    const int64_t r0 = g.m * rb / grid.row_blocks, r1 = g.m * (rb + 1) / grid.row_blocks;
    const int64_t p0 = panels_n * cb / grid.col_blocks, p1 = panels_n * (cb + 1) / grid.col_blocks;
    const int64_t c0 = std::min(g.n, p0 * mk.nr), c1 = std::min(g.n, p1 * mk.nr);
    if (r0 >= r1 || c0 >= c1) return;
    if (tasks_pack_b)
      for (int64_t p = p0; p < p1; ++p) pack_b_panel(mk, g, kb, p, n_pad, packed_b);
    run_block(mk, g, kb, packed_b, n_pad, r0, r1, c0, c1);
    if (on_rows) (*on_rows)(r0, r1);
  };
  parallel_tasks(tasks, run);
}

// ---------------------------------------------------------------- which microkernels

namespace {

constexpr const char* kEigen = "eigen";

bool cpu_runs(const std::string& isa) {
  __builtin_cpu_init();
  if (isa == "avx512") return __builtin_cpu_supports("avx512f");
  if (isa == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return isa == kEigen;
}

// nullptr for Eigen; kiln::Error for a name that is unknown or that this CPU cannot run.
const MicroKernels* resolve(const std::string& name, const char* source) {
  if (name == "auto") {
    if (cpu_runs("avx512")) return &avx512_microkernels();
    if (cpu_runs("avx2")) return &avx2_microkernels();
    return nullptr;
  }
  if (name != "avx512" && name != "avx2" && name != kEigen)
    throw Error(fmt::format("{}\"{}\" is not a GEMM kernel set: use auto, avx512, avx2 or eigen",
                            source, name));
  if (!cpu_runs(name))
    throw Error(
        fmt::format("{}\"{}\": this CPU cannot run the {} GEMM kernels; use auto, "
                    "avx2 or eigen",
                    source, name, name));
  if (name == "avx512") return &avx512_microkernels();
  if (name == "avx2") return &avx2_microkernels();
  return nullptr;
}

// KILN_GEMM if set; else the kernels of a KILN_TARGET_CPU x86-64 level (v4: avx512, v3: avx2,
// v2 and the baseline: eigen), when this CPU runs them, so that testing another target's JIT
// code also tests its GEMMs; else the best this CPU runs.
const MicroKernels* initial_kernels() {
  if (std::optional<std::string> name = knobs::gemm_kernels()) return resolve(*name, "KILN_GEMM=");
  const std::string target = knobs::target_cpu().value_or("");
  const char* level = nullptr;
  if (target == "x86-64-v4") level = "avx512";
  if (target == "x86-64-v3") level = "avx2";
  if (target == "x86-64-v2" || target == "x86-64") level = kEigen;
  if (level && cpu_runs(level)) return resolve(level, "KILN_TARGET_CPU=");
  return resolve("auto", "");
}

std::atomic<const MicroKernels*>& active_slot() {
  static std::atomic<const MicroKernels*> slot{initial_kernels()};
  return slot;
}

}  // namespace

const MicroKernels* active_microkernels() { return active_slot().load(std::memory_order_relaxed); }

}  // namespace kiln::runtime::gemm_detail

namespace kiln::runtime {

std::string gemm_kernels() {
  const gemm_detail::MicroKernels* mk = gemm_detail::active_microkernels();
  return mk ? mk->isa : gemm_detail::kEigen;
}

void set_gemm_kernels(const std::string& name) {
  gemm_detail::active_slot().store(gemm_detail::resolve(name, "set_gemm_kernels: "));
}

}  // namespace kiln::runtime
