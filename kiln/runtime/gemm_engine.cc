// The float32 GEMM engine: runs GemmPlans (contract and scheme: gemm_engine.h, gemm_plan.h).
#include "kiln/runtime/gemm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <optional>
#include <utility>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_pack.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/log.h"
#include "kiln/runtime/machine_peak.h"
#include "kiln/runtime/scratch.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime::gemm_detail {

const MicroKernel* MicroKernels::find(const char* shape_name) const {
  for (int32_t i = 0; i < shape_count; ++i)
    if (std::strcmp(shapes[i].name, shape_name) == 0) return &shapes[i];
  return nullptr;
}

int32_t MicroKernels::max_nr() const {
  int32_t nr = 0;
  for (int32_t i = 0; i < shape_count; ++i) nr = std::max(nr, shapes[i].nr);
  return nr;
}

int32_t MicroKernels::max_mr() const {
  int32_t mr = 0;
  for (int32_t i = 0; i < shape_count; ++i) mr = std::max(mr, shapes[i].mr);
  return mr;
}

namespace {

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

// The calling thread prepared for a kernel set's tiles for the life of a task
// (MicroKernels::begin_tiles, end_tiles).
class TileScope {
 public:
  explicit TileScope(const MicroKernels& mk) : mk_(mk) {
    if (mk_.begin_tiles) mk_.begin_tiles();
  }
  ~TileScope() {
    if (mk_.end_tiles) mk_.end_tiles();
  }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;

