// The GEMM engine's blocking is speed only: every candidate plan the tuner may choose (tile
// shape, k and column blocks, prefetch distance, grid) computes each element of C as the
// microkernel contract's one FMA chain over k, bit for bit equal to a scalar std::fma loop. The
// tuned table: its text round-trips, and a torn, corrupt or foreign table is ignored with a
// warning (the derived blocking is used) until a tuning run rewrites it. Fixed seeds.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/error.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuner.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/log.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/tuning_cache_dir_guard.h"

namespace kiln::runtime::gemm_detail {
namespace {

namespace fs = std::filesystem;

// The kernel sets this CPU runs.
std::vector<const MicroKernels*> engines() {
  std::vector<const MicroKernels*> out;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) out.push_back(&avx512_microkernels());
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    out.push_back(&avx2_microkernels());
  return out;
}

struct Product {
  int64_t m, n, k;
  bool ta, tb;
  std::vector<float> a, b, c0;
  int64_t lda, ldb, ldc;
  Product(int64_t m_, int64_t n_, int64_t k_, bool ta_, bool tb_, uint64_t seed)
      : m(m_), n(n_), k(k_), ta(ta_), tb(tb_) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    lda = (ta ? m : k) + 1;
    ldb = (tb ? k : n) + 3;
    ldc = n + 2;
    a.resize(size_t((ta ? k : m) * lda));
    b.resize(size_t((tb ? n : k) * ldb));
    c0.resize(size_t(m * ldc));
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    for (float& x : c0) x = u(rng);
  }
  // The contract's chain: acc = C or 0; acc = fma(a(i, p), b(p, j), acc) for p in order.
  std::vector<float> reference(bool accumulate) const {
    std::vector<float> c = c0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float acc = accumulate ? c0[size_t(i * ldc + j)] : 0.0f;
        for (int64_t p = 0; p < k; ++p) {
          const float x = a[size_t(ta ? p * lda + i : i * lda + p)];
          const float y = b[size_t(tb ? j * ldb + p : p * ldb + j)];
          acc = std::fma(x, y, acc);
        }
        c[size_t(i * ldc + j)] = acc;
      }
    return c;
  }
  // Under `grid`, or the grid `p` plans for 3 threads when grid is {0, 0}.
  std::vector<float> run(const MicroKernels& mk, const GemmParams& p, GemmGrid grid,
                         bool accumulate) const {
    std::vector<float> c = c0;
    const GemmShape shape{m, n, k, ta, tb, 3, false};
    const GemmPlan plan =
        grid.row_blocks > 0 ? make_gemm_plan(mk, shape, p, grid) : make_gemm_plan(mk, shape, p);
    run_gemm(mk, plan, {ta, tb, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate});
    return c;
  }
};

