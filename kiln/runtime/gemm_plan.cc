// Planning float32 products (contract: gemm_plan.h).
#include "kiln/runtime/gemm_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kiln/runtime/cpu_info.h"

namespace kiln::runtime::gemm_detail {
namespace {

int64_t round_down(int64_t x, int64_t multiple) {
  return std::max(multiple, x / multiple * multiple);
}

// Two products are computed as their transpose C^T = op(B)^T op(A)^T:
//  - at most one column tile of rows against a transposed B of many columns (an RNN step's
//    input gradient dz U^T, 32 x 1024 x 256): B's stored rows are then the left operand, read
//    directly (one column tile), and the right operand is A, m x k, small to pack, instead of
//    all of B transposed into panels for a few rows;
//  - a narrow C = A^T B of many rows (a classifier's kernel gradient, n = 10 classes): its
//    tiles would be nr columns wide for n of them; transposed, the n rows fill at most two row
//    panels, a larger share of their mr rows than of nr columns (10 classes: 10 of 12 rows
//    against 10 of 16 columns with 6x16 tiles), and A's stored rows are read directly as the
//    right operand.
// Neither transposed problem is one of these again. A B packed once per loop (`prepacked`) keeps
// the product as it is: transposed, B would be the left operand, read or packed (a bf16 B
// widened) by every product of the loop instead of once.
//
// On AMX tiles (`tile_pairs`), a stored A^T is packed by transposing it (16 x 16 blocks of pairs,
// gemm_microkernel.h: tiles_a_from_columns), while a B of k rows packs with a permute per row: a
// product of two k-major operands (ta, not tb: a weight or filter gradient) computes C^T = B^T A
// when that transposes fewer elements, counting C's to transpose back: (m - n) k > m n (a
// convolution's filter gradient, 144 x 1568 x 32 ta: 175 K elements fewer, 4.6 K back).
bool compute_transposed(const MicroKernel& t, const GemmShape& s, bool prepacked, bool tile_pairs) {
  if (prepacked) return false;
  if (tile_pairs && s.ta && !s.tb && s.n < s.m && (s.m - s.n) * s.k > s.m * s.n) return true;
  if (s.tb && s.m <= t.nr && s.n >= 4 * t.nr && s.k >= t.nr) return true;
  // The share of whole tiles of `tile` values that n values fill, compared as n / whole tiles.
  const auto tiles = [&](int32_t tile) { return ceil_div(s.n, int64_t(tile)) * tile; };
  const bool rows_fill_better = tiles(t.mr) < tiles(t.nr);
  return s.ta && !s.tb && s.n < t.nr && s.n <= 2 * t.mr && rows_fill_better && s.m >= 4 * t.nr &&
         s.k >= t.mr;
}

// The operand modes and blocking of the product the tasks compute (m x n x k, ta, tb) under
// `grid`; `on_rows`: a callback finishes each row block; `b_prepacked`: B is packed once per
// loop (loop-invariant; in the packed layout whatever the other rules say).
// A bf16 operand (a_bf16, b_bf16) is never read as it is stored: packed (the packing widens it)
// or, on the float32 kernels, widened into float32 rows (AMode::kRowsWidened, BMode::kWidened).
void plan_product(GemmPlan& plan, const GemmParams& p, int64_t m, int64_t n, int64_t k, bool ta,
                  bool tb, bool a_bf16, bool b_bf16, GemmGrid grid, bool on_rows,
                  bool b_prepacked = false, bool a_tiles_in_place = false) {
  const int64_t mr = plan.kernel->mr, nr = plan.kernel->nr;
  plan.m = m, plan.n = n, plan.k = k, plan.ta = ta, plan.tb = tb;
  plan.a_bf16 = a_bf16, plan.b_bf16 = b_bf16;
  const KBlocks kb(k, p.kc, plan.k_quantum);
  plan.kc = kb.step;
  plan.k_blocks = kb.count;
  const int64_t panels_n = ceil_div(n, nr);
  // B is packed when its rows are C's columns (transposed), or when enough rows of C reuse
  // each packed panel; a large B under a single row block is copied block by block instead
  // (the same reads of B, without writing all of it to a buffer larger than the cache).
  const bool large_b = k * n * int64_t(sizeof(float)) > p.large_b_bytes;
  // The B block's L2 budget is kc x nc floats: a shallower k block holds more columns (up to
  // all of them), so that each A panel serves more tiles.
  const int64_t nc =
      round_down(std::min(p.nc * p.kc / std::max<int64_t>(1, plan.kc), ceil_div(n, nr) * nr), nr);
  // B read directly by every row panel (neither packed nor copied, below) must stay in L2:
  // rows whose distance piles them into few of its sets are packed instead where each column
  // of B is read by one task (one row block: a packing pass over the task's own columns, then
  // every panel reads them from L2). On the Zen 3 VM, 32 x 256 x 1024 (B's rows 4 KiB apart):
  // packed 1.15-1.3x direct at one thread; at two, columns split and packed by their tasks
  // 0.33-0.5x the time of 6 row blocks each reading all of B directly.
  const int64_t grid_tasks = grid.row_blocks * grid.col_blocks;
  const bool copies_b = large_b && ceil_div(m, mr) > 1;
  const bool pack_f32_b = b_prepacked || tb ||
                          (m >= p.pack_b_min_rows && !(large_b && grid.row_blocks == 1)) ||
                          (grid.row_blocks == 1 && !copies_b && !b_rows_fit_l2(p, n, plan.kc, nc));
  // A bf16 B narrower than one panel, which a float32 one's rule reads directly, on the float32
  // kernels, is widened before the tasks into float32 rows read the same way where that copy
  // fits in half of L2: its packed rows would be mostly padding (a classifier's 6272 x 10
  // kernel: 250 KB, where its panel would be 32 floats wide for 10). A wider one is packed: on a
  // 2-core Xeon VM a widened 784 x 256 B read directly ran 0.87x the packed one (64 rows).
  const bool widen_b = b_bf16 && !pack_f32_b && !copies_b && plan.k_per_step == 1 && n < nr &&
                       k * n * int64_t(sizeof(float)) <= p.l2_bytes / 2;
  const bool pack_b = pack_f32_b || (b_bf16 && !widen_b);
  // A transposed B under a product of few rows (an RNN step's input gradient), or columns
  // split alone: the tasks split the columns only and each packs its own panels, instead of a
  // packing phase and a barrier.
  const bool tasks_pack_b =
      pack_b && !on_rows && grid_tasks > 1 && (m <= 4 * mr || grid.row_blocks == 1);
  if (tasks_pack_b) grid = {1, std::min(panels_n, grid_tasks)};
  // A packed B that outgrows L2 under fewer rows than columns: a packing phase would write all
  // of it out to memory and the tiles read it back. Instead each task packs each kc x nc block
  // of its own columns into an L2 buffer right before the block's tiles (BMode::kPackedBlocks),
  // the tasks splitting the columns only, one per thread (one task: all of them), which makes
  // every task pack all of A: worth it where that repeated packing, (tasks - 1) m k values, is less
  // than the k n that B's write and re-read move (256 x 2048 x 1024 ta, an LSTM's weight gradient,
  // on a 2-core Xeon VM: 1.11x at one thread, 1.2x at two; 1024 x 512 x 1024 ta, m = n: 0.93x). Row
  // blocks finished by an epilogue keep their grid and packing (every row block would pack all of
  // B); float32 operands on the float32 kernels only.
  const int64_t column_tasks =
      std::min({panels_n, grid_tasks, std::max<int64_t>(1, plan.shape.threads)});
  const bool b_blocks = p.task_b_blocks && pack_b && !b_prepacked && !b_bf16 && !tb &&
                        plan.k_per_step == 1 && (!on_rows || grid_tasks == 1) && m >= 4 * mr &&
                        m < n && (column_tasks - 1) * m < n &&
                        k * n * int64_t(sizeof(float)) > p.l2_bytes;
  if (b_blocks) grid = {1, column_tasks};
  plan.row_blocks = grid.row_blocks;
  plan.col_blocks = grid.col_blocks;
  // The widest task (column blocks of near-equal whole tiles) and the shortest one.
  const int64_t width = std::min(n, ceil_div(panels_n, grid.col_blocks) * nr);
  const int64_t rows = std::max<int64_t>(1, m / grid.row_blocks);
  // A task at most direct_a_max_cols wide reads each row of A a few times, from L1: the
  // tiles read A directly instead of packing it (a transposed A too: its values for one k are
  // contiguous, as in a packed panel). Rows read directly are streams of their own: at most
  // mr_direct of them per tile.
  // A bf16 A under such a task (on the float32 kernels, not transposed) has the rows of each
  // panel widened into a buffer that its tiles read the same way: a widening row copy instead
  // of a transposing pack (a classifier's 64 x 6272 x 10 on a 2-core Xeon VM: 0.3x the float32
  // product's speed packed).
  // On AMX tiles a bf16 A whose rows hold whole chunks (a_tiles_in_place) is already in the
  // tiles' layout: under such a task its tiles load A's rows where they lie (whole 32-row
  // panels, rows A's stride apart) instead of packing them.
  const bool direct_a = width <= p.direct_a_max_cols;
  const bool tiles_in_place = a_tiles_in_place && direct_a && !ta;
  const bool widen_rows = a_bf16 && direct_a && !ta && plan.k_per_step == 1;
  const bool pack_a = (a_bf16 && !widen_rows && !tiles_in_place) || !direct_a;
  plan.panel_rows =
      int32_t(!pack_a && !ta && !tiles_in_place ? std::min<int64_t>(mr, p.mr_direct) : mr);
  // B read directly but too large to stay in cache (a weight gradient's k x n activations):
  // each kc x nc/2 block is copied into an L2 buffer by the first row panel's tiles (half-width
  // blocks, so that the block, the next one and the A panels fit L2 together).
  const bool copied = !pack_b && !widen_b && !tb && large_b && ceil_div(rows, plan.panel_rows) > 1;
  plan.nc = copied ? round_down(nc / 2, nr) : nc;
  // A single task packing all of B before its first tile writes the packed B out to memory
  // when it exceeds the caches, and its tiles read it back; packed a k block at a time, right
  // before that block's tiles, each block stays in L2 for them (where it fits in half of it).
  // The packing is the same work either way (one thread), done while its result is in cache.
  const bool per_k_block = pack_b && !tasks_pack_b && grid_tasks == 1 && kb.count > 1 &&
                           plan.kc * panels_n * nr * int64_t(sizeof(float)) <= p.l2_bytes / 2;
  plan.b = b_prepacked   ? BMode::kPrepacked
           : b_blocks    ? BMode::kPackedBlocks
           : per_k_block ? BMode::kPackedPerKBlock
           : pack_b      ? (tasks_pack_b ? BMode::kPackedPerTask : BMode::kPacked)
           : copied      ? BMode::kCopiedBlocks
           : widen_b     ? BMode::kWidened
                         : BMode::kDirect;
  // Packed A: with one column block, each panel right before its tiles into one panel's buffer
  // (it stays in L1); with several, every panel of the k block at its start (each column block
  // reuses them).
  plan.a = pack_a       ? (width <= plan.nc ? AMode::kPackedPerPanel : AMode::kPackedAll)
           : widen_rows ? AMode::kRowsWidened
           : ta         ? AMode::kColumnsDirect
                        : AMode::kRowsDirect;
}

}  // namespace

bool b_rows_fit_l2(const GemmParams& p, int64_t row_floats, int64_t kc, int64_t nc) {
  if (p.l2_sets <= 0 || p.l2_ways <= 0) return true;
  constexpr int64_t kLine = 64;
  const int64_t line_floats = kLine / int64_t(sizeof(float));
  // Rows a whole number of lines apart start in sets `stride` apart (mod l2_sets): `offsets`
  // distinct ones, `gap` sets apart. A row's `lines` consecutive lines fill the gap or not.
  // Rows not a whole number of lines apart shift from line to line: they spread.
  if (row_floats % line_floats != 0) return true;
  const int64_t stride = (row_floats / line_floats) % p.l2_sets;
  const int64_t gap = std::gcd(stride == 0 ? p.l2_sets : stride, p.l2_sets);
  const int64_t offsets = p.l2_sets / gap;
  const int64_t lines = ceil_div(nc, line_floats) + 1;  // + 1: a row need not start a line
  const int64_t per_set = lines >= gap ? ceil_div(kc * lines, p.l2_sets) : ceil_div(kc, offsets);
  return per_set <= p.l2_ways;
}

GemmParams derive_gemm_params(const MicroKernels& mk, int32_t kernel, const CpuInfo& cpu,
                              double core_gflops) {
  GemmParams p;
  p.kernel = std::clamp<int32_t>(kernel, 0, mk.shape_count - 1);
  const MicroKernel& t = mk.shapes[p.kernel];
  const int64_t l1 = std::max<int64_t>(cpu.l1d.per_core(), 16 << 10);
  const int64_t l2 = std::max<int64_t>(cpu.l2.per_core(), 256 << 10);
  // The A panel (mr x kc floats) stays in L1 across a block's tiles while each tile streams
  // its kc x nr slice of B through L1: the panel gets half of L1.
  p.kc = std::clamp<int64_t>(round_down(l1 / 2 / (4 * t.mr), 16), 64, 1024);
  // The B block (kc x nc) stays in L2 across the row panels: half of L2, at least 4 tiles wide.
  int64_t nc = l2 / 2 / (4 * p.kc);
  if (nc < 4 * t.nr) {
    p.kc = std::clamp<int64_t>(round_down(l2 / 2 / (4 * 4 * t.nr), 16), 64, p.kc);
    nc = l2 / 2 / (4 * p.kc);
  }
  p.nc = std::clamp<int64_t>(round_down(nc, t.nr), t.nr, 64 * int64_t(t.nr));
  // A tile consumes a row of B every mr * nr / lanes FMAs; prefetching 1 KiB ahead covers the
  // L2 latency (about 15-20 cycles) at up to two vector FMAs per cycle.
  p.b_ahead = std::max<int32_t>(2, 1024 / (4 * t.nr));
  // Rows read directly are streams of their own, a row's lines in one L1 set when rows are a
  // power of two apart: no more rows than the L1 has ways.
  p.mr_direct = std::clamp<int32_t>(cpu.l1d.ways > 0 ? cpu.l1d.ways : 8, 1, t.mr);
  p.large_b_bytes = 4 * l2;
  p.l2_bytes = l2;
  if (cpu.l2.ways > 0 && cpu.l2.bytes > 0) {
    // Sets of one L2 instance (a shared L2 shares them too: its ways are the per-core share).
    p.l2_sets = cpu.l2.bytes / (int64_t(cpu.l2.ways) * 64);
    p.l2_ways = std::max(1, cpu.l2.ways / std::max(1, cpu.l2.shared_by));
  }
  p.epilogue_block_bytes = l2 / 4;
  // The plan thresholds weigh a packing pass against the traffic it saves. The cost factors
  // below (strided reads an eighth dearer than packed ones, a directly read A half a pass more
  // per tile, L3 a quarter of L2's bandwidth) are assumptions, not measurements: they give
  // the values once fixed for a Cascade Lake core with 12 x 32 tiles, and `kiln tune` times
  // each threshold halved and doubled per class (min_task_panels only matters to the grids of
  // several threads, which its one thread does not time).
  //
  // Packing B is one more pass over each kc x nc block (a read and a write of it) before the
  // row panels read it; without it every row panel's tiles read the block's rows where they
  // lie, a strided stream of kc rows per tile (more lines, pages and prefetch streams than a
  // packed panel). Each row panel streams the block from L2 once either way, so the packing
  // pass is 2 / panels of the block's L2 traffic: B is packed once that is at most the eighth
  // the strided reads would cost more, from 16 row panels (12 x 32 tiles: 192 rows).
  p.pack_b_min_rows = 16 * int64_t(t.mr);
  // Packing A is likewise a read and a write of each mr x kc panel, after which the task's
  // tiles across its width read the panel contiguously from L1 (it takes half of L1: kc
  // above). Read directly, A's rows are strided streams that each tile re-reads (the B slice a
  // tile streams, kc x nr, evicts them from L1), about half a pass more per tile than the
  // packed panel: direct reading wins while a task is at most 4 tiles wide (12 x 32: 128
  // columns). The rows themselves (at most mr_direct of kc floats) fit in half of L1 by the
  // choice of kc; where a clamped kc would not let them, A is always packed.
  p.direct_a_max_cols =
      2 * int64_t(p.mr_direct) * p.kc * int64_t(sizeof(float)) <= l1 ? 4 * int64_t(t.nr) : 0;
  // A task reads each B block from L3 once per k block and from L2 once per row panel: with 4
  // panels the L3 reads are a quarter of the L2 ones, and take no longer at a quarter of the
  // bandwidth. The task's packed A panels of one k block share L2 with the B block (half of
  // it): a task holds no more panels than fit in a quarter of L2.
  p.min_task_panels = std::clamp<int64_t>(l2 / 4 / (int64_t(sizeof(float)) * t.mr * p.kc), 1, 4);
  // A oneTBB task costs about a microsecond to start and join: the smallest task runs about
  // 4 us at the core's FMA rate, and a product smaller than two such tasks is not split.
  const double rate = core_gflops > 0 ? core_gflops : 50.0;
  p.min_task_flops = rate * 1e9 * 4e-6;
  p.parallel_min_flops = 2 * p.min_task_flops;
  p.source = "derived";
  return p;
}

const char* name(AMode mode) {
  switch (mode) {
    case AMode::kPackedAll:
      return "packed";
    case AMode::kPackedPerPanel:
      return "packed-per-panel";
    case AMode::kRowsDirect:
      return "rows-direct";
    case AMode::kColumnsDirect:
      return "columns-direct";
    case AMode::kRowsWidened:
      return "rows-widened";
  }
  return "?";
}

const char* name(BMode mode) {
  switch (mode) {
    case BMode::kPacked:
      return "packed";
    case BMode::kPackedPerTask:
      return "packed-by-tasks";
    case BMode::kPackedPerKBlock:
      return "packed-per-k-block";
    case BMode::kWidened:
      return "widened";
    case BMode::kDirect:
      return "direct";
    case BMode::kCopiedBlocks:
      return "copied-blocks";
    case BMode::kPackedBlocks:
      return "packed-in-blocks";
    case BMode::kPrepacked:
      return "packed-once-per-loop";
  }
  return "?";
}

const char* name(BackTranspose mode) {
  switch (mode) {
    case BackTranspose::kNone:
      return "none";
    case BackTranspose::kPerTask:
      return "per-task";
    case BackTranspose::kAfter:
      return "after";
  }
  return "?";
}

namespace {
// How describe() shows an operand read as bf16.
const char* operand_dtype(bool bf16, bool rounded) {
  return !bf16 ? "" : rounded ? "f32->bf16 " : "bf16 ";
}
}  // namespace

std::string GemmPlan::describe() const {
  const GemmShape& s = shape;
  std::string text =
      fmt::format("{}x{}x{} {}{}{}, {} thread{}: {} {}", s.m, s.k, s.n, s.ta ? 't' : 'n',
                  s.tb ? 't' : 'n', s.epilogue ? " +epilogue" : "", s.threads,
                  s.threads == 1 ? "" : "s", isa, kernel ? kernel->name : "?");
  if (transposed())
    text += fmt::format(
        ", as C^T = {}x{}x{} {}{} (back-transposed {}{})", m, k, n, ta ? 't' : 'n', tb ? 't' : 'n',
        name(back), back == BackTranspose::kAfter ? fmt::format(" in {} tasks", back_blocks) : "");
  text += fmt::format(
      ", grid {}x{}, A {}{}, B {}{}, kc {}{} x {} block{}, nc {}, {} rows per tile, {} ({})",
      row_blocks, col_blocks, operand_dtype(a_bf16, transposed() ? s.b_rounded : s.a_rounded),
      name(a), operand_dtype(b_bf16, transposed() ? s.a_rounded : s.b_rounded), name(b), kc,
      k_per_step == 2 ? " pairs" : "", k_blocks, k_blocks == 1 ? "" : "s", nc, panel_rows,
      // AMX tiles (k in tiles of 16 pairs) load B tiles whole: their kernel prefetches nothing.
      k_quantum > 1 ? std::string("no B prefetch") : fmt::format("B prefetch {} rows", b_ahead),
      source);
  if (row_calls) text += ", a panel's whole tiles in one call";
  return text;
}

int64_t GemmPlan::row_start(int64_t rb) const {
  const int64_t rows = std::max<int64_t>(1, panel_rows), blocks = std::max<int64_t>(1, row_blocks);
  // Whole panels where every block gets at least 4 of them: a block's end then moves by less
  // than a quarter of it. Thinner blocks (few rows cut finer than their panels to even out the
  // threads: 32 rows with an epilogue as 2 blocks of 16 on 2 threads, 12-row panels) keep
  // equal heights.
  if (m < 4 * rows * blocks) return m * rb / blocks;
  return std::min(m, ceil_div(m, rows) * rb / blocks * rows);
}

GemmGrid plan_grid(const MicroKernel& kernel, const GemmParams& p, int64_t m, int64_t n, int64_t k,
                   int threads, bool whole_rows, bool a_bf16) {
  const int64_t mr = kernel.mr, nr = kernel.nr;
  // Row blocks for an epilogue (whole_rows) hold at most epilogue_block_bytes of C, so that the
  // epilogue reads them from L2, whatever the thread count.
  const int64_t cache_blocks =
      whole_rows ? std::min(ceil_div(m, mr), ceil_div(m * n * 4, p.epilogue_block_bytes)) : 1;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  if (threads <= 1 || flops < p.parallel_min_flops) return {cache_blocks, 1};
  const int64_t max_tasks = std::max<int64_t>(
      1, std::min<int64_t>(4 * int64_t(threads), int64_t(flops / p.min_task_flops)));
  GemmGrid grid;
  // Thin row blocks each stream the whole of B from L3: where the rows allow every thread
  // min_task_panels panels, no block gets fewer (the columns are split instead, below), and
  // the row blocks are a multiple of the thread count (so evening out the tasks never has to
  // multiply the column blocks).
  const int64_t panels = ceil_div(m, mr);
  const int64_t fat = std::max<int64_t>(1, p.min_task_panels);
  const int64_t t64 = threads;
  const int64_t panels_n = ceil_div(n, nr);
  // Rows too few to give every thread that many panels, against more columns than rows: the
  // threads split the columns only, so that each task reads its own columns of B once (and all
  // of A, the smaller operand) instead of thin row blocks each streaming all of B (32 x 256 x
  // 1024 on 2 threads: 6 blocks of one panel each read its 1 MB B). One column block per
  // thread (fewer where the product has flops for fewer tasks): every further one reads all of
  // A again (on the Zen 3 VM 1 x 2 ran at 0.94-0.95x the time of 1 x 8). Whole rows (an
  // epilogue) keep their row blocks.
  const int64_t thin_blocks = std::min(t64, max_tasks);
  if (!whole_rows && panels < fat * t64 && n > m && panels_n >= thin_blocks) {
    grid.col_blocks = thin_blocks;
    return grid;
  }
  // Whole rows too few for that (an epilogue, so no column split): one block per thread, the
  // thickest that occupy them, as every row block reads all of B (64 x 2048 x 1024 ta with an
  // epilogue, tasks of 8 panels tuned, ran as 8 blocks of 8 rows, each reading the 8 MB B:
  // 3.4x the time of 2 blocks on the Zen 3 VM). Otherwise thin blocks, columns split below.
  const int64_t row_limit = panels >= fat * t64 ? std::max(t64, panels / fat / t64 * t64)
                            : whole_rows        ? std::min(panels, t64)
                                                : panels;
  grid.row_blocks = std::max(cache_blocks, std::min(row_limit, max_tasks));
  // Splitting columns re-packs A in every column block; do it only to occupy the threads: a
  // float32 A (which many products read directly) in up to max_tasks tasks, two a thread; a bf16
  // A, which every task packs (into pairs on the bf16 kernels), in one task a thread (128 x 1024
  // x 128 ta on VDPBF16PS, 2 threads, on the Zen 4 VM: 2 x 1 took 0.65-0.72x the time of 2 x 4).
  if (!whole_rows && grid.row_blocks < 2 * int64_t(threads)) {
    const int64_t tasks = a_bf16 ? std::min(t64, max_tasks) : max_tasks;
    grid.col_blocks = std::min(panels_n, ceil_div(tasks, grid.row_blocks));
  }
  // Equal tasks in a multiple of the thread count, where the panels allow it (9 tasks on 2
  // threads leave one running alone at the end). Row blocks may hold fewer than mr rows (down
  // to min_rounded_rows) for it: 32 rows with an epilogue as 3 blocks of 10-11 rows on 2
  // threads left one thread computing two of them.
  const int64_t t = threads;
  auto round_up = [t](int64_t blocks, int64_t others, int64_t limit) {
    if ((blocks * others) % t == 0) return blocks;
    for (int64_t b = blocks + 1; b <= limit; ++b)
      if ((b * others) % t == 0) return b;
    return blocks;
  };
  if (grid.col_blocks > 1)
    grid.col_blocks = round_up(grid.col_blocks, grid.row_blocks, ceil_div(n, nr));
  else
    grid.row_blocks = round_up(grid.row_blocks, 1, ceil_div(m, p.min_rounded_rows));
  return grid;
}

GemmPlan make_gemm_plan(const MicroKernels& mk, const GemmShape& shape, const GemmParams& p) {
  const MicroKernel& kernel = mk.shapes[std::clamp<int32_t>(p.kernel, 0, mk.shape_count - 1)];
  return make_gemm_plan(
      mk, shape, p,
      plan_grid(kernel, p, shape.m, shape.n, shape.k, shape.threads, shape.epilogue, shape.a_bf16));
}

namespace {

// make_gemm_plan but for row_calls.
GemmPlan plan_modes(const MicroKernels& mk, const GemmShape& shape, const GemmParams& p,
                    GemmGrid grid) {
  GemmPlan plan;
  plan.shape = shape;
  plan.isa = mk.isa;
  plan.kernel = &mk.shapes[std::clamp<int32_t>(p.kernel, 0, mk.shape_count - 1)];
  plan.b_ahead = p.b_ahead;
  plan.source = p.source;
  plan.k_per_step = mk.k_per_step;
  plan.k_quantum = mk.k_quantum();
  // The depth the tiles step through: k, or its bf16 pairs (the last one may be half; AMX pads
  // them to whole tiles).
  const int64_t steps = mk.steps(shape.k);
  // A loop-invariant B is packed once per loop where the float32 kernels run the product (a
  // bf16 B widened as it is packed, once, into a float32 copy twice its size); the bf16 pair
  // kernels pack it per product.
  const bool prepacked = shape.b_invariant && mk.k_per_step == 1;
  // A stored bf16 operand that AMX tiles can read in place as A: row-major (k contiguous), not
  // rounded from float32 as packed, its rows whole chunks of 16 pairs.
  const bool tiles = mk.pair_layout == PairLayout::kTiles;
  const bool whole_chunks = shape.k % (2 * mk.k_quantum()) == 0;
  if (!compute_transposed(*plan.kernel, shape, prepacked, tiles)) {
    plan_product(plan, p, shape.m, shape.n, steps, shape.ta, shape.tb, shape.a_bf16, shape.b_bf16,
                 grid, shape.epilogue, prepacked,
                 tiles && whole_chunks && shape.a_bf16 && !shape.a_rounded && !shape.ta);
    return plan;
  }
  // (Transposed, A is op(B)^T: B's stored rows where tb.)
  const bool b_in_place = tiles && whole_chunks && shape.b_bf16 && !shape.b_rounded && shape.tb;
  // C^T = op(B)^T op(A)^T: op(B)^T is B's stored rows when tb, op(A)^T is A's when !ta.
  const int64_t m = shape.n, n = shape.m, k = steps;
  const bool ta = !shape.tb, tb = !shape.ta;
  const bool a_bf16 = shape.b_bf16, b_bf16 = shape.a_bf16;
  const bool parallel = grid.row_blocks * grid.col_blocks > 1;
  const int threads = shape.threads;
  if (!shape.epilogue && m >= 4 * int64_t(plan.kernel->mr)) {
    // Each task transposes its own rows of C^T (columns of C) right after computing them,
    // instead of a phase of its own after a barrier.
    plan.back = BackTranspose::kPerTask;
    const GemmGrid inner =
        parallel ? plan_grid(*plan.kernel, p, m, n, k, threads, true, a_bf16) : GemmGrid{};
    plan_product(plan, p, m, n, k, ta, tb, a_bf16, b_bf16, inner, true, false, b_in_place);
    return plan;
  }
  plan.back = BackTranspose::kAfter;
  const GemmGrid inner =
      parallel ? plan_grid(*plan.kernel, p, m, n, k, threads, false, a_bf16) : GemmGrid{};
  plan_product(plan, p, m, n, k, ta, tb, a_bf16, b_bf16, inner, false, false, b_in_place);
  // C = (C^T)^T by blocks of rows (the caller's row blocks, each finished by its callback).
  plan.back_blocks = shape.epilogue ? grid.row_blocks
                     : parallel     ? std::min<int64_t>(shape.m, grid.row_blocks * grid.col_blocks)
                                    : 1;
  return plan;
}

}  // namespace

GemmPlan make_gemm_plan(const MicroKernels& mk, const GemmShape& shape, const GemmParams& p,
                        GemmGrid grid) {
  GemmPlan plan = plan_modes(mk, shape, p, grid);
  // A row function reads packed A panels (or, on AMX tiles, A's rows in place) and packed B
  // panels kc * nr floats apart.
  const bool packed_a = plan.a == AMode::kPackedAll || plan.a == AMode::kPackedPerPanel ||
                        (plan.a == AMode::kRowsDirect && mk.pair_layout == PairLayout::kTiles);
  const bool packed_b = plan.b == BMode::kPacked || plan.b == BMode::kPackedPerTask ||
                        plan.b == BMode::kPackedPerKBlock || plan.b == BMode::kPrepacked ||
                        plan.b == BMode::kPackedBlocks;
  plan.row_calls = p.row_calls && mk.tile_row != nullptr && packed_a && packed_b;
  return plan;
}

}  // namespace kiln::runtime::gemm_detail
