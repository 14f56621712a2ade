// The GEMM engine's blocking on this machine: derived, or from the tuned table (contract:
// gemm_tuning.h).
#include "kiln/runtime/gemm_tuning.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/log.h"
#include "kiln/version.h"

namespace kiln::runtime::gemm_detail {
namespace fs = std::filesystem;
namespace {

// Bumped whenever the table's fields or the engine's use of them change: older tables are then
// ignored (format 2: the plan thresholds pack_b_min_rows, direct_a_max_cols, min_task_panels;
// format 3: row_calls; format 4: task_b_blocks; format 5: n_min; format 6: the attention line).
constexpr int kTableFormat = 6;
constexpr const char* kMagic = "kiln-gemm-tuning";

constexpr const char* kDepth[] = {"shallow", "mid", "deep"};
constexpr const char* kWidth[] = {"narrow", "wide"};
constexpr const char* kHeight[] = {"few", "many"};
constexpr const char* kOps[] = {"nn", "tn", "nt", "tt"};
constexpr int kClassCount = 3 * 2 * 2 * 4;

int class_index(const GemmShape& s) {
  const int depth = s.k <= 160 ? 0 : s.k <= 640 ? 1 : 2;
  const int width = s.n <= 128 ? 0 : 1;
  const int height = s.m <= 64 ? 0 : 1;
  const int ops = (s.ta ? 1 : 0) + (s.tb ? 2 : 0);
  return ((depth * 2 + width) * 2 + height) * 4 + ops;
}

std::string class_name(int index) {
  const int ops = index % 4, height = index / 4 % 2, width = index / 8 % 2, depth = index / 16;
  return fmt::format("{}-{}-{}-{}", kDepth[depth], kWidth[width], kHeight[height], kOps[ops]);
}

int class_by_name(const std::string& name) {
  for (int i = 0; i < kClassCount; ++i)
    if (class_name(i) == name) return i;
  return -1;
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The rate of `mk`'s first tile shape on packed panels, best of 4 rounds: an A panel (in L1)
// against 16 B panels of the same depth (from L2), each tile continuing its C block.
double measure_tile_gflops(const MicroKernels& mk) {
  using Clock = std::chrono::steady_clock;
  const MicroKernel& shape = mk.shapes[0];
  // 128 steps of k (pairs on the pair sets): whole AMX tiles of 16 pairs.
  const int64_t kc = 128, panels = 16;
  const int64_t panel_floats = kc * std::max(shape.mr, shape.nr);
  std::vector<float> a(size_t(panel_floats) + 16, 0.0f),
      b(size_t(panels * panel_floats) + 16, 0.0f);
  std::vector<float> c(size_t(shape.mr * panels * shape.nr) + 16, 0.0f);
  // 64-byte aligned panels, as the engine's scratch gives them (tile loads of unaligned rows
  // read twice the lines).
  auto aligned = [](std::vector<float>& v) {
    return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(v.data()) + 63) / 64 * 64);
  };
  MicroTile t;
  t.kc = kc;
  t.a = aligned(a);
  t.ldb = shape.nr;
  t.ldc = panels * shape.nr;
  t.rows = shape.mr;
  t.cols = shape.nr;
  t.accumulate = 1;
  t.b_padded = 1;
  double best = 0;
  if (mk.begin_tiles) mk.begin_tiles();
  for (int r = 0; r < 4; ++r) {
    const Clock::time_point t0 = Clock::now();
    for (int rep = 0; rep < 16; ++rep)
      for (int64_t j = 0; j < panels; ++j) {
        t.b = aligned(b) + j * panel_floats;
        t.c = aligned(c) + j * shape.nr;
        shape.tile(t);
      }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const double flops = 16.0 * double(panels) * 2.0 * shape.mr * shape.nr * kc * mk.k_per_step;
    if (s > 0) best = std::max(best, flops / s * 1e-9);
  }
  if (mk.end_tiles) mk.end_tiles();
  return best;
}

}  // namespace