TEST(GemmTuningTest, EveryCandidatePlanComputesTheContractsFmaChain) {
  const std::vector<const MicroKernels*> sets = engines();
  if (sets.empty()) GTEST_SKIP() << "this CPU runs only Eigen's GEMM";
  const int saved = num_threads();
  set_num_threads(3);
  // Deep k (several k blocks whatever kc), transposed operands, the C^T products, a B large
  // enough to be copied block by block, a narrow and a one-row C, fewer rows than a B packed in
  // blocks by column tasks has columns.
  const std::vector<Product> products = {
      Product(37, 70, 301, false, false, 1),   Product(29, 131, 200, true, false, 2),
      Product(20, 200, 90, false, true, 3),    Product(300, 10, 50, true, false, 4),
      Product(40, 70, 16000, false, false, 5), Product(1, 45, 33, true, true, 6),
      Product(60, 300, 500, true, false, 7)};
  for (const MicroKernels* mk : sets) {
    for (const Product& pr : products) {
      const std::vector<float> want_set = pr.reference(false), want_acc = pr.reference(true);
      for (int32_t kernel = 0; kernel < mk->shape_count; ++kernel) {
        const GemmParams base = derived_gemm_params(*mk, kernel);
        for (int64_t kc : {int64_t(16), int64_t(48), base.kc, int64_t(1000)})
          for (int32_t ahead : {0, 32})
            for (GemmGrid grid : {GemmGrid{1, 1}, GemmGrid{3, 2}}) {
              GemmParams p = base;
              p.kc = kc;
              p.nc = 2 * mk->shapes[kernel].nr;
              p.b_ahead = ahead;
              const std::string what =
                  fmt::format("{} {} {}x{}x{} ta={} tb={} kc {} ahead {} grid {}x{}", mk->isa,
                              mk->shapes[kernel].name, pr.m, pr.k, pr.n, pr.ta, pr.tb, kc, ahead,
                              grid.row_blocks, grid.col_blocks);
              EXPECT_TRUE(pr.run(*mk, p, grid, false) == want_set) << what;
              EXPECT_TRUE(pr.run(*mk, p, grid, true) == want_acc) << what << " accumulate";
              if (HasFailure()) {
                set_num_threads(saved);
                return;
              }
            }
        // The plan thresholds: the tuner's candidates (each halved and doubled) and the
        // extremes (B always and never packed, A always packed and always read directly, tasks
        // of one panel and of many), under a fixed and the planned grid.
        std::vector<GemmParams> thresholds = threshold_candidates(base);
        for (int64_t rows : {int64_t(1), int64_t(1) << 30})
          for (int64_t cols : {int64_t(0), int64_t(1) << 30})
            for (int64_t panels : {int64_t(1), int64_t(64)}) {
              GemmParams p = base;
              p.pack_b_min_rows = rows;
              p.direct_a_max_cols = cols;
              p.min_task_panels = panels;
              thresholds.push_back(p);
            }
        // A small L2: a B of 300 x 500 floats outgrows it, packed in blocks by column tasks
        // under 60 rows (B packed from 1 row).
        GemmParams blocks = base;
        blocks.pack_b_min_rows = 1;
        blocks.l2_bytes = 64 << 10;
        thresholds.push_back(blocks);
        // The same B packed as the other rules say instead (task_b_blocks off).
        GemmParams before = blocks;
        before.task_b_blocks = false;
        thresholds.push_back(before);
        if (pr.m == 60) {
          const GemmShape on_three{pr.m, pr.n, pr.k, pr.ta, pr.tb, 3};
          EXPECT_EQ(make_gemm_plan(*mk, on_three, blocks).b, BMode::kPackedBlocks)
              << mk->isa << " " << mk->shapes[kernel].name;
          EXPECT_NE(make_gemm_plan(*mk, on_three, before).b, BMode::kPackedBlocks)
              << mk->isa << " " << mk->shapes[kernel].name;
        }
        for (const GemmParams& p : thresholds)
          for (GemmGrid grid : {GemmGrid{3, 2}, GemmGrid{0, 0}}) {
            const std::string what = fmt::format(
                "{} {} {}x{}x{} ta={} tb={} pack_b_min_rows {} direct_a_max_cols {} "
                "min_task_panels {} grid {}x{}",
                mk->isa, mk->shapes[kernel].name, pr.m, pr.k, pr.n, pr.ta, pr.tb, p.pack_b_min_rows,
                p.direct_a_max_cols, p.min_task_panels, grid.row_blocks, grid.col_blocks);
            EXPECT_TRUE(pr.run(*mk, p, grid, false) == want_set) << what;
            EXPECT_TRUE(pr.run(*mk, p, grid, true) == want_acc) << what << " accumulate";
            if (HasFailure()) {
              set_num_threads(saved);
              return;
            }
          }
      }
    }
  }
  set_num_threads(saved);
}

