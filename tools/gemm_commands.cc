// `kiln gemm-plan`: how the GEMM engine runs one product on this machine (the plan, the
// blocking's source, the CPU facts it was derived from). `kiln tune`: measures the blocking of
// each class of products the training steps use and keeps it in the machine's tuned table, one
// per kernel set: the float32 kernels (with the fused attention kernels' query blocks, whose
// products run on them: runtime/kernels/attention.h), and the bf16 pair kernels where the CPU
// runs them (runtime/gemm_tuner.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "kiln/kiln.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuner.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/kernels/attention.h"
#include "tools/cli_conventions.h"
#include "tools/commands.h"

namespace kiln::tools {
namespace {

namespace gd = runtime::gemm_detail;

const gd::MicroKernels& engine_or_fail(const char* command) {
  const gd::MicroKernels* mk = gd::active_microkernels();
  if (mk == nullptr)
    throw Error(fmt::format(
        "kiln {}: float32 GEMMs run on Eigen here (KILN_GEMM=eigen, or a CPU without AVX2), "
        "which kiln does not plan or tune; unset KILN_GEMM or use KILN_GEMM=avx2|avx512",
        command));
  return *mk;
}

struct PlanArgs {
  int64_t m = 0, k = 0, n = 0;
  bool ta = false, tb = false, epilogue = false, loop_invariant_b = false;
  int threads = 0;
  std::string dtype = "float32";
  std::string rounded;  // "", "a", "b" or "ab": float32 operands rounded to bf16 as packed
};

// A bf16 product runs on the bf16 pair kernels where they are active and fit it
// (gemm_detail::bf16_kernels_for), else on the float32 kernels with its operands widened as they
// are packed (runtime::gemm_bf16).
void print_plan(const PlanArgs& a) {
  const bool bf16 = a.dtype == "bfloat16";
  if (!a.rounded.empty() && !bf16)
    throw Error(fmt::format(
        "kiln gemm-plan: --rounded {} describes float32 operands read as bf16; it needs --dtype "
        "bf16",
        a.rounded));
  const gd::MicroKernels* pairs = bf16 ? gd::bf16_kernels_for(a.m, a.n, a.k) : nullptr;
  const gd::MicroKernels& mk = pairs ? *pairs : engine_or_fail("gemm-plan");
  const int threads = a.threads > 0 ? a.threads : num_threads();
  gd::GemmShape shape{a.m, a.n, a.k, a.ta, a.tb, threads, a.epilogue};
  shape.a_bf16 = shape.b_bf16 = bf16;
  shape.a_rounded = a.rounded.find('a') != std::string::npos;
  shape.b_rounded = a.rounded.find('b') != std::string::npos;
  shape.b_invariant = a.loop_invariant_b;
  const gd::GemmParams& p = gd::gemm_params(mk, shape);
  const gd::GemmPlan plan = gd::make_gemm_plan(mk, shape, p);
  std::cout << "cpu:      " << runtime::cpu_info().describe() << "\n"
            << "kernels:  " << mk.isa << " (tile shapes:";
  for (int32_t i = 0; i < mk.shape_count; ++i) std::cout << " " << mk.shapes[i].name;
  std::cout
      << ")\n"
      << "blocking: " << gd::gemm_tuning_status(mk) << "\n"
      << "class:    " << gd::gemm_class(shape) << " (" << p.source << ")\n"
      << fmt::format(
             "params:   kc {}{} nc {} prefetch {} rows, A read directly up to {} columns "
             "and {} rows per tile, B packed from {} rows or where its rows crowd L2's {} "
             "sets of {} ways, B copied in blocks over {} KiB, tasks of at least {:.0f} kflop "
             "and {} row panels where the rows allow, a large B packed {}{}\n",
             p.kc, mk.k_per_step == 2 ? " pairs" : "", p.nc, p.b_ahead, p.direct_a_max_cols,
             p.mr_direct, p.pack_b_min_rows, p.l2_sets, p.l2_ways, p.large_b_bytes >> 10,
             p.min_task_flops / 1e3, p.min_task_panels,
             p.task_b_blocks ? "by its column tasks where they share it" : "before the tasks",
             !mk.tile_row  ? ""
             : p.row_calls ? ", a panel's whole tiles in one call"
                           : ", one call per tile")
      << "plan:     " << plan.describe() << "\n";
  if (bf16) {
    const runtime::CpuInfo& cpu = runtime::cpu_info();
    std::cout << fmt::format(
        "bfloat16: {}; C accumulated in float32, a bf16 result rounded once as its rows are "
        "done (bf16 kernels: {}, KILN_GEMM_BF16; this CPU: AVX512-BF16 {}, AMX-BF16 {})\n",
        !pairs ? "operands widened to float32 (exact) as they are packed, float32 FMAs"
        : pairs->pair_layout == gd::PairLayout::kTiles
            ? "operands packed as bf16 pairs in AMX tiles, multiplied by TDPBF16PS"
            : "operands packed as bf16 pairs, multiplied by VDPBF16PS",
        runtime::gemm_bf16_kernels(), cpu.avx512_bf16 ? "yes" : "no", cpu.amx_bf16 ? "yes" : "no");
    if (!pairs && gd::active_bf16_microkernels())
      std::cout << fmt::format(
          "          {}x{}x{} has a side under half of the {} kernels' tile: float32 kernels\n",
          a.m, a.k, a.n, runtime::gemm_bf16_kernels());
    if (const std::string note = gd::vdpbf16ps_choice_note(); !note.empty())
      std::cout << "          " << note << "\n";
  }
}

struct TuneArgs {
  bool dry_run = false;
  std::string start = "derived";
  std::string dtype = "all";  // the kernel sets tuned: float32, bfloat16 (the pair set) or all
  double slice_ms = 8;
  int rounds = 3;
};

// Tunes kernel set `mk` (the float32 one, or the bf16 pair set) and writes its table.
void tune_set(const gd::MicroKernels& mk, const TuneArgs& a) {
  gd::TuneOptions o;
  o.slice_seconds = a.slice_ms / 1e3;
  o.rounds = a.rounds;
  if (a.start == "constants") {
    // The engine's fixed blocking before it was derived from the machine: the set's first tile
    // shape (12 x 32 on AVX-512, 6 x 16 on AVX2), k blocks of 512, B blocks of 256 columns,
    // 16 rows of prefetch.
    gd::GemmParams p = gd::derived_gemm_params(mk, 0);
    p.kc = 512;
    p.nc = 256;
    p.b_ahead = 16;
    o.start = p;
  } else if (a.start == "poor") {
    // Blocks sized for a quarter of the caches.
    gd::GemmParams p = gd::derived_gemm_params(mk, 0);
    p.kc = std::max<int64_t>(16, p.kc / 4 / 16 * 16);
    p.nc = std::max<int64_t>(mk.shapes[0].nr, p.nc / 4 / mk.shapes[0].nr * mk.shapes[0].nr);
    p.b_ahead = 1;
    o.start = p;
  }
  const bool pairs = mk.k_per_step == 2;
  const int threads = num_threads();
  std::cout << "kiln tune: " << mk.isa << " kernels"
            << (pairs ? " (products of bf16 operands)" : "") << ", one thread"
            << (threads > 1 ? fmt::format(" (task grids on {} threads)", threads) : std::string())
            << ", start: " << a.start << "\n";
  o.progress = [](const std::string& line) { std::cout << "  " << line << std::endl; };
  gd::TuneResult r = gd::tune_gemm(mk, o);
  // The attention kernels' query blocks, from their defaults (whatever --start says: they are
  // no GEMM blocking), on the float32 kernels only.
  std::optional<runtime::AttentionTuneReport> attention;
  if (!pairs) {
    attention = runtime::tune_attention_blocks(o);
    r.table.attention = attention->tuned();
  }
  for (const gd::GemmShape& s : r.skipped)
    std::cout << fmt::format(
        "  {}x{}x{}{}{}: a side under half of the {} tile, runs on the float32 kernels (their "
        "table)\n",
        s.m, s.k, s.n, s.ta ? " ta" : "", s.tb ? " tb" : "", mk.isa);
  double start_s = 0, chosen_s = 0, flops = 0;
  std::cout << fmt::format("\n{:<22} {:>8} {:>8} {:>8} {:>6}  {}\n", "class", "start", "tuned",
                           "GFLOP/s", "gain", "chosen (shapes)");
  for (const gd::TunedClassReport& c : r.classes) {
    std::string shapes;
    for (const gd::GemmShape& s : c.shapes)
      shapes += fmt::format("{}{}x{}x{}{}{}", shapes.empty() ? "" : ", ", s.m, s.k, s.n,
                            s.ta ? " ta" : "", s.tb ? " tb" : "");
    std::cout << fmt::format(
        "{:<22} {:>6.0f}us {:>6.0f}us {:>8.1f} {:>5.2f}x  {} kc {}{} nc {} "
        "prefetch {}, B packed from {} rows, A direct up to {} columns, tasks of {} panels{}{}{} "
        "({})\n",
        c.name, c.start_seconds * 1e6, c.chosen_seconds * 1e6, c.flops / c.chosen_seconds * 1e-9,
        c.gain(), c.chosen_kernel, c.chosen.kc, pairs ? " pairs" : "", c.chosen.nc,
        c.chosen.b_ahead, c.chosen.pack_b_min_rows, c.chosen.direct_a_max_cols,
        c.chosen.min_task_panels, c.chosen.task_b_blocks ? "" : ", large B packed before the tasks",
        !mk.tile_row         ? ""
        : c.chosen.row_calls ? ", row calls"
                             : ", no row calls",
        c.grid_candidates == 0
            ? std::string()
            : fmt::format(" ({:.2f}x on {} threads)", c.grid_gain(), c.grid_threads),
        shapes);
    start_s += c.start_seconds;
    chosen_s += c.chosen_seconds;
    flops += c.flops;
  }
  if (chosen_s > 0)
    std::cout << fmt::format(
        "all classes: {:.1f} -> {:.1f} GFLOP/s ({:.2f}x over the {} blocking; {:.0f}% of the "
        "{:.1f} GFLOP/s {} peak), tuned in {:.1f} s\n",
        flops / start_s * 1e-9, flops / chosen_s * 1e-9, start_s / chosen_s, a.start,
        100 * flops / chosen_s * 1e-9 / r.core_gflops, r.core_gflops, pairs ? mk.isa : "FMA",
        r.seconds);
  if (attention)
    std::cout << fmt::format(
        "attention: query blocks {} / causal {} (defaults {} / {}): {:.2f}x / {:.2f}x (forward "
        "and gradient on [4, 16, 64, 32] and [2, 4, 512, 64], one thread)\n",
        attention->chosen.query, attention->chosen.causal, attention->start.query,
        attention->start.causal, attention->plain_gain, attention->causal_gain);
  if (a.dry_run) {
    std::cout << "dry run: the table was not written\n";
    return;
  }
  const std::string path = gd::tuned_table_path(mk.isa);
  gd::save_tuned_table(r.table, path);
  std::cout << "wrote " << path << "\n" << gd::reload_gemm_tuning(mk) << "\n";
}

// The float32 kernel set, then the bf16 pair set where bf16 products run on one.
void run_tune(const TuneArgs& a) {
  const gd::MicroKernels& mk = engine_or_fail("tune");
  const gd::MicroKernels* pairs = gd::active_bf16_microkernels();
  if (a.dtype == "bfloat16" && pairs == nullptr)
    throw Error(fmt::format(
        "kiln tune --dtype bfloat16: bf16 products run on the float32 kernels here (bf16 "
        "kernels: {}; AVX512-BF16 or AMX-BF16 and the avx512 float32 kernels are needed for "
        "pair kernels), which the float32 table serves; use --dtype float32 or all",
        runtime::gemm_bf16_kernels()));
  if (a.dtype != "bfloat16") tune_set(mk, a);
  if (a.dtype == "float32") return;
  if (pairs == nullptr) {
    std::cout << "\nbf16 products run on the float32 kernels here (bf16 kernels: "
              << runtime::gemm_bf16_kernels() << "): the table above serves them\n";
    return;
  }
  if (a.dtype == "all") std::cout << "\n";
  tune_set(*pairs, a);
}

}  // namespace

void add_gemm_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "gemm-plan", "print how the float32 GEMM engine runs C = op(A) op(B) of M x K x N here");
  cmd->add_option("M", a->m, "rows of C")->required()->check(CLI::PositiveNumber);
  cmd->add_option("K", a->k, "depth of the product")->required()->check(CLI::PositiveNumber);
  cmd->add_option("N", a->n, "columns of C")->required()->check(CLI::PositiveNumber);
  cmd->add_flag("--ta", a->ta, "A is stored transposed (K x M)");
  cmd->add_flag("--tb", a->tb, "B is stored transposed (N x K)");
  cmd->add_option("--dtype", a->dtype, "the operands' dtype: float32 or bfloat16 (bf16)")
      ->transform(CLI::Transformer({{"bf16", "bfloat16"}, {"f32", "float32"}}))
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  cmd->add_flag("--epilogue", a->epilogue,
                "whole row blocks finished by an epilogue (a fused matmul of a compiled step)");
  cmd->add_option("--rounded", a->rounded,
                  "with --dtype bf16: A, B or both are float32 rounded to bf16 as they are "
                  "packed (a mixed_bfloat16 layer's fused casts): a, b or ab")
      ->check(CLI::IsMember({"a", "b", "ab"}));
  cmd->add_flag("--loop-invariant-b", a->loop_invariant_b,
                "B is unchanged for the rest of a while loop (an RNN's recurrent kernel): a "
                "float32 B is packed once per loop");
  cmd->add_option("--threads", a->threads, "threads the product may use")
      ->check(CLI::PositiveNumber)
      ->default_str("KILN_NUM_THREADS, else the hardware threads");
  cmd->callback([a] { print_plan(*a); });
}