// Measured once (a few milliseconds) when no table gives it. For a set whose tiles load their
// operands into tile registers (AMX) the tile kernel's rate: there the tile loads bound a
// product, not the dot products (on a Xeon with AMX: 0.5-0.6 of TDPBF16PS's loop), and tasks
// sized at the loop's rate were two to three times longer than meant, so that products of tens
// of MFLOP ran on one thread.
double measure_core_gflops(const MicroKernels& mk) {
  if (mk.pair_layout == PairLayout::kTiles) return measure_tile_gflops(mk);
  using Clock = std::chrono::steady_clock;
  const int64_t iterations = 1 << 15;
  double best = 0;
  for (int r = 0; r < 4; ++r) {
    const Clock::time_point t0 = Clock::now();
    volatile float sink = mk.fma_loop(iterations);
    (void)sink;
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0) best = std::max(best, double(iterations) * mk.fma_loop_flops / s * 1e-9);
  }
  return best;
}

namespace {

// The share of the columns of the tiles that cover n columns with tiles nr wide that hold
// columns of C.
double column_fill(int64_t n, int64_t nr) { return double(n) / double(ceil_div(n, nr) * nr); }

// Everything gemm_params() reads for one kernel set; immutable once published.
struct Tuning {
  std::vector<GemmParams> derived;  // per tile shape
  std::array<std::optional<GemmParams>, kClassCount> tuned;
  std::array<std::string, kClassCount> sources;  // "tuned CLASS": GemmParams::source
  // Per tuned class: the narrowest n it was tuned on, and the derived blocking its narrower
  // products run when the tuned tile shape would leave more of their tiles empty.
  std::array<int64_t, kClassCount> n_min{};
  std::array<std::optional<GemmParams>, kClassCount> narrower;
  std::array<std::string, kClassCount> narrower_sources;  // "derived, narrower than tuned CLASS"
  std::optional<TunedAttention> attention;
  std::string status;