 private:
  const MicroKernels& mk_;
};

// One task of the plan's product: C[r0:r1, c0:c1] for every k block. `packed_b` is op(B)
// packed (BMode::kPacked / kPackedPerTask / kPackedPerKBlock), else null; with kPackedPerKBlock
// the task packs each k block into `packing` (= packed_b) right before its tiles.
void run_block(const MicroKernels& mk, const GemmPlan& plan, const SgemmArgs& g, const KBlocks& kb,
               const float* packed_b, int64_t n_pad, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
               float* packing = nullptr) {
  const int64_t nr = plan.kernel->nr;
  const bool pack_a = plan.a == AMode::kPackedAll || plan.a == AMode::kPackedPerPanel;
  const bool per_panel = plan.a == AMode::kPackedPerPanel;
  const bool copied_blocks = plan.b == BMode::kCopiedBlocks;
  const bool packed_blocks = plan.b == BMode::kPackedBlocks;
  const APanels panels(r0, r1 - r0, plan.panel_rows);
  const int64_t nc = plan.nc;
  std::optional<Scratch> b_block;
  if (copied_blocks || packed_blocks)
    b_block.emplace(ScratchSlot::kGemmB, size_t(kb.step * ceil_div(nc, nr) * nr) * sizeof(float));
  // AMX panels are whole tiles of panel_rows rows, however many rows they hold.
  const bool tiles = mk.pair_layout == PairLayout::kTiles;
  const bool widen_rows = plan.a == AMode::kRowsWidened;
  // AMX tiles reading a bf16 A's rows in place; a panel whose tile loads would run past A's
  // last row (a short last panel) is packed instead, into one panel's buffer.
  const bool tiles_in_place = tiles && plan.a == AMode::kRowsDirect;
  std::optional<Scratch> a_buf;
  if (widen_rows || tiles_in_place)
    a_buf.emplace(ScratchSlot::kGemmA, size_t(plan.panel_rows * kb.step) * sizeof(float));
  if (pack_a)
    a_buf.emplace(ScratchSlot::kGemmA, size_t((per_panel ? plan.panel_rows
                                               : tiles   ? panels.count * plan.panel_rows
                                                         : r1 - r0) *
                                              kb.step) *
                                           sizeof(float));
  auto a_panel = [&](int64_t i, int64_t kc) {
    return a_buf->as<float>() +
           (per_panel ? 0 : (tiles ? i * plan.panel_rows : panels.start(i)) * kc);
  };
  const TileScope tile_scope(mk);
  MicroTile t;
  t.ldc = g.ldc;
  t.lda = plan.a == AMode::kRowsDirect ? g.lda : 0;
  t.lda_t = plan.a == AMode::kColumnsDirect ? g.lda : 0;
  t.b_ahead = plan.b_ahead;
  t.b_copy_ld = nr;
  for (int64_t q = 0; q < kb.count; ++q) {
    const int64_t k0 = kb.begin(q), kc = kb.depth(q, g.k);
    if (plan.b == BMode::kPackedPerKBlock) {  // the task's (all) columns of this k block
      if (g.tb)
        for (int64_t panel = 0; panel * nr < g.n; ++panel)
          pack_b_block(mk, nr, g, kb, panel, q, n_pad, packing);
      else
        pack_b_rows(mk, nr, g, kb, q, 0, kc, n_pad, packing);
    }
    if (pack_a && !per_panel)
      for (int64_t i = 0; i < panels.count; ++i)
        pack_a_panel(mk, g, r0 + panels.start(i), panels.height(i), k0, kc, a_panel(i, kc));
    t.kc = kc;
    if (widen_rows) t.lda = kc;
    t.accumulate = g.accumulate || q > 0;
    for (int64_t jc = c0; jc < c1; jc += nc) {
      const int64_t jc_end = std::min(c1, jc + nc);
      // While a copied block's tiles run, the next block's rows are prefetched a slice per
      // tile, so that its copy reads cache instead of memory.
      SlicedPrefetch next_b;
      if (copied_blocks) {
        int64_t nq = q, njc = jc + nc;
        if (njc >= c1) ++nq, njc = c0;
        if (nq < kb.count)
          next_b = {g.b + kb.begin(nq) * g.ldb + njc, g.ldb, kb.depth(nq, g.k),
                    std::min(c1, njc + nc) - njc, panels.count * ceil_div(jc_end - jc, nr)};
      }
      if (packed_blocks) pack_b_columns(nr, g, k0, kc, jc, jc_end, b_block->as<float>());
      int64_t tile_index = 0;
      for (int64_t i = 0; i < panels.count; ++i) {
        const int64_t row = r0 + panels.start(i);
        t.rows = int32_t(panels.height(i));
        // The functions for this panel's full tiles and its last one, resolved once.
        const bool copy_panel = copied_blocks && i == 0;
        const TileFn full = plan.kernel->select(t.rows, int32_t(nr), t.lda == 0, copy_panel);
        const int32_t last_cols = int32_t(std::min<int64_t>(nr, g.n - (jc_end - 1) / nr * nr));
        const TileFn last = plan.kernel->select(t.rows, last_cols, t.lda == 0, copy_panel);
        if (per_panel) pack_a_panel(mk, g, row, panels.height(i), k0, kc, a_panel(i, kc));
        if (widen_rows) widen_a_rows(g, row, panels.height(i), k0, kc, a_buf->as<float>());
        // The rows an AMX tile kernel loads: 16, or 32 where the panel has more than 16.
        const bool packed_here =
            tiles_in_place && row + (t.rows > kAmxTileRows ? 2 : 1) * kAmxTileRows > g.m;
        if (packed_here) pack_a_panel(mk, g, row, panels.height(i), k0, kc, a_buf->as<float>());
        if (tiles_in_place) t.lda = packed_here ? 0 : g.lda;
        t.a = pack_a || packed_here ? (packed_here ? a_buf->as<float>() : a_panel(i, kc))
              : widen_rows          ? a_buf->as<float>()
              : tiles_in_place      ? reinterpret_cast<const float*>(g.a16 + row * g.lda + 2 * k0)
              : g.ta                ? g.a + k0 * g.lda + row
                                    : g.a + row * g.lda + k0;
        // The tile at column j.
        auto place = [&](int64_t j) {
          t.cols = int32_t(std::min<int64_t>(nr, g.n - j));
          // A copied block: the first panel's tiles read B directly and copy it, the later
          // panels read the copy.
          const bool copying = copied_blocks && i == 0;
          t.b = packed_b ? packed_b + k0 * n_pad + (j / nr) * kc * nr
                : (copied_blocks && !copying) || packed_blocks
                    ? b_block->as<float>() + (j - jc) * kc
                    : g.b + k0 * g.ldb + j;
          t.ldb = copying ? g.ldb : packed_b || copied_blocks || packed_blocks ? nr : g.ldb;
          t.b_padded = packed_b != nullptr || (copied_blocks && !copying) || packed_blocks;
          t.b_copy = copying ? b_block->as<float>() + (j - jc) * kc : nullptr;
          t.c = g.c + row * g.ldc + j;
          // The next tile's C: the next column tile of this panel, or the first of the next.
          t.c_next = j + nr < jc_end        ? t.c + nr
                     : i + 1 < panels.count ? g.c + (r0 + panels.start(i + 1)) * g.ldc + jc
                                            : nullptr;
        };
        int64_t j = jc;
        // A full panel's whole tiles in one call of the set's row function (GemmPlan::row_calls).
        if (plan.row_calls && t.rows == plan.kernel->mr) {
          const int64_t whole = (std::min(jc_end, g.n - g.n % nr) - jc) / nr;
          if (whole > 0) {
            place(j);
            mk.tile_row(t, whole, kc * nr);
            j += whole * nr;
          }
        }
        for (; j < jc_end; j += nr) {
          place(j);
          (t.cols == nr ? full : last)(t);
          next_b.slice(tile_index++);
        }
      }
    }
  }
}

// The plan's product (the one asked for, or its transpose) on the arena; on_rows finishes
// each row block.
void run_product(const MicroKernels& mk, const GemmPlan& plan, const SgemmArgs& g,
                 const RowsDone* on_rows) {
  KILN_ASSERT(plan.m == g.m && plan.n == g.n, "gemm: the plan was made for another product");
  if (plan.b == BMode::kWidened) {  // B widened here, then read as a float32 B stored k x n
    Scratch widened(ScratchSlot::kGemmB, size_t(g.k * g.n) * sizeof(float));
    SgemmArgs f32 = g;
    f32.b = widened.as<float>();
    f32.ldb = g.n;
    f32.b16 = nullptr;
    f32.b_rounds = false;
    auto widen = [&](int64_t p0, int64_t p1) { widen_b_rows(g, p0, p1, widened.as<float>()); };
    if (plan.tasks() > 1)
      parallel_for(g.k, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, g.n)), widen);
    else
      widen(0, g.k);
    GemmPlan direct = plan;
    direct.b = BMode::kDirect;
    return run_product(mk, direct, f32, on_rows);
  }
  KILN_ASSERT((plan.b != BMode::kDirect && plan.b != BMode::kCopiedBlocks) ||
                  (g.b16 == nullptr && !g.b_rounds),
              "gemm: a bf16 B is never read in place (packed or widened first)");
  KILN_ASSERT((plan.a != AMode::kRowsDirect && plan.a != AMode::kColumnsDirect) ||
                  (g.a16 == nullptr && !g.a_rounds) ||
                  (mk.pair_layout == PairLayout::kTiles && plan.a == AMode::kRowsDirect &&
                   g.a16 != nullptr && !g.a_rounds && !g.ta),
              "gemm: a bf16 A is never read in place (packed or widened first) but by AMX tiles "
              "from its rows");
  const int64_t nr = plan.kernel->nr;
  const KBlocks kb(g.k, plan.kc, plan.k_quantum);
  const int64_t panels_n = ceil_div(g.n, nr), n_pad = panels_n * nr;
  const int64_t tasks = plan.tasks();
  const bool pack_b = plan.b == BMode::kPacked || plan.b == BMode::kPackedPerTask ||
                      plan.b == BMode::kPackedPerKBlock;
  std::optional<Scratch> b_buf;
  const float* packed_b = nullptr;
  if (plan.b == BMode::kPrepacked) {
    KILN_ASSERT(g.packed_b != nullptr, "gemm: a plan with B packed once per loop needs it packed");
    packed_b = g.packed_b;
  }
  if (pack_b) {
    b_buf.emplace(ScratchSlot::kGemmB, size_t(g.k * n_pad) * sizeof(float));
    packed_b = b_buf->as<float>();
  }
  float* packing = b_buf ? b_buf->as<float>() : nullptr;
  if (plan.b == BMode::kPacked && g.tb) {
    // In parallel by (panel, k block): a transposed B of one panel packs its k blocks on
    // several threads.
    const int64_t block_work = std::max<int64_t>(1, kb.step * nr);
    auto pack = [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u)
        pack_b_block(mk, nr, g, kb, u / kb.count, u % kb.count, n_pad, packing);
    };
    if (tasks > 1)
      parallel_for(panels_n * kb.count, std::max<int64_t>(1, kElementwiseGrain / 4 / block_work),
                   pack);
    else
      pack(0, panels_n * kb.count);
  } else if (plan.b == BMode::kPacked) {
    // By rows of B, in parallel by rows (each row's panels are a row of the packed blocks).
    auto pack = [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        pack_b_rows(mk, nr, g, kb, p / kb.step, p % kb.step, p % kb.step + 1, n_pad, packing);
    };
    if (tasks > 1)
      parallel_for(g.k, std::max<int64_t>(1, kElementwiseGrain / 4 / std::max<int64_t>(1, n_pad)),
                   pack);
    else
      pack(0, g.k);
  }
  // Row blocks of whole panels (GemmPlan::row_start), column blocks of whole nr tiles.
  auto run = [&](int64_t task) {
    const int64_t rb = task / plan.col_blocks, cb = task % plan.col_blocks;
    const int64_t r0 = plan.row_start(rb), r1 = plan.row_start(rb + 1);
    const int64_t p0 = panels_n * cb / plan.col_blocks, p1 = panels_n * (cb + 1) / plan.col_blocks;
    const int64_t c0 = std::min(g.n, p0 * nr), c1 = std::min(g.n, p1 * nr);
    if (r0 >= r1 || c0 >= c1) return;
    if (plan.b == BMode::kPackedPerTask)
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t q = 0; q < kb.count; ++q) pack_b_block(mk, nr, g, kb, p, q, n_pad, packing);
    run_block(mk, plan, g, kb, packed_b, n_pad, r0, r1, c0, c1, packing);
    if (on_rows) (*on_rows)(r0, r1);
  };
  parallel_tasks(tasks, run);
}