TEST(GemmTuningTest, ThresholdCandidatesHalveAndDoubleEachThreshold) {
  GemmParams p;
  p.pack_b_min_rows = 192;
  p.direct_a_max_cols = 128;
  p.min_task_panels = 4;
  const std::vector<GemmParams> c = threshold_candidates(p);
  ASSERT_EQ(c.size(), 6u);
  int changed[3] = {0, 0, 0};
  for (const GemmParams& q : c) {
    const int differ =
        (q.pack_b_min_rows != 192) + (q.direct_a_max_cols != 128) + (q.min_task_panels != 4);
    EXPECT_EQ(differ, 1);  // one threshold at a time
    EXPECT_EQ(q.kc, p.kc);
    EXPECT_EQ(q.nc, p.nc);
    if (q.pack_b_min_rows != 192) {
      EXPECT_TRUE(q.pack_b_min_rows == 96 || q.pack_b_min_rows == 384) << q.pack_b_min_rows;
      ++changed[0];
    }
    if (q.direct_a_max_cols != 128) {
      EXPECT_TRUE(q.direct_a_max_cols == 64 || q.direct_a_max_cols == 256);
      ++changed[1];
    }
    if (q.min_task_panels != 4) {
      EXPECT_TRUE(q.min_task_panels == 2 || q.min_task_panels == 8);
      ++changed[2];
    }
  }
  EXPECT_EQ(changed[0], 2);
  EXPECT_EQ(changed[1], 2);
  EXPECT_EQ(changed[2], 2);
}

// ------------------------------------------------------------------------------ the table

