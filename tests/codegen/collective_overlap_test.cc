// all_reduce in a compiled executable with a communicator of several ranks: the sum runs beside
// the following steps (runtime/executable.h) and the first reader waits for it. A fake
// communicator of three equal ranks finishes each sum late, on a thread of its own; the compiled
// results must equal the reference executor's (which sums at once, blocking), whether or not a
// step reads the sum, and the schedule-collectives pass must have started the sums early.
// Gradient buckets: one sum over a bucket's region, no packing copy for gradients computed in
// it, a copy counted for those that cannot be (runtime::CollectiveStats::packed).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "kiln/codegen/compile_graph.h"
#include "kiln/ir/parser.h"
#include "kiln/runtime/collectives.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using runtime::Array;

// Three ranks holding the same values; start_all_reduce_sum finishes 20 ms later on a thread.
class SlowThreeRanks : public runtime::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 3; }
  void all_reduce_sum(void* data, int64_t count, DType dtype, std::string_view) override {
    auto* p = static_cast<float*>(data);
    for (int64_t i = 0; i < count; ++i) p[i] *= 3;
  }
  std::unique_ptr<runtime::PendingCollective> start_all_reduce_sum(void* data, int64_t count,
                                                                   DType dtype,
                                                                   std::string) override {
    ++started;
    counts.push_back(count);
    struct Later : runtime::PendingCollective {
      std::thread t;
      void wait() override {
        if (t.joinable()) t.join();
      }
      ~Later() override { wait(); }
    };
    auto later = std::make_unique<Later>();
    later->t = std::thread([this, data, count, dtype] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      all_reduce_sum(data, count, dtype, "");
    });
    return later;
  }
  int started = 0;
  std::vector<int64_t> counts;  // of each started sum
};

// Float arguments for every parameter of `g`: element i is ((i % period) - period / 2) / 16,
// small exact values of both signs.
std::vector<Array> patterned_arguments(const ir::Graph& g, int64_t period) {
  std::vector<Array> args;
  for (const auto& p : g.parameters()) {
    Array a = Array::empty(p->type());
    for (int64_t i = 0; i < a.size(); ++i)
      a.data<float>()[i] = float((i % period) - period / 2) / 16.0f;
    args.push_back(a);
  }
  return args;
}

TEST(CollectiveOverlap, CompiledSumsEqualTheReference) {
  testing::ScopedCacheDir cache;
  auto g =
      ir::parse_graph(R"(graph @step(%x: f32[64,32], %w: f32[32,16]) -> (f32[64,16], f32[32,16]) {
  %gw = tanh(%w) : f32[32,16]
  %h = matmul(%x, %w) {transpose_a=false, transpose_b=false} : f32[64,16]
  %e = exp(%h) : f32[64,16]
  %sw = all_reduce(%gw) : f32[32,16]
  %unread = all_reduce(%e) : f32[64,16]
  %u = mul(%sw, %sw) : f32[32,16]
  return %e, %u
})",
                      "overlap.kir");
  std::vector<Array> args = patterned_arguments(*g, 13);
  auto comm = std::make_shared<SlowThreeRanks>();
  runtime::set_communicator(comm);
  runtime::reset_collective_stats();
  testing::RunResult want = testing::run_reference(*g, args, {});
  testing::RunResult got = testing::run_compiled(*g, args, {});
  runtime::set_communicator(nullptr);
  EXPECT_EQ(comm->started, 1) << "one bucket: both sums";
  EXPECT_EQ(runtime::collective_stats().packed, 64 * 16 * 4) << "%e is a graph output: packed";
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const Array &a = got.outputs[i], &b = want.outputs[i];
    ASSERT_EQ(a.type(), b.type());
    for (int64_t k = 0; k < a.size(); ++k)
      ASSERT_NEAR(a.data<float>()[k], b.data<float>()[k], 1e-5 * (1 + std::abs(b.data<float>()[k])))
          << "output " << i << " element " << k;
  }
}

void expect_near(const testing::RunResult& got, const testing::RunResult& want) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const Array &a = got.outputs[i], &b = want.outputs[i];
    ASSERT_EQ(a.type(), b.type());
    // (float32 sums of 64 products of values below 0.4: relative rounding well under 1e-5)
    for (int64_t k = 0; k < a.size(); ++k)
      ASSERT_NEAR(a.data<float>()[k], b.data<float>()[k], 1e-5 * (1 + std::abs(b.data<float>()[k])))
          << "output " << i << " element " << k;
  }
}

// A backward step's weight and bias gradients (a matmul, a sum: both computed into the arena
// and used once) share one bucket: one sum over 2048 + 64 bytes, no packing copy. A gradient
// that another step reads too must be copied into its bucket; with buckets off each gradient
// is summed alone (and copied into the all_reduce's buffer, as before buckets).
TEST(CollectiveOverlap, ABucketIsSummedInItsOwnBufferWithoutPacking) {
  testing::ScopedCacheDir cache;
  const char* text =
      R"(graph @step(%x: f32[64,32], %dy: f32[64,16], %w: f32[32,16], %b: f32[16]) -> (f32[32,16], f32[16], f32[64,32]) {
  %gw = matmul(%x, %dy) {transpose_a=true, transpose_b=false} : f32[32,16]
  %sw = all_reduce(%gw) : f32[32,16]
  %gb = sum(%dy) {axes=[0], keepdims=false} : f32[16]
  %sb = all_reduce(%gb) : f32[16]
  %dx = matmul(%dy, %w) {transpose_a=false, transpose_b=true} : f32[64,32]
  %nw = sub(%w, %sw) : f32[32,16]
  %nb = sub(%b, %sb) : f32[16]
  %out = add(%nb, %GB) : f32[16]
  return %nw, %out, %dx
})";
  for (bool gb_read_twice : {false, true}) {
    std::string source = text;
    source.replace(source.find("%GB"), 3, gb_read_twice ? "%gb" : "%nb");
    auto g = ir::parse_graph(source, "bucket.kir");
    std::vector<Array> args = patterned_arguments(*g, 11);
    auto comm = std::make_shared<SlowThreeRanks>();
    runtime::set_communicator(comm);
    testing::RunResult want = testing::run_reference(*g, args, {});
    runtime::reset_collective_stats();
    testing::RunResult got = testing::run_compiled(*g, args, {});
    ASSERT_EQ(comm->counts, std::vector<int64_t>{(2048 + 64) / 4}) << "one sum over the bucket";
    EXPECT_EQ(runtime::collective_stats().packed, gb_read_twice ? 64 : 0)
        << "a gradient computed in its bucket must not be copied";
    expect_near(got, want);
    // The memory-plan dump (KILN_DUMP_IR, kiln dump-ir) shows the region and the path.
    const std::string dump = codegen::compile_graph_in_full(*g).arena.to_text(*g);
    EXPECT_NE(dump.find("bucket 0 f32 @ "), std::string::npos) << dump;
    EXPECT_NE(dump.find(gb_read_twice ? "packed (read by another node) from %6" : ", direct:"),
              std::string::npos)
        << dump;

    codegen::set_bucket_bytes(0);  // every all_reduce alone: a sum each
    comm->counts.clear();
    testing::RunResult alone = testing::run_compiled(*g, args, {});
    codegen::set_bucket_bytes(std::nullopt);
    EXPECT_EQ(comm->counts, (std::vector<int64_t>{512, 16}));
    runtime::set_communicator(nullptr);
    expect_near(alone, want);
  }
}

}  // namespace
}  // namespace kiln