  const GemmParams& params(const MicroKernels& mk, const GemmShape& shape) const {
    const size_t index = size_t(class_index(shape));
    const std::optional<GemmParams>& p = tuned[index];
    if (!p) return derived[0];
    if (shape.n < n_min[index] && column_fill(shape.n, mk.shapes[p->kernel].nr) <
                                      column_fill(shape.n, mk.shapes[derived[0].kernel].nr))
      return *narrower[index];
    return *p;
  }
};

std::string cache_dir() {
  if (std::optional<std::string> dir = knobs::cache_dir()) return *dir;
  if (std::optional<std::string> home = knobs::home_dir())
    return (fs::path(*home) / ".cache" / "kiln").string();
  return "";
}

GemmParams tuned_params(const GemmParams& derived_for_kernel, const TunedClass& c,
                        const std::string& source) {
  GemmParams p = derived_for_kernel;
  p.kc = c.kc;
  p.nc = c.nc;
  p.b_ahead = c.b_ahead;
  p.pack_b_min_rows = c.pack_b_min_rows;
  p.direct_a_max_cols = c.direct_a_max_cols;
  p.min_task_panels = c.min_task_panels;
  p.row_calls = c.row_calls;
  p.task_b_blocks = c.task_b_blocks;
  p.source = source.c_str();
  return p;
}

std::unique_ptr<Tuning> make_tuning(const MicroKernels& mk, const std::optional<TunedTable>& table,
                                    std::string status) {
  auto t = std::make_unique<Tuning>();
  const double gflops =
      table && table->core_gflops > 0 ? table->core_gflops : measure_core_gflops(mk);
  for (int32_t i = 0; i < mk.shape_count; ++i)
    t->derived.push_back(derive_gemm_params(mk, i, cpu_info(), gflops));
  if (table)
    for (const TunedClass& c : table->classes) {
      const int index = class_by_name(c.name);
      int32_t kernel = 0;
      while (kernel < mk.shape_count && c.kernel != mk.shapes[kernel].name) ++kernel;
      if (index >= 0 && kernel < mk.shape_count) {
        const size_t i = size_t(index);
        t->sources[i] = "tuned " + c.name;
        t->tuned[i] = tuned_params(t->derived[size_t(kernel)], c, t->sources[i]);
        t->n_min[i] = c.n_min;
        t->narrower_sources[i] = "derived, narrower than tuned " + c.name;
        t->narrower[i] = t->derived[0];
        t->narrower[i]->source = t->narrower_sources[i].c_str();
      }
    }
  if (table) t->attention = table->attention;
  t->status = std::move(status);
  return t;
}

// Reads the table at `path`: the table, or nullopt and the status saying why not.
std::optional<TunedTable> read_table(const MicroKernels& mk, const std::string& path,
                                     std::string& status) {
  if (path.empty()) {
    status = "disk cache disabled (KILN_CACHE_DIR=): derived blocking";
    return std::nullopt;
  }
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    status = fmt::format("no tuned table at {}: derived blocking (run `kiln tune`)", path);
    log_info("GEMM: " + status);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  try {
    TunedTable table = TunedTable::parse(text.str(), mk, path);
    const std::string key = cpu_key(cpu_info());
    if (table.cpu_key != key)
      throw Error(fmt::format("made for CPU {}, this is {}", table.cpu_key, key));
    if (table.kiln_version != kVersion)
      throw Error(fmt::format("made by kiln {}, this is {}", table.kiln_version, kVersion));
    status = fmt::format("tuned table {} ({} classes{})", path, table.classes.size(),
                         table.attention ? fmt::format("; attention query blocks {}, causal {}",
                                                       table.attention->query_block,
                                                       table.attention->causal_query_block)
                                         : std::string());
    log_info("GEMM: " + status);
    return table;
  } catch (const Error& e) {
    status = fmt::format(
        "tuned table {} ignored ({}): derived blocking until `kiln tune` "
        "rebuilds it",
        path, e.what());
    log_warning("GEMM: " + status);
    return std::nullopt;
  }
}

// The published tuning of each kernel set (avx512, avx2, and the bf16 pair sets), and every one
// published before (kept alive: gemm_params() may still be reading them on another thread).
struct Slots {
  std::mutex mutex;
  std::atomic<const Tuning*> avx512{nullptr}, avx2{nullptr}, bf16{nullptr}, bf16_emulated{nullptr},
      amx{nullptr}, amx_emulated{nullptr};
  std::vector<std::unique_ptr<Tuning>> all;
  std::atomic<const Tuning*>& of(const MicroKernels& mk) {
    const std::string_view isa = mk.isa;
    if (isa == "avx2") return avx2;
    if (isa == "avx512bf16") return bf16;
    if (isa == "avx512bf16-emulated") return bf16_emulated;
    if (isa == "amx") return amx;
    if (isa == "amx-emulated") return amx_emulated;
    return avx512;
  }
};

Slots& slots() {
  static Slots s;
  return s;
}

const Tuning& publish(const MicroKernels& mk, std::unique_ptr<Tuning> t) {
  Slots& s = slots();
  const Tuning* raw = t.get();
  s.all.push_back(std::move(t));
  s.of(mk).store(raw, std::memory_order_release);
  return *raw;
}

const Tuning& tuning(const MicroKernels& mk) {
  Slots& s = slots();
  if (const Tuning* t = s.of(mk).load(std::memory_order_acquire)) return *t;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (const Tuning* t = s.of(mk).load(std::memory_order_acquire)) return *t;
  std::string status;
  std::optional<TunedTable> table = read_table(mk, tuned_table_path(mk.isa), status);
  return publish(mk, make_tuning(mk, table, status));
}

// The rest of an `attention` line: its query blocks, each one of kAttentionQueryBlocks, and its
// gain; only in a float32 set's table (the pair sets do not run the attention products).
template <class Fail>
TunedAttention parse_attention(std::istream& in, const MicroKernels& mk, const Fail& fail) {
  TunedAttention a;
  auto field = [&](const char* name, auto& value) {
    std::string got;
    if (!(in >> got) || got != name || !(in >> value))
      throw fail(fmt::format(
          "attention: bad field `{}` (expected `attention query_block N causal_query_block N "
          "gain X`)",
          name));
  };
  field("query_block", a.query_block);
  field("causal_query_block", a.causal_query_block);
  field("gain", a.gain);
  if (mk.k_per_step != 1) throw fail(fmt::format("an attention line in a {} table", mk.isa));
  for (int64_t rows : {a.query_block, a.causal_query_block})
    if (std::find(std::begin(kAttentionQueryBlocks), std::end(kAttentionQueryBlocks), rows) ==
        std::end(kAttentionQueryBlocks))
      throw fail(fmt::format("attention: query block {} is not one of {}", rows,
                             fmt::join(kAttentionQueryBlocks, ", ")));
  if (!(a.gain > 0) || a.gain > 1e3)
    throw fail(fmt::format("attention: gain {} out of range", a.gain));
  return a;
}

}  // namespace

