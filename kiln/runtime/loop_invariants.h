// Operands a loop leaves unchanged, and what is derived from them once per loop.
//
// While a while step runs (runtime/executable_while.cc), the loop variables its body passes through
// untouched (body output i is its parameter i) keep their buffers and values for the whole
// loop: an executable never writes into its arguments. The step registers those buffers in a
// LoopInvariantScope for the loop's duration, and a product inside the loop whose B lies in one
// of them packs B once per loop instead of once per iteration (runtime/gemm.cc: the plan's
// BMode::kPrepacked): an RNN step's recurrent weight, read by every iteration.
//
// Scopes belong to the thread that runs the loop and nest (a loop in a loop body: a B both
// hold is packed once, for the outer one); a product on another thread (a batch entry of a
// batched matmul run by a worker) finds no scope and runs as it would outside a loop. The
// packed buffers live until the scope ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace kiln::runtime {

// What a packed B depends on: the operand (its address, row stride and shape as the product
// reads it) and the layout (tile width and k block depth of the plan).
struct PackedBKey {
  const void* b = nullptr;
  int64_t ldb = 0, k = 0, n = 0;
  bool tb = false;
  int64_t nr = 0, k_step = 0;
  bool rounded = false;  // a float32 B rounded to bf16 as it is packed
  bool operator==(const PackedBKey&) const = default;
};

class LoopInvariantScope {
 public:
  // regions: [begin, begin + bytes) of each buffer the loop leaves unchanged.
  explicit LoopInvariantScope(std::vector<std::pair<const void*, size_t>> regions);
  ~LoopInvariantScope();
  LoopInvariantScope(const LoopInvariantScope&) = delete;
  LoopInvariantScope& operator=(const LoopInvariantScope&) = delete;

  // The outermost scope of the calling thread whose regions hold [p, p + bytes) (the longest
  // lived: a weight captured by an outer loop and passed on to an inner one is packed once for
  // the outer loop), or null.
  static LoopInvariantScope* holding(const void* p, size_t bytes);

  // The buffer of `floats` floats cached under `key`: filled by `fill` on the first request
  // (on the calling thread), the same buffer for every later one while the scope lasts.
  const float* packed_b(const PackedBKey& key, size_t floats,
                        const std::function<void(float*)>& fill);

  // How many buffers were filled (each key once).
  int64_t fills() const { return int64_t(packed_.size()); }

 private:
  struct Packed {
    PackedBKey key;
    std::unique_ptr<float, void (*)(float*)> data;
  };
  std::vector<std::pair<const void*, size_t>> regions_;
  std::vector<Packed> packed_;
  LoopInvariantScope* outer_;
};

}  // namespace kiln::runtime