// The table's checksum (FNV-1a, 64 bits, of the text before the checksum line), to write tables
// by hand.
uint64_t table_checksum(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A table as kiln wrote them in format 1 (no plan thresholds), correctly signed.
std::string format1_table(const MicroKernels& mk) {
  const std::string body = fmt::format(
      "kiln-gemm-tuning 1\nkiln 0.1.0\ncpu {}\nisa {}\ncore_gflops 123.500\nclass "
      "deep-wide-many-nn kernel {} kc 256 nc {} b_ahead 16 gain 1.250\n",
      cpu_key(cpu_info()), mk.isa, mk.shapes[0].name, mk.shapes[0].nr * 4);
  return body + fmt::format("checksum {:016x}\n", table_checksum(body));
}

TunedTable sample_table(const MicroKernels& mk) {
  TunedTable t;
  t.kiln_version = "0.1.0";
  t.cpu_key = cpu_key(cpu_info());
  t.isa = mk.isa;
  t.core_gflops = 123.5;
  t.classes.push_back(TunedClass{"deep-wide-many-nn", mk.shapes[mk.shape_count - 1].name, 256,
                                 int64_t(mk.shapes[mk.shape_count - 1].nr) * 4, 16, 96, 0, 2, true,
                                 false, 1024, 1.25});
  t.classes.push_back(TunedClass{"shallow-narrow-few-tn", mk.shapes[0].name, 64,
                                 int64_t(mk.shapes[0].nr), 2, 384, 256, 8, false, true, 32, 1.0});
  return t;
}

TEST(GemmTuningTest, ClassesNameDepthWidthHeightAndTransposes) {
  EXPECT_EQ(gemm_class({1024, 1024, 1024, false, false}), "deep-wide-many-nn");
  EXPECT_EQ(gemm_class({32, 256, 1024, false, true}), "deep-wide-few-nt");
  EXPECT_EQ(gemm_class({12544, 32, 144, false, false}), "shallow-narrow-many-nn");
  EXPECT_EQ(gemm_class({64, 128, 640, true, true}), "mid-narrow-few-tt");
}

TEST(GemmTuningTest, TableTextRoundTripsAndRejectsDamage) {
  const std::vector<const MicroKernels*> sets = engines();
  if (sets.empty()) GTEST_SKIP() << "this CPU runs only Eigen's GEMM";
  const MicroKernels& mk = *sets.front();
  const TunedTable t = sample_table(mk);
  const std::string text = t.to_text();
  const TunedTable back = TunedTable::parse(text, mk, "t");
  EXPECT_EQ(back.to_text(), text);
  ASSERT_EQ(back.classes.size(), 2u);
  EXPECT_EQ(back.classes[0].kc, 256);
  EXPECT_EQ(back.classes[0].pack_b_min_rows, 96);
  EXPECT_EQ(back.classes[0].direct_a_max_cols, 0);
  EXPECT_EQ(back.classes[0].min_task_panels, 2);
  EXPECT_EQ(back.classes[1].pack_b_min_rows, 384);
  EXPECT_EQ(back.classes[1].direct_a_max_cols, 256);
  EXPECT_EQ(back.classes[1].min_task_panels, 8);
  EXPECT_TRUE(back.classes[0].row_calls);
  EXPECT_FALSE(back.classes[1].row_calls);
  EXPECT_FALSE(back.classes[0].task_b_blocks);
  EXPECT_TRUE(back.classes[1].task_b_blocks);
  EXPECT_EQ(back.classes[0].n_min, 1024);
  EXPECT_EQ(back.classes[1].n_min, 32);

  auto rejects = [&](const std::string& bad, const std::string& why) {
    try {
      TunedTable::parse(bad, mk, "bad.tune");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.tune"), std::string::npos) << e.what();
    }
  };
  rejects(text.substr(0, text.size() / 2), "no checksum");  // torn
  std::string flipped = text;
  flipped[text.find("kc 256") + 3] = '9';  // kc 956: the checksum no longer matches
  rejects(flipped, "checksum mismatch");
  rejects("", "no checksum");
  // Well-formed checksums over bad contents.
  auto resigned = [&](TunedTable u) { return u.to_text(); };
  TunedTable u = t;
  u.classes[0].kernel = "99x99";
  rejects(resigned(u), "unknown");
  u = t;
  u.classes[0].nc += 1;
  rejects(resigned(u), "not a multiple");
  u = t;
  u.classes[0].kc = 3;
  rejects(resigned(u), "kc 3 out of");
  u = t;
  u.classes[0].pack_b_min_rows = 0;
  rejects(resigned(u), "pack_b_min_rows 0 out of");
  u = t;
  u.classes[1].direct_a_max_cols = -1;
  rejects(resigned(u), "direct_a_max_cols -1 out of");
  u = t;
  u.classes[1].min_task_panels = 0;
  rejects(resigned(u), "min_task_panels 0 out of");
  u = t;
  u.classes[0].n_min = 0;
  rejects(resigned(u), "n_min 0 out of");
  // A field missing, misnamed or unreadable (under a valid checksum) is named.
  auto signed_text = [](const std::string& body) {
    return body + fmt::format("checksum {:016x}\n", table_checksum(body));
  };
  const std::string body = text.substr(0, text.rfind("checksum "));
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string b = body;
    const size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return signed_text(b.replace(at, from.size(), to));
  };
  rejects(edited(" direct_a_max_cols 0", ""), "bad field `direct_a_max_cols`");
  rejects(edited("min_task_panels 2", "min_task_panel 2"), "bad field `min_task_panels`");
  rejects(edited("pack_b_min_rows 96", "pack_b_min_rows many"), "bad field `pack_b_min_rows`");
  rejects(edited(" row_calls 1", ""), "bad field `row_calls`");
  rejects(edited("row_calls 0", "row_calls 2"), "row_calls 2 is not 0 or 1");
  rejects(edited(" task_b_blocks 0", ""), "bad field `task_b_blocks`");
  rejects(edited("task_b_blocks 1", "task_b_blocks yes"), "bad field `task_b_blocks`");
  rejects(edited(" n_min 32", ""), "bad field `n_min`");
  EXPECT_EQ(TunedTable::parse(signed_text(body), mk, "t").to_text(), text);
  u = t;
  u.classes[1].name = "deep-wide-many-nn";
  rejects(resigned(u), "twice");
  u = t;
  u.classes[0].name = "wide-deep";
  rejects(resigned(u), "unknown class");
  u = t;
  u.isa = std::string(mk.isa) == "avx2" ? "avx512" : "avx2";
  rejects(resigned(u), "a table for the");
}

// KILN_CACHE_DIR in a fresh directory, the float32 sets' tuning reread after the test.
class CacheDirGuard : public TuningCacheDirGuard {
 public:
  explicit CacheDirGuard(const std::string& name) : TuningCacheDirGuard(name, engines()) {}
};

// Collects warnings while alive.
class Warnings {
 public:
  Warnings() {
    previous_ = set_log_sink([this](LogLevel level, std::string_view m) {
      if (level == LogLevel::kWarning) lines.emplace_back(m);
    });
  }
  ~Warnings() { set_log_sink(previous_); }
  std::vector<std::string> lines;