std::string gemm_class(const GemmShape& shape) { return class_name(class_index(shape)); }

std::string TunedTable::to_text() const {
  std::string text = fmt::format("{} {}\nkiln {}\ncpu {}\nisa {}\ncore_gflops {:.3f}\n", kMagic,
                                 kTableFormat, kiln_version, cpu_key, isa, core_gflops);
  for (const TunedClass& c : classes)
    text += fmt::format(
        "class {} kernel {} kc {} nc {} b_ahead {} pack_b_min_rows {} direct_a_max_cols {} "
        "min_task_panels {} row_calls {} task_b_blocks {} n_min {} gain {:.3f}\n",
        c.name, c.kernel, c.kc, c.nc, c.b_ahead, c.pack_b_min_rows, c.direct_a_max_cols,
        c.min_task_panels, c.row_calls ? 1 : 0, c.task_b_blocks ? 1 : 0, c.n_min, c.gain);
  if (attention)
    text += fmt::format("attention query_block {} causal_query_block {} gain {:.3f}\n",
                        attention->query_block, attention->causal_query_block, attention->gain);
  text += fmt::format("checksum {:016x}\n", fnv1a(text));
  return text;
}

TunedTable TunedTable::parse(const std::string& text, const MicroKernels& mk,
                             const std::string& where) {
  auto fail = [&](const std::string& what) { return Error(fmt::format("{}: {}", where, what)); };
  const size_t sum_at = text.rfind("checksum ");
  if (sum_at == std::string::npos || (sum_at > 0 && text[sum_at - 1] != '\n'))
    throw fail("no checksum line (a torn or foreign file)");
  const std::string body = text.substr(0, sum_at);
  const std::string want = fmt::format("checksum {:016x}\n", fnv1a(body));
  if (text.substr(sum_at) != want) throw fail("checksum mismatch (a torn or corrupt file)");
  std::istringstream in(body);
  std::string magic;
  int format = 0;
  if (!(in >> magic >> format) || magic != kMagic) throw fail("not a kiln GEMM tuning table");
  if (format != kTableFormat)
    throw fail(fmt::format("table format {}, this kiln reads format {}", format, kTableFormat));
  TunedTable table;
  std::string key;
  if (!(in >> key >> table.kiln_version) || key != "kiln") throw fail("expected `kiln VERSION`");
  if (!(in >> key >> table.cpu_key) || key != "cpu") throw fail("expected `cpu KEY`");
  if (!(in >> key >> table.isa) || key != "isa") throw fail("expected `isa NAME`");
  if (table.isa != mk.isa)
    throw fail(fmt::format("a table for the {} kernels, not {}", table.isa, mk.isa));
  if (!(in >> key >> table.core_gflops) || key != "core_gflops" || !(table.core_gflops > 0) ||
      table.core_gflops > 1e5)
    throw fail("expected `core_gflops X` with 0 < X <= 1e5");
  std::string word;
  while (in >> word) {
    if (word == "attention") {
      if (table.attention) throw fail("attention line twice");
      table.attention = parse_attention(in, mk, fail);
      continue;
    }
    if (word != "class") throw fail(fmt::format("unexpected `{}`", word));
    TunedClass c;
    if (!(in >> c.name)) throw fail("expected a class name after `class`");
    // Each field as `NAME VALUE`, in this order; a missing, misnamed or unreadable one is named.
    auto field = [&](const char* name, auto& value) {
      std::string got;
      if (!(in >> got) || got != name || !(in >> value))
        throw fail(fmt::format(
            "class {}: bad field `{}` (expected `class NAME kernel S kc N nc N b_ahead N "
            "pack_b_min_rows N direct_a_max_cols N min_task_panels N row_calls 0|1 "
            "task_b_blocks 0|1 n_min N gain X`)",
            c.name, name));
    };
    field("kernel", c.kernel);
    field("kc", c.kc);
    field("nc", c.nc);
    field("b_ahead", c.b_ahead);
    field("pack_b_min_rows", c.pack_b_min_rows);
    field("direct_a_max_cols", c.direct_a_max_cols);
    field("min_task_panels", c.min_task_panels);
    auto flag = [&](const char* name, bool& value) {
      int read = -1;
      field(name, read);
      if (read != 0 && read != 1)
        throw fail(fmt::format("class {}: {} {} is not 0 or 1", c.name, name, read));
      value = read == 1;
    };
    flag("row_calls", c.row_calls);
    flag("task_b_blocks", c.task_b_blocks);
    field("n_min", c.n_min);
    field("gain", c.gain);
    if (class_by_name(c.name) < 0) throw fail(fmt::format("unknown class `{}`", c.name));
    const MicroKernel* kernel = mk.find(c.kernel.c_str());
    if (!kernel) throw fail(fmt::format("unknown {} tile shape `{}`", mk.isa, c.kernel));
    if (c.kc < 8 || c.kc > 8192)
      throw fail(fmt::format("class {}: kc {} out of [8, 8192]", c.name, c.kc));
    if (c.nc < kernel->nr || c.nc > 65536 || c.nc % kernel->nr != 0)
      throw fail(fmt::format("class {}: nc {} is not a multiple of {} in [{}, 65536]", c.name, c.nc,
                             kernel->nr, kernel->nr));
    if (c.b_ahead < 0 || c.b_ahead > 1024)
      throw fail(fmt::format("class {}: b_ahead {} out of [0, 1024]", c.name, c.b_ahead));
    if (c.pack_b_min_rows < 1 || c.pack_b_min_rows > (int64_t(1) << 30))
      throw fail(
          fmt::format("class {}: pack_b_min_rows {} out of [1, 2^30]", c.name, c.pack_b_min_rows));
    if (c.direct_a_max_cols < 0 || c.direct_a_max_cols > (int64_t(1) << 30))
      throw fail(fmt::format("class {}: direct_a_max_cols {} out of [0, 2^30]", c.name,
                             c.direct_a_max_cols));
    if (c.min_task_panels < 1 || c.min_task_panels > 1024)
      throw fail(
          fmt::format("class {}: min_task_panels {} out of [1, 1024]", c.name, c.min_task_panels));
    if (c.n_min < 1 || c.n_min > (int64_t(1) << 30))
      throw fail(fmt::format("class {}: n_min {} out of [1, 2^30]", c.name, c.n_min));
    if (!(c.gain > 0) || c.gain > 1e3)
      throw fail(fmt::format("class {}: gain {} out of range", c.name, c.gain));
    for (const TunedClass& other : table.classes)
      if (other.name == c.name) throw fail(fmt::format("class {} twice", c.name));
    table.classes.push_back(c);
  }
  return table;
}

