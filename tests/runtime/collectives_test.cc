// The all_reduce op's kernel through the process-wide communicator (runtime/collectives.h),
// without MPI: a world of one leaves values unchanged; an installed communicator is called by
// the eager kernel and by the reference executor. tests/distributed/ runs it across MPI ranks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/collectives.h"
#include "kiln/runtime/kernels.h"
#include "kiln/runtime/knobs.h"
#include "kiln/runtime/reference_executor.h"
#include "tests/support/error_of.h"

namespace kiln::runtime {
namespace {

using ::kiln::test::error_of;
using ::testing::HasSubstr;

// Three ranks that all hold the same values: the sum is three times the input.
class ThreeEqualRanks : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 3; }
  void all_reduce_sum(void* data, int64_t count, DType dtype, std::string_view) override {
    ASSERT_EQ(dtype, DType::f32);
    auto* p = static_cast<float*>(data);
    for (int64_t i = 0; i < count; ++i) p[i] *= 3;
    ++calls;
  }
  int calls = 0;
};

Array float_array(std::vector<float> v) {
  Array a = Array::empty(DType::f32, Shape{int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = v[i];
  return a;
}

TEST(Collectives, AllReduceIsTheIdentityInAWorldOfOne) {
  set_communicator(nullptr);
  Array x = float_array({1.5f, -2.0f, 0.25f});
  Array y = run_op(OpKind::AllReduce, std::span<const Array>(&x, 1), {});
  ASSERT_EQ(y.type(), x.type());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y.data<float>()[i], x.data<float>()[i]);
}

TEST(Collectives, TheKernelAndTheReferenceExecutorCallTheCommunicator) {
  auto comm = std::make_shared<ThreeEqualRanks>();
  set_communicator(comm);
  reset_collective_stats();
  Array x = float_array({1.0f, 2.0f});
  Array y = run_op(OpKind::AllReduce, std::span<const Array>(&x, 1), {});
  EXPECT_EQ(y.data<float>()[0], 3.0f);
  EXPECT_EQ(y.data<float>()[1], 6.0f);
  EXPECT_EQ(x.data<float>()[1], 2.0f) << "the input is not summed over itself";

  ir::Graph g("grads");
  ir::Value* p = g.add_parameter({DType::f32, Shape{2}});
  ir::Node* sum = g.add_op(OpKind::AllReduce, {p}, {});
  g.set_outputs({sum->output()});
  std::vector<Array> vars;
  std::vector<Array> out = execute_reference(g, std::span<const Array>(&x, 1), vars);
  EXPECT_EQ(out.at(0).data<float>()[1], 6.0f);
  EXPECT_EQ(comm->calls, 2);
  EXPECT_EQ(collective_stats().calls, 2);
  EXPECT_EQ(collective_stats().bytes, 16);
  EXPECT_EQ(collective_stats().waited, collective_stats().seconds);
  set_communicator(nullptr);
}

TEST(Collectives, TheTimeoutKnobIsChecked) {
  ::setenv("KILN_DISTRIBUTED_TIMEOUT", "2.5", 1);
  EXPECT_EQ(knobs::distributed_timeout(), 2.5);
  ::setenv("KILN_DISTRIBUTED_TIMEOUT", "soon", 1);
  EXPECT_THAT(error_of([] { knobs::distributed_timeout(); }),
              HasSubstr("KILN_DISTRIBUTED_TIMEOUT=\"soon\" is not a number of seconds"));
  ::setenv("KILN_DISTRIBUTED_TIMEOUT", "-1", 1);
  EXPECT_THAT(error_of([] { knobs::distributed_timeout(); }), HasSubstr("positive number"));
  ::unsetenv("KILN_DISTRIBUTED_TIMEOUT");
  EXPECT_EQ(knobs::distributed_timeout(), std::nullopt);
}

}  // namespace
}  // namespace kiln::runtime
