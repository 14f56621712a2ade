// all_reduce in a compiled executable with a communicator of several ranks: the sum runs beside
// the following steps (runtime/executable.h) and the first reader waits for it. A fake
// communicator of three equal ranks finishes each sum late, on a thread of its own; the compiled
// results must equal the reference executor's (which sums at once, blocking), whether or not a
// step reads the sum, and the schedule-collectives pass must have started the sums early.
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
};

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
  std::vector<Array> args;
  for (const auto& p : g->parameters()) {
    Array a = Array::empty(p->type());
    for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = float((i % 13) - 6) / 16.0f;
    args.push_back(a);
  }
  auto comm = std::make_shared<SlowThreeRanks>();
  runtime::set_communicator(comm);
  testing::RunResult want = testing::run_reference(*g, args, {});
  testing::RunResult got = testing::run_compiled(*g, args, {});
  runtime::set_communicator(nullptr);
  EXPECT_EQ(comm->started, 1) << "the read sum runs beside the steps; the unread one at once";
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    const Array &a = got.outputs[i], &b = want.outputs[i];
    ASSERT_EQ(a.type(), b.type());
    for (int64_t k = 0; k < a.size(); ++k)
      ASSERT_NEAR(a.data<float>()[k], b.data<float>()[k], 1e-5 * (1 + std::abs(b.data<float>()[k])))
          << "output " << i << " element " << k;
  }
}

}  // namespace
}  // namespace kiln
