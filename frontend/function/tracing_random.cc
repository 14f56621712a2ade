#include "frontend/function/tracing_random.h"

#include "frontend/creation.h"
#include "frontend/layers/initializers.h"
#include "frontend/ops.h"

namespace kiln::detail {

namespace {
constexpr int64_t kCallStride = int64_t(1) << 32;

Tensor i64(int64_t v) { return tensor<int64_t>({v}, Shape{}); }
}  // namespace

Tensor traced_random_seed(TraceContext& ctx, const Tensor& trace_time_seed) {
  TraceOwner& owner = ctx.owner();
  if (!owner.rng_state.defined()) {
    InitScope eager;
    int64_t start = (next_global_seed() & 0x7fffffff) * kCallStride;
    owner.rng_state = Variable(owner.function_name + "/rng_state", i64(start), false);
  }
  owner.used_rng = true;
  int64_t offset = trace_time_seed.item<int64_t>() & (kCallStride - 1);
  return add(owner.rng_state.value(), i64(offset));
}

void finish_random_state(TraceContext& root) {
  TraceOwner& owner = root.owner();
  if (owner.used_rng) owner.rng_state.assign_add(i64(kCallStride));
}

}  // namespace kiln::detail