std::string tuned_table_path(const std::string& isa) {
  const std::string dir = cache_dir();
  if (dir.empty()) return "";
  return (fs::path(dir) / "gemm" / cpu_key(cpu_info()) / (isa + ".tune")).string();
}

const GemmParams& gemm_params(const MicroKernels& mk, const GemmShape& shape) {
  return tuning(mk).params(mk, shape);
}

std::optional<TunedAttention> tuned_attention(const MicroKernels& mk) {
  return tuning(mk).attention;
}

GemmParams derived_gemm_params(const MicroKernels& mk, int32_t kernel) {
  const Tuning& t = tuning(mk);
  return t.derived[size_t(std::clamp<int32_t>(kernel, 0, int32_t(t.derived.size()) - 1))];
}

std::string reload_gemm_tuning(const MicroKernels& mk) {
  std::lock_guard<std::mutex> lock(slots().mutex);
  std::string status;
  std::optional<TunedTable> table = read_table(mk, tuned_table_path(mk.isa), status);
  return publish(mk, make_tuning(mk, table, status)).status;
}

void use_gemm_tuning(const MicroKernels& mk, const std::optional<TunedTable>& table) {
  std::lock_guard<std::mutex> lock(slots().mutex);
  publish(mk, make_tuning(
                  mk, table,
                  table ? fmt::format("tuned table in memory ({} classes)", table->classes.size())
                        : std::string("derived blocking")));
}

std::string gemm_tuning_status(const MicroKernels& mk) { return tuning(mk).status; }

}  // namespace kiln::runtime::gemm_detail