 private:
  LogSink previous_;
};

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST(GemmTuningTest, DamagedOrForeignTablesAreIgnoredWithAWarningAndRebuilt) {
  const std::vector<const MicroKernels*> sets = engines();
  if (sets.empty()) GTEST_SKIP() << "this CPU runs only Eigen's GEMM";
  const MicroKernels& mk = *sets.front();
  CacheDirGuard guard("damaged");
  const std::string path = tuned_table_path(mk.isa);
  const GemmShape shape{1024, 1024, 1024, false, false, 1, false};
  const GemmParams derived = derived_gemm_params(mk, 0);

  {  // No table: derived blocking, no warning.
    Warnings w;
    EXPECT_NE(reload_gemm_tuning(mk).find("no tuned table"), std::string::npos);
    EXPECT_TRUE(w.lines.empty());
    EXPECT_STREQ(gemm_params(mk, shape).source, "derived");
  }
  TunedTable good = sample_table(mk);
  const std::string text = good.to_text();
  TunedTable foreign = good;
  foreign.cpu_key = "AuthenticAMD-25-17-1-AMD-EPYC-9R14";
  TunedTable old_version = good;
  old_version.kiln_version = "0.0.1";
  const std::pair<std::string, std::string> damaged[] = {
      {text.substr(0, text.size() - 10), "checksum"},
      {std::string(text).replace(text.find("kc 256"), 6, "kc 257"), "checksum mismatch"},
      {"\x7f"
       "ELF garbage",
       "no checksum"},
      {foreign.to_text(), "made for CPU AuthenticAMD-25-17-1-AMD-EPYC-9R14"},
      {old_version.to_text(), "made by kiln 0.0.1"},
      {format1_table(mk), "table format 1, this kiln reads format 6"}};
  for (const auto& [bytes, why] : damaged) {
    write_text(path, bytes);
    Warnings w;
    const std::string status = reload_gemm_tuning(mk);
    EXPECT_NE(status.find("ignored"), std::string::npos) << status;
    EXPECT_NE(status.find(why), std::string::npos) << status;
    ASSERT_EQ(w.lines.size(), 1u) << status;
    EXPECT_NE(w.lines[0].find(path), std::string::npos) << w.lines[0];
    const GemmParams& p = gemm_params(mk, shape);
    EXPECT_STREQ(p.source, "derived");
    EXPECT_EQ(p.kc, derived.kc);
  }
  // A good table is used for its classes only.
  write_text(path, text);
  EXPECT_NE(reload_gemm_tuning(mk).find("(2 classes)"), std::string::npos);
  EXPECT_STREQ(gemm_params(mk, shape).source, "tuned deep-wide-many-nn");
  EXPECT_EQ(gemm_params(mk, shape).kc, 256);
  EXPECT_STREQ(gemm_params(mk, GemmShape{1024, 1024, 100, false, false}).source, "derived");

  // A tuning run rebuilds a damaged table: a short one on two small shapes.
  write_text(path, "torn");
  reload_gemm_tuning(mk);
  TuneOptions o;
  o.shapes = {GemmShape{64, 96, 200, false, false}, GemmShape{40, 48, 30, true, false}};
  o.slice_seconds = 0.0005;
  o.rounds = 1;
  const TuneResult r = tune_gemm(mk, o);
  ASSERT_EQ(r.classes.size(), 2u);
  EXPECT_GT(r.core_gflops, 0);
  save_tuned_table(r.table, path);
  EXPECT_NE(reload_gemm_tuning(mk).find("tuned table"), std::string::npos);
  EXPECT_EQ(std::string(gemm_params(mk, o.shapes[0]).source), "tuned " + gemm_class(o.shapes[0]));
  // Whatever was chosen computes the same bits as the derived blocking.
  const Product pr(64, 96, 200, false, false, 9);
  EXPECT_TRUE(pr.run(mk, gemm_params(mk, o.shapes[0]), GemmGrid{1, 1}, true) ==
              pr.run(mk, derived, GemmGrid{2, 1}, true));
}

