// The machine's yardsticks (runtime/machine_peak.h): the copy bandwidth's buffer lies beyond the
// last-level cache, the measurement is positive, and a thread count below one is refused.
#include <gtest/gtest.h>

#include "kiln/ir/error.h"
#include "kiln/runtime/cpu_info.h"
#include "kiln/runtime/machine_peak.h"

namespace kiln::runtime {
namespace {

TEST(MachinePeak, CopyBandwidthCopiesPastTheLastLevelCache) {
  const CopyBandwidth bw = measure_copy_bandwidth(2, 1);
  EXPECT_EQ(bw.threads, 2);
  EXPECT_GE(bw.bytes, int64_t{64} << 20);
  EXPECT_GE(bw.bytes, std::min<int64_t>(2 * cpu_info().l3.bytes, int64_t{512} << 20));
  EXPECT_GT(bw.gbs, 0.0);
  EXPECT_THROW(measure_copy_bandwidth(0), Error);
  EXPECT_THROW(measure_fma_peak(0), Error);
}

}  // namespace
}  // namespace kiln::runtime