// A product computed as its transpose: C^T into a buffer, then back into C (by each task, or
// in a phase of its own). Each element is the same FMA chain (a*b == b*a, the same order), so
// the bits are those of the direct product.
void run_transposed(const MicroKernels& mk, const GemmPlan& plan, const SgemmArgs& g,
                    const RowsDone* on_rows) {
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
  t.a16 = g.b16;
  t.b16 = g.a16;
  t.a_rounds = g.b_rounds;
  t.b_rounds = g.a_rounds;
  t.k_elements = g.k_elements;
  t.m = g.n;
  t.n = g.m;
  t.k = g.k;
  t.c = ct;
  t.ldc = g.m;
  t.accumulate = g.accumulate;
  if (plan.back == BackTranspose::kPerTask) {
    const RowsDone back = [&](int64_t r0, int64_t r1) {
      mk.transpose(ct + r0 * g.m, g.m, r1 - r0, g.m, g.c + r0, g.ldc);
    };
    return run_product(mk, plan, t, &back);
  }
  run_product(mk, plan, t, nullptr);
  const int64_t blocks = plan.back_blocks;
  parallel_tasks(blocks, [&](int64_t b) {
    const int64_t r0 = g.m * b / blocks, r1 = g.m * (b + 1) / blocks;
    if (r0 >= r1) return;
    mk.transpose(ct + r0, g.m, g.n, r1 - r0, g.c + r0 * g.ldc, g.ldc);
    if (on_rows) (*on_rows)(r0, r1);
  });
}

}  // namespace

