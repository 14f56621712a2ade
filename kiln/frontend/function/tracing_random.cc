#include "kiln/frontend/function/tracing_random.h"

#include <fmt/format.h>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/ops.h"
#include "kiln/frontend/seed_generator.h"
#include "kiln/runtime/log.h"

namespace kiln::detail {

namespace {
constexpr int64_t kCallStride = int64_t(1) << 32;

Tensor i64(int64_t v) { return tensor<int64_t>({v}, Shape{}); }
}  // namespace

Tensor traced_random_seed(TraceContext& ctx, const Tensor& trace_time_seed) {
  TraceOwner& owner = ctx.owner();
  if (ctx.repeated() && !owner.warned_fixed_seed_in_loop) {
    // Eagerly, a loop that computes a new seed per iteration draws new numbers each time; the
    // traced body has one seed, fixed when it was traced. Say so instead of differing quietly.
    owner.warned_fixed_seed_in_loop = true;
    log_warning(fmt::format(
        "{}: a random op with an integer seed inside a while_loop body draws the same numbers "
        "in every iteration when traced (its seed is fixed when the body is traced, {}); to "
        "draw new numbers per iteration as an eager loop would, seed it from a SeedGenerator "
        "(kiln::SeedGenerator::next(), a state variable the loop advances)",
        owner.function_name, trace_time_seed.item<int64_t>()));
  }
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
