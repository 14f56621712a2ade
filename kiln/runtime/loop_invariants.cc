// Loop-invariant operands and their packed copies (contract: loop_invariants.h).
#include "kiln/runtime/loop_invariants.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "kiln/runtime/array.h"

namespace kiln::runtime {
namespace {

thread_local LoopInvariantScope* innermost = nullptr;

void free_floats(float* p) { std::free(p); }

}  // namespace

LoopInvariantScope::LoopInvariantScope(std::vector<std::pair<const void*, size_t>> regions)
    : regions_(std::move(regions)), outer_(innermost) {
  innermost = this;
}

LoopInvariantScope::~LoopInvariantScope() { innermost = outer_; }

LoopInvariantScope* LoopInvariantScope::holding(const void* p, size_t bytes) {
  const auto* begin = static_cast<const char*>(p);
  LoopInvariantScope* found = nullptr;
  for (LoopInvariantScope* s = innermost; s != nullptr; s = s->outer_)
    for (const auto& [region, size] : s->regions_) {
      const auto* r = static_cast<const char*>(region);
      if (begin >= r && bytes <= size && size_t(begin - r) <= size - bytes) found = s;
    }
  return found;
}

const float* LoopInvariantScope::packed_b(const PackedBKey& key, size_t floats,
                                          const std::function<void(float*)>& fill) {
  for (const Packed& p : packed_)
    if (p.key == key) return p.data.get();
  const size_t bytes =
      (std::max<size_t>(floats, 1) * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  std::unique_ptr<float, void (*)(float*)> data(
      static_cast<float*>(std::aligned_alloc(kAlignment, bytes)), free_floats);
  if (data == nullptr) throw std::bad_alloc();
  fill(data.get());  // cached only once filled: a fill that throws leaves nothing behind
  packed_.push_back({key, std::move(data)});
  return packed_.back().data.get();
}

}  // namespace kiln::runtime