void run_gemm(const MicroKernels& mk, const GemmPlan& plan, const SgemmArgs& g,
              const RowsDone* on_rows) {
  // bf16 operands are read only by the packing, which widens them.
  KILN_ASSERT(plan.shape.a_bf16 == a_as_bf16(g) && plan.shape.b_bf16 == b_as_bf16(g),
              "gemm: the plan was made for other operand dtypes than the product's");
  if (mk.k_per_step == 2) {
    // bf16 pairs: the tiles step through ceil(k / 2) pairs of the packed operands (AMX: padded
    // with zero pairs to whole tiles).
    KILN_ASSERT(a_as_bf16(g) && b_as_bf16(g) && plan.k_per_step == 2,
                "gemm: bf16 pair kernels need two bf16 operands and a plan made for them");
    SgemmArgs pairs = g;
    pairs.k_elements = g.k;
    pairs.k = mk.steps(g.k);
    if (plan.transposed()) return run_transposed(mk, plan, pairs, on_rows);
    return run_product(mk, plan, pairs, on_rows);
  }
  if (plan.transposed()) return run_transposed(mk, plan, g, on_rows);
  run_product(mk, plan, g, on_rows);
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

// ---- the bf16 pair kernels

constexpr const char* kFloat32 = "float32";

bool cpu_has_avx512bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}

