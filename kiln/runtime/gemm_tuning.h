// The blocking the float32 GEMM engine uses on this machine: derived from the CPU's caches and
// FMA throughput (gemm_plan.h: derive_gemm_params), except for the classes of products that the
// machine's tuned table holds (made by `kiln tune`, runtime/gemm_tuner.h), whose measured
// blocking replaces the derived one.
//
// Classes: a product's class is its depth (shallow k <= 160, mid <= 640, deep), its width
// (narrow n <= 128, wide), its height (few m <= 64 rows, many) and its transposes (nn, tn, nt,
// tt): "deep-wide-many-nn". One tuned entry serves every product of its class that is at least
// as wide as the narrowest product it was measured on (`n_min`). A narrower product whose tiles
// of the tuned shape would be emptier than those of the derived shape (the share of the tiles'
// columns that hold C's columns: 32 columns fill half of a 6 x 64 tile, all of a 12 x 32 one)
// runs the derived blocking instead, as its plan says ("derived, narrower than tuned CLASS"):
// the tuned shape was never timed that empty.
//
// The table is one text file per CPU model and kernel set, under the cache directory
// (KILN_CACHE_DIR, else $HOME/.cache/kiln): gemm/<cpu_key>/<isa>.tune, written atomically. It
// records its format, kiln's version, the CPU key and the ISA, the core's FMA peak, one line per
// tuned class (its blocking and plan thresholds), on the float32 kernel sets the fused attention
// kernels' query blocks (their products run on these kernels), and a checksum. A table that is
// torn, corrupt, in an older format, made by another kiln version or for another CPU is ignored
// with one warning in the log naming what is wrong (the derived blocking is used until `kiln tune`
// writes a new one); with no table at all kiln says once (KILN_LOG=info) that it uses the derived
// blocking. kiln never tunes on its own at start-up.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/runtime/gemm_microkernel.h"
#include "kiln/runtime/gemm_plan.h"

namespace kiln::runtime::gemm_detail {

// The class of a product, as above.
std::string gemm_class(const GemmShape& shape);

// One tuned class: the blocking and plan thresholds that ran it fastest (GemmParams' fields of
// the same names), and its gain over the derived blocking (derived time / tuned time on the
// class's shapes).
struct TunedClass {
  std::string name;    // gemm_class()
  std::string kernel;  // tile shape name, "12x32"
  int64_t kc = 0, nc = 0;
  int32_t b_ahead = 0;
  int64_t pack_b_min_rows = 0, direct_a_max_cols = 0, min_task_panels = 0;
  bool row_calls = true;      // GemmParams::row_calls
  bool task_b_blocks = true;  // GemmParams::task_b_blocks
  int64_t n_min = 1;          // the narrowest n among the shapes it was tuned on
  double gain = 1.0;
};

// The query rows a fused attention task takes at a time (runtime/kernels/attention.h), without
// and with causality, each one of kAttentionQueryBlocks (they all give the same bits), and the
// gain over the defaults on the tuner's attention shapes (default time / tuned time).
struct TunedAttention {
  int64_t query_block = 0, causal_query_block = 0;
  double gain = 1.0;
};
inline constexpr int64_t kAttentionQueryBlocks[] = {16, 32, 64};

struct TunedTable {
  std::string kiln_version;
  std::string cpu_key;
  std::string isa;
  double core_gflops = 0;  // one core's FMA peak when tuned (sets the task sizes)
  std::vector<TunedClass> classes;
  std::optional<TunedAttention> attention;  // float32 sets only; none: the kernels' defaults

  // The file's text, checksum last.
  std::string to_text() const;
  // Parses and checks a table for kernel set `mk` (kernel names, ranges, checksum): kiln::Error
  // naming `where` and what is wrong for anything else. Version and CPU are not checked here.
  static TunedTable parse(const std::string& text, const MicroKernels& mk,
                          const std::string& where);
};

// Where the table of kernel set `isa` lives for this CPU; "" when the cache directory is
// disabled (KILN_CACHE_DIR=).
std::string tuned_table_path(const std::string& isa);

// The GemmParams for `shape` on kernel set `mk`: the tuned class's blocking if the table has
// it (and `shape` is not too narrow for it, as above), else the derived one (thread-safe; the table
// is read once per process and kernel set). The object referred to is never changed or freed: a
// table loaded later (reload_gemm_tuning, use_gemm_tuning) publishes new objects, so its address
// identifies the blocking.
const GemmParams& gemm_params(const MicroKernels& mk, const GemmShape& shape);

// The derived GemmParams of kernel set `mk` (tile shape `kernel`), with this machine's caches
// and the core FMA peak kiln uses (the table's, else a short measurement made once).
GemmParams derived_gemm_params(const MicroKernels& mk, int32_t kernel = 0);

// One core's rate on kernel set `mk`, which sets its derived task sizes (gemm_plan.h): the loop
// of its instruction (the FMA, VDPBF16PS), or for AMX its tile kernel's rate on packed panels.
double measure_core_gflops(const MicroKernels& mk);

// The attention query blocks of kernel set `mk`'s tuned table, if it has them (thread-safe, as
// gemm_params).
std::optional<TunedAttention> tuned_attention(const MicroKernels& mk);

// Reads the table of `mk` from disk again (after `kiln tune` wrote one, or a test changed the
// cache directory). Returns a one-line status: "tuned table PATH (N classes)", or why the
// derived blocking is used.
std::string reload_gemm_tuning(const MicroKernels& mk);

// Uses `table` for kernel set `mk` in this process (nullopt: the derived blocking only),
// without reading or writing any file (the tuner's measurements and tests).
void use_gemm_tuning(const MicroKernels& mk, const std::optional<TunedTable>& table);

// One line: which blocking kernel set `mk` uses and why ("tuned table PATH (N classes)",
// "no tuned table at PATH: derived blocking", "tuned table PATH ignored (REASON): derived
// blocking").
std::string gemm_tuning_status(const MicroKernels& mk);

}  // namespace kiln::runtime::gemm_detail