// Stage 6 times min_task_panels on the thread count asked for (none at one thread), where the
// candidates change the product's task grid, restores kiln's thread count, and whatever it
// chooses computes the contract's chain.
TEST(GemmTuningTest, GridStageTimesTaskGridsOnTheThreadCountAndKeepsTheBits) {
  const std::vector<const MicroKernels*> sets = engines();
  if (sets.empty()) GTEST_SKIP() << "this CPU runs only Eigen's GEMM";
  const MicroKernels& mk = *sets.front();
  // 11 row panels of 6 rows (or 6 of 12): min_task_panels 2, 4 and 8 give different grids on
  // 2 threads.
  const GemmShape shape{64, 200, 96, false, false};
  TuneOptions o;
  o.shapes = {shape};
  o.slice_seconds = 0.0005;
  o.rounds = 1;
  const int threads_before = num_threads();
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    o.threads = threads;
    const TuneResult r = tune_gemm(mk, o);
    EXPECT_EQ(num_threads(), threads_before);
    ASSERT_EQ(r.classes.size(), 1u);
    const TunedClassReport& c = r.classes[0];
    EXPECT_EQ(c.grid_threads, threads);
    if (threads == 1) {
      EXPECT_EQ(c.grid_candidates, 0);
      continue;
    }
    EXPECT_GE(c.grid_candidates, 1);
    EXPECT_LE(c.grid_candidates, 2);
    EXPECT_GT(c.grid_chosen_seconds, 0);
    const Product pr(shape.m, shape.n, shape.k, false, false, 17);
    EXPECT_TRUE(pr.run(mk, c.chosen, GemmGrid{0, 0}, false) == pr.reference(false));
  }
}

// KILN_LOG=debug shows each product's plan once; while profiling each product is an event of
// category "gemm" whose detail is its plan (also in the Chrome trace).
TEST(GemmTuningTest, PlansAreLoggedOnceAndProfiledWithTheirPlan) {
  const std::vector<const MicroKernels*> sets = engines();
  if (sets.empty()) GTEST_SKIP() << "this CPU runs only Eigen's GEMM";
  const Product pr(37, 53, 71, false, true, 3);
  std::vector<float> c = pr.c0;
  auto product = [&] {
    gemm<float>(pr.ta, pr.tb, pr.m, pr.n, pr.k, pr.a.data(), pr.lda, pr.b.data(), pr.ldb, c.data(),
                pr.ldc);
  };
  std::vector<std::string> lines;
  const LogLevel saved_level = log_level();
  set_log_level(LogLevel::kDebug);
  LogSink previous = set_log_sink([&](LogLevel, std::string_view m) { lines.emplace_back(m); });
  product();
  product();
  set_log_sink(previous);
  set_log_level(saved_level);
  int plans = 0;
  for (const std::string& line : lines)
    if (line.find("gemm plan: 37x71x53 nt") != std::string::npos) ++plans;
  EXPECT_EQ(plans, 1) << "lines: " << lines.size();

  start_profiling();
  product();
  const std::vector<ProfileEvent> events = stop_profiling();
  const ProfileEvent* event = nullptr;
  for (const ProfileEvent& e : events)
    if (e.category == "gemm") event = &e;
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->name, "gemm 37x71x53 tb");
  EXPECT_DOUBLE_EQ(event->flops, 2.0 * 37 * 53 * 71);
  EXPECT_NE(event->detail.find("37x71x53 nt"), std::string::npos) << event->detail;
  EXPECT_NE(event->detail.find(", grid "), std::string::npos) << event->detail;
  EXPECT_NE(chrome_trace_json(events).find("\"detail\":\"37x71x53 nt"), std::string::npos);
}

