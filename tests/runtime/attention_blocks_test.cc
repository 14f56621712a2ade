// The fused attention kernels' query blocks change their speed only (runtime/kernels/attention.h):
// the forward and gradient kernels give the same bits under every block of
// kAttentionQueryBlocks, in float32, float64 and bf16, causal or not, masked or not, with one
// batch entry (the gradient split into groups of rows) and lengths that no block divides. A
// block the kernels do not take is a kiln::Error. The tuned table carries the blocks (the text
// round-trips, bad values and misplaced lines are rejected naming them) and the kernels follow
// the table in use. Fixed seeds.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kiln/ir/bfloat16.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/gemm_engine.h"
#include "kiln/runtime/gemm_tuning.h"
#include "kiln/runtime/kernels/attention.h"
#include "kiln/runtime/threading.h"
#include "tests/runtime/tuning_cache_dir_guard.h"

namespace kiln::runtime {
namespace {

Array random_operand(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Array a = Array::empty(dtype, shape);
  for (int64_t i = 0; i < a.size(); ++i) {
    const double x = normal(rng);
    if (dtype == DType::f32)
      a.data<float>()[i] = float(x);
    else if (dtype == DType::f64)
      a.data<double>()[i] = x;
    else
      a.data<bfloat16>()[i] = bfloat16::from_float(float(x));
  }
  return a;
}

struct BlocksCase {
  Shape q, k, v;
  bool causal;
  std::vector<int64_t> mask;  // empty: none
};

// The attention output's shape, and the gradient's packed [..., Tq + 2 Tv, max(d, dv)].
Shape out_shape(const BlocksCase& c) {
  std::vector<int64_t> dims = c.q.to_vector();
  dims.back() = c.v.dim(-1);
  return Shape(dims);
}
Shape grad_shape(const BlocksCase& c) {
  std::vector<int64_t> dims = c.q.to_vector();
  dims[dims.size() - 2] = c.q.dim(-2) + 2 * c.k.dim(-2);
  dims.back() = std::max(c.q.dim(-1), c.v.dim(-1));
  return Shape(dims);
}

std::vector<unsigned char> bytes(const Array& a) {
  const auto* p = static_cast<const unsigned char*>(a.raw());
  return std::vector<unsigned char>(p, p + a.nbytes());
}

TEST(AttentionBlocks, EveryQueryBlockGivesTheSameBits) {
  const BlocksCase cases[] = {
      {Shape{1, 100, 16}, Shape{1, 100, 16}, Shape{1, 100, 16}, true, {}},  // one entry: groups
      {Shape{1, 200, 8}, Shape{1, 200, 8}, Shape{1, 200, 8}, false, {}},
      {Shape{2, 3, 70, 8}, Shape{2, 3, 130, 8}, Shape{2, 3, 130, 12}, false, {2, 1, 1, 130}},
      {Shape{2, 50, 8}, Shape{2, 90, 8}, Shape{2, 90, 8}, true, {2, 1, 90}},  // key mask, Tq < Tv
      {Shape{3, 40, 16}, Shape{3, 40, 16}, Shape{3, 40, 16}, true, {3, 40, 1}},  // broadcast keys
      {Shape{1, 300, 32}, Shape{1, 300, 32}, Shape{1, 300, 32}, true, {}},       // three key tiles
      {Shape{4, 16, 64, 32}, Shape{4, 16, 64, 32}, Shape{4, 16, 64, 32}, true, {}},  // kiln bench
  };
  const int threads = num_threads();
  uint64_t seed = 7100;
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16})
    for (const BlocksCase& c : cases) {
      SCOPED_TRACE(fmt::format("{} q {} k {} v {} causal {} mask [{}]", dtype_name(dtype),
                               c.q.to_string(), c.k.to_string(), c.v.to_string(), c.causal,
                               fmt::join(c.mask, ", ")));
      std::mt19937_64 rng(seed++);
      std::vector<Array> fwd = {random_operand(dtype, c.q, rng), random_operand(dtype, c.k, rng),
                                random_operand(dtype, c.v, rng)};
      std::vector<Array> grad = fwd;
      grad.push_back(random_operand(dtype, out_shape(c), rng));
      if (!c.mask.empty()) {
        Array mask = Array::empty(DType::b8, Shape(c.mask));
        for (int64_t i = 0; i < mask.size(); ++i) mask.data<bool>()[i] = rng() % 4 != 0;
        fwd.push_back(mask);
        grad.push_back(mask);
      }
      const Attrs attrs{{"scale", 0.3}, {"causal", c.causal}};
      std::optional<std::vector<unsigned char>> want_out, want_grad;
      for (int t : {1, 2}) {
        set_num_threads(t);
        for (int64_t rows : gemm_detail::kAttentionQueryBlocks) {
          const AttentionBlocks blocks{rows, rows};
          Array out = Array::empty(dtype, out_shape(c)), g = Array::empty(dtype, grad_shape(c));
          attention_with_blocks(fwd, attrs, out, blocks);
          attention_grad_with_blocks(grad, attrs, g, blocks);
          if (!want_out) {
            want_out = bytes(out);
            want_grad = bytes(g);
            continue;
          }
          EXPECT_TRUE(bytes(out) == *want_out)
              << "forward, blocks of " << rows << ", " << t << " threads";
          EXPECT_TRUE(bytes(g) == *want_grad)
              << "gradient, blocks of " << rows << ", " << t << " threads";
        }
      }
    }
  set_num_threads(threads);
}