void add_tune_command(CLI::App& app) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "measure the GEMM blocking of each class of products on this machine and keep the "
      "fastest in its tuned table (under KILN_CACHE_DIR, else ~/.cache/kiln)");
  cmd->add_flag("--dry-run", a->dry_run, "measure and print, but write no table");
  cmd->add_option("--dtype", a->dtype,
                  "the kernel sets to tune: float32, bfloat16 (the bf16 pair kernels, where "
                  "this CPU runs them) or all")
      ->transform(CLI::Transformer({{"bf16", "bfloat16"}, {"f32", "float32"}}))
      ->check(CLI::IsMember({"all", "float32", "bfloat16"}));
  cmd->add_option("--start", a->start,
                  "the blocking the search starts from: derived (from the caches), constants "
                  "(the fixed blocking kiln used before) or poor (blocks for a quarter of the "
                  "caches)")
      ->check(CLI::IsMember({"derived", "constants", "poor"}));
  cmd->add_option("--slice-ms", a->slice_ms, "each timing repeats a product this long")
      ->check(CLI::Range(0.5, 1000.0));
  cmd->add_option("--rounds", a->rounds, "interleaved timings per candidate")
      ->check(CLI::Range(1, 20));
  cmd->callback([a] { run_tune(*a); });
}

}  // namespace kiln::tools
