#include "kiln/frontend/seed_generator.h"

#include <mutex>

#include "kiln/frontend/creation.h"
#include "kiln/frontend/function/trace_context.h"

namespace kiln {
namespace {

struct GlobalSeeds {
  std::mutex mutex;
  Generator gen{1337};
};
GlobalSeeds& global() {
  static GlobalSeeds g;
  return g;
}

}  // namespace

void set_random_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(global().mutex);
  global().gen = Generator(seed);
}

int64_t next_global_seed() {
  std::lock_guard<std::mutex> lock(global().mutex);
  return global().gen.next_seed();
}

namespace {
Tensor i64_scalar(int64_t v) { return tensor(std::vector<int64_t>{v}, Shape{}); }
}  // namespace

int64_t seed_generator_initial_state(int64_t seed) {
  // The first draw of a Generator is splitmix64 of the seed: a well-mixed 64-bit value. Two
  // bits off keep the state non-negative with room for 2^62 draws before int64 overflow.
  uint64_t mixed = static_cast<uint64_t>(Generator(static_cast<uint64_t>(seed)).next_seed());
  return static_cast<int64_t>(mixed >> 2);
}

SeedGenerator::SeedGenerator(std::optional<int64_t> seed, const std::string& scope) {
  detail::InitScope eager;  // a concrete variable even when created while a function traces
  int64_t start = seed_generator_initial_state(seed ? *seed : next_global_seed());
  std::string name = scope.empty() ? "seed_generator_state" : scope + "/seed_generator_state";
  state_ = Variable(std::move(name), i64_scalar(start), /*trainable=*/false);
}

Tensor SeedGenerator::next() {
  if (!state_.defined())
    throw Error("SeedGenerator::next: the generator handle is empty (default-constructed)");
  Tensor seed = state_.value();
  state_.assign_add(i64_scalar(1));
  return seed;
}

}  // namespace kiln