TEST(AttentionBlocks, ABlockTheKernelsDoNotTakeIsAnError) {
  std::mt19937_64 rng(7200);
  const Shape s{2, 40, 8};
  const std::vector<Array> in = {random_operand(DType::f32, s, rng),
                                 random_operand(DType::f32, s, rng),
                                 random_operand(DType::f32, s, rng)};
  Array out = Array::empty(DType::f32, s);
  try {
    attention_with_blocks(in, Attrs{{"scale", 0.5}, {"causal", true}}, out,
                          AttentionBlocks{64, 24});
    ADD_FAILURE() << "a causal block of 24 rows was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "attention: query block 24 does not divide 64 rows (use one of 16, 32, 64)"),
              std::string::npos)
        << e.what();
  }
}

// ------------------------------------------------------------------------------ the table

gemm_detail::TunedTable table_for(const gemm_detail::MicroKernels& mk) {
  gemm_detail::TunedTable t;
  t.kiln_version = "0.1.0";
  t.cpu_key = cpu_key(cpu_info());
  t.isa = mk.isa;
  t.core_gflops = 100;
  t.attention = gemm_detail::TunedAttention{32, 16, 1.125};
  return t;
}

TEST(AttentionBlocks, TheTableCarriesTheBlocksAndRejectsBadOnes) {
  const gemm_detail::MicroKernels& mk = gemm_detail::avx2_microkernels();
  const gemm_detail::TunedTable t = table_for(mk);
  const std::string text = t.to_text();
  EXPECT_NE(text.find("attention query_block 32 causal_query_block 16 gain 1.125\n"),
            std::string::npos)
      << text;
  const gemm_detail::TunedTable back = gemm_detail::TunedTable::parse(text, mk, "t");
  ASSERT_TRUE(back.attention.has_value());
  EXPECT_EQ(back.attention->query_block, 32);
  EXPECT_EQ(back.attention->causal_query_block, 16);
  EXPECT_EQ(back.to_text(), text);
  gemm_detail::TunedTable none = t;
  none.attention.reset();
  EXPECT_FALSE(gemm_detail::TunedTable::parse(none.to_text(), mk, "t").attention.has_value());

  auto rejects = [](const std::string& bad, const gemm_detail::MicroKernels& set,
                    const std::string& why) {
    try {
      gemm_detail::TunedTable::parse(bad, set, "bad.tune");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.tune"), std::string::npos) << e.what();
    }
  };
  gemm_detail::TunedTable u = t;
  u.attention->causal_query_block = 24;
  rejects(u.to_text(), mk, "query block 24 is not one of 16, 32, 64");
  u = t;
  u.attention->query_block = 0;
  rejects(u.to_text(), mk, "query block 0 is not one of");
  u = t;
  u.attention->gain = -1;
  rejects(u.to_text(), mk, "attention: gain -1 out of range");
  // The pair sets' tables hold no attention line: their kernels do not run its products.
  const gemm_detail::MicroKernels& pairs = gemm_detail::avx512bf16_emulated_microkernels();
  rejects(table_for(pairs).to_text(), pairs, "an attention line in a avx512bf16-emulated table");
}

TEST(AttentionBlocks, TheKernelsFollowTheTableInUse) {
  const gemm_detail::MicroKernels* mk = gemm_detail::active_microkernels();
  if (mk == nullptr) GTEST_SKIP() << "float32 GEMMs run on Eigen here: no tuned table";
  gemm_detail::TuningCacheDirGuard guard("attention_blocks", {mk});
  gemm_detail::reload_gemm_tuning(*mk);
  EXPECT_EQ(attention_blocks(), AttentionBlocks{});  // no table: the defaults
  gemm_detail::TunedTable t = table_for(*mk);
  gemm_detail::save_tuned_table(t, gemm_detail::tuned_table_path(mk->isa));
  const std::string status = gemm_detail::reload_gemm_tuning(*mk);
  EXPECT_NE(status.find("attention query blocks 32, causal 16"), std::string::npos) << status;
  EXPECT_EQ(attention_blocks(), (AttentionBlocks{32, 16}));
}

// A short tuning run times every block against the defaults and chooses one of them.
TEST(AttentionBlocks, TheTunerChoosesOneOfTheCandidates) {
  gemm_detail::TuneOptions o;
  o.slice_seconds = 0.0005;
  o.rounds = 1;
  std::vector<std::string> lines;
  o.progress = [&](const std::string& line) { lines.push_back(line); };
  const AttentionTuneReport r = tune_attention_blocks(o);
  EXPECT_EQ(r.start, AttentionBlocks{});
  EXPECT_EQ(r.candidates, 2 * (int(std::size(gemm_detail::kAttentionQueryBlocks)) - 1));
  for (int64_t rows : {r.chosen.query, r.chosen.causal})
    EXPECT_NE(std::find(std::begin(gemm_detail::kAttentionQueryBlocks),
                        std::end(gemm_detail::kAttentionQueryBlocks), rows),
              std::end(gemm_detail::kAttentionQueryBlocks))
        << rows;
  // A choice other than the default is one that measured faster.
  EXPECT_TRUE(r.chosen.query == r.start.query ? r.plain_gain == 1.0 : r.plain_gain > 1.0);
  EXPECT_TRUE(r.chosen.causal == r.start.causal ? r.causal_gain == 1.0 : r.causal_gain > 1.0);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("attention query blocks 64 / causal 32 -> "), std::string::npos)
      << lines[0];
}

}  // namespace
}  // namespace kiln::runtime