// A product runs with the blocking published when it runs: the plans remembered for repeated
// products are keyed by the published blocking, so a table loaded in between replaces them.
// A tuned class serves its products down to the narrowest n it was tuned on; a narrower one
// whose tiles of the tuned shape would hold a smaller share of C's columns than the derived
// shape's runs the derived blocking, and its plan says why.
TEST(GemmTuningTest, ProductsNarrowerThanTheTunedOnesRunTheDerivedShapeWhereItFillsMore) {
  for (const MicroKernels* mk : engines()) {
    SCOPED_TRACE(mk->isa);
    CacheDirGuard guard("narrower");
    const MicroKernel& derived = mk->shapes[0];
    int32_t wide = 0;
    for (int32_t i = 1; i < mk->shape_count; ++i)
      if (mk->shapes[i].nr > mk->shapes[wide].nr) wide = i;
    const int64_t nr = mk->shapes[wide].nr;
    ASSERT_GT(nr, derived.nr);
    auto table_with_n_min = [&](int64_t n_min) {
      TunedTable t = sample_table(*mk);
      t.classes = {TunedClass{"mid-narrow-many-nn", mk->shapes[wide].name, 256, nr * 2, 4, 96, 0, 4,
                              true, true, n_min, 1.1}};
      return t;
    };
    auto source_for = [&](int64_t n) {
      const GemmShape shape{512, n, 512, false, false, 1};
      EXPECT_EQ(gemm_class(shape), "mid-narrow-many-nn");
      const GemmParams& p = gemm_params(*mk, shape);
      const std::string plan = make_gemm_plan(*mk, shape, p).describe();
      EXPECT_NE(plan.find(std::string("(") + p.source + ")"), std::string::npos) << plan;
      return std::pair<std::string, int32_t>(p.source, p.kernel);
    };
    using Choice = std::pair<std::string, int32_t>;
    const Choice tuned{"tuned mid-narrow-many-nn", wide};
    use_gemm_tuning(*mk, table_with_n_min(128));
    // One tile of the derived shape filled, the tuned one's partly: the derived blocking.
    EXPECT_EQ(source_for(derived.nr), Choice("derived, narrower than tuned mid-narrow-many-nn", 0));
    // Three quarters of a tuned tile: no emptier than the derived shape's tiles.
    EXPECT_EQ(source_for(nr * 3 / 4), tuned);
    EXPECT_EQ(source_for(128), tuned);
    // Tuned on products as narrow: its measurement holds.
    use_gemm_tuning(*mk, table_with_n_min(derived.nr));
    EXPECT_EQ(source_for(derived.nr), tuned);
  }
}

TEST(GemmTuningTest, RepeatedProductsFollowANewTable) {
  const MicroKernels* mk = nullptr;
  for (const MicroKernels* set : engines())
    if (gemm_kernels() == set->isa) mk = set;
  if (mk == nullptr) GTEST_SKIP() << "the active kernels are " << gemm_kernels();
  CacheDirGuard guard("repeated");
  const GemmShape shape{40, 48, 30, true, false, 1, false};
  ASSERT_EQ(gemm_class(shape), "shallow-narrow-few-tn");  // a class sample_table tunes
  const Product pr(shape.m, shape.n, shape.k, shape.ta, shape.tb, 5);
  auto detail_of_a_run = [&] {
    std::vector<float> c = pr.c0;
    start_profiling();
    for (int i = 0; i < 3; ++i)
      gemm_serial<float>(pr.ta, pr.tb, pr.m, pr.n, pr.k, pr.a.data(), pr.lda, pr.b.data(), pr.ldb,
                         c.data(), pr.ldc);
    std::set<std::string> details;
    for (const ProfileEvent& e : stop_profiling())
      if (e.category == "gemm") details.insert(e.detail);
    EXPECT_EQ(details.size(), 1u);
    return details.empty() ? std::string() : *details.begin();
  };
  use_gemm_tuning(*mk, std::nullopt);
  const std::string derived = detail_of_a_run();
  EXPECT_NE(derived.find("(derived)"), std::string::npos) << derived;
  use_gemm_tuning(*mk, sample_table(*mk));
  const std::string tuned = detail_of_a_run();
  EXPECT_NE(tuned.find("(tuned shallow-narrow-few-tn)"), std::string::npos) << tuned;
  use_gemm_tuning(*mk, std::nullopt);
  EXPECT_EQ(detail_of_a_run(), derived);
}

}  // namespace
}  // namespace kiln::runtime::gemm_detail