// AMX-BF16, and Linux's grant of the tile data to this process, asked for once (a process
// must ask before its first tile instruction: arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA).
bool cpu_has_amx() {
  static const bool usable = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
        !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw"))
      return false;
#if defined(__linux__) && defined(__x86_64__)
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0) return true;
    log_warning(
        "GEMM: this CPU has AMX-BF16 but Linux refused this process the tile data "
        "(arch_prctl ARCH_REQ_XCOMP_PERM); bf16 products run without AMX");
#endif
    return false;
  }();
  return usable;
}

// What auto measured to choose between VDPBF16PS and the float32 kernels: made once (a static
// local), published for vdpbf16ps_choice_note once complete.
struct VdpbfChoice {
  bool faster = false;
  std::string note;
};
std::atomic<const VdpbfChoice*> measured_vdpbf_choice{nullptr};

// vdpbf16ps_outruns_fma (gemm_engine.h) against the float32 kernels `f32`.
bool vdpbf16ps_outruns(const MicroKernels& f32) {
  static const VdpbfChoice choice = [&f32] {
    const double pairs = measure_kernel_loop_peak(avx512bf16_microkernels(), 1, 0.01, 3).gflops;
    const double fmas = measure_kernel_loop_peak(f32, 1, 0.01, 3).gflops;
    VdpbfChoice c{pairs > fmas,
                  fmt::format("auto measured the VDPBF16PS loop at {:.0f} GFLOP/s and the float32 "
                              "FMA loop at {:.0f} on one core: {}",
                              pairs, fmas, pairs > fmas ? "avx512bf16" : "float32")};
    log_info("GEMM: bf16 products: " + c.note);
    return c;
  }();
  measured_vdpbf_choice.store(&choice, std::memory_order_release);
  return choice.faster;
}

// nullptr for float32 (the float32 kernels on widened operands); kiln::Error for a name that is
// unknown or that this CPU cannot run.
const MicroKernels* resolve_bf16(const std::string& name, const char* source) {
  if (name == "auto") {
    const MicroKernels* f32 = active_microkernels();
    if (!f32 || std::string(f32->isa) != "avx512") return nullptr;
    if (cpu_has_amx()) return &amx_microkernels();
    return cpu_has_avx512bf16() && vdpbf16ps_outruns(*f32) ? &avx512bf16_microkernels() : nullptr;
  }
  if (name == kFloat32) return nullptr;
  struct Set {
    const char* name;
    bool (*runs)();
    const char* lacks;
    const MicroKernels& (*kernels)();
  };
  static constexpr Set kSets[] = {
      {"amx", cpu_has_amx, "no AMX-BF16, or Linux refused this process the tile data",
       amx_microkernels},
      {"avx512bf16", cpu_has_avx512bf16, "no AVX512-BF16", avx512bf16_microkernels},
      {"amx-emulated", [] { return cpu_runs("avx2"); }, "no AVX2", amx_emulated_microkernels},
      {"avx512bf16-emulated", [] { return cpu_runs("avx512"); }, "no AVX-512F",
       avx512bf16_emulated_microkernels}};
  for (const Set& set : kSets) {
    if (name != set.name) continue;
    if (!set.runs())
      throw Error(
          fmt::format("{}\"{}\": this CPU cannot run these kernels ({}); use auto or "
                      "float32",
                      source, name, set.lacks));
    return &set.kernels();
  }
  throw Error(
      fmt::format("{}\"{}\" is not a bf16 GEMM kernel set: use auto, amx, avx512bf16, "
                  "amx-emulated, avx512bf16-emulated or float32",
                  source, name));
}

std::atomic<const MicroKernels*>& active_bf16_slot() {
  static std::atomic<const MicroKernels*> slot{[] {
    const std::optional<std::string> name = knobs::gemm_bf16_kernels();
    return resolve_bf16(name.value_or("auto"), name ? "KILN_GEMM_BF16=" : "");
  }()};
  return slot;
}

}  // namespace

const MicroKernels* active_microkernels() { return active_slot().load(std::memory_order_relaxed); }

bool pair_tiles_fill(const MicroKernels& pairs, int64_t m, int64_t n, int64_t k) {
  const MicroKernel& tile = pairs.shapes[0];
  const int64_t rows = std::min(m, n), cols = std::max(m, n);
  return 2 * rows >= std::min(tile.mr, tile.nr) && 2 * cols >= std::max(tile.mr, tile.nr) &&
         2 * k >= pairs.k_quantum() * pairs.k_per_step;
}

const MicroKernels* bf16_kernels_for(int64_t m, int64_t n, int64_t k) {
  const MicroKernels* pairs = active_bf16_microkernels();
  return pairs && pair_tiles_fill(*pairs, m, n, k) ? pairs : nullptr;
}

bool vdpbf16ps_outruns_fma() {
  const MicroKernels* f32 = active_microkernels();
  return f32 && std::string(f32->isa) == "avx512" && cpu_has_avx512bf16() &&
         vdpbf16ps_outruns(*f32);
}

std::string vdpbf16ps_choice_note() {
  const VdpbfChoice* choice = measured_vdpbf_choice.load(std::memory_order_acquire);
  return choice ? choice->note : std::string();
}

const MicroKernels* active_bf16_microkernels() {
  return active_bf16_slot().load(std::memory_order_relaxed);
}

}  // namespace kiln::runtime::gemm_detail

namespace kiln::runtime {

std::string gemm_kernels() {
  const gemm_detail::MicroKernels* mk = gemm_detail::active_microkernels();
  return mk ? mk->isa : gemm_detail::kEigen;
}

void set_gemm_kernels(const std::string& name) {
  gemm_detail::active_slot().store(gemm_detail::resolve(name, "set_gemm_kernels: "));
}

std::string gemm_bf16_kernels() {
  const gemm_detail::MicroKernels* mk = gemm_detail::active_bf16_microkernels();
  return mk ? mk->isa : gemm_detail::kFloat32;
}

void set_gemm_bf16_kernels(const std::string& name) {
  gemm_detail::active_bf16_slot().store(gemm_detail::resolve_bf16(name, "set_gemm_bf16_kernels: "));
}

}  // namespace kiln::runtime
