// one_hot in generated kernels: the element at position d of the new last axis is
// (index == d), so an index outside [0, depth) gives an all-zero row (the eager kernel's rule),
// computed where it is read (never stored).
//
// Compared in 32-bit lanes, twice as many per vector as 64-bit ones. A compare of the
// truncated loop counter is no good: IndVarSimplify widens `trunc(d) == i` back to a 64-bit
// compare of d. So when d is the counter of the loop being emitted (from 0, step 1), the
// kernel emitter keeps a down counter of its own in that loop: k = i - d, an i32 phi starting
// at the index (-1 when outside [0, depth)) and decremented every iteration, and the element
// is hot where k == 0; the loop vectorizer widens k into one vector of i32 lanes (one add per
// vector, one compare). Elsewhere (d not such a counter, or depth beyond the i32 range) the
// index is compared with d directly.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/ir/dtype.h"

namespace kiln::codegen {

// The index (an i32 or i64 value) as an i32 that equals a position d in [0, depth) exactly
// when the index does: the index itself, or -1 outside [0, depth). depth <= INT32_MAX.
llvm::Value* one_hot_narrow_index(llvm::IRBuilder<>& b, llvm::Value* index, int64_t depth);

// Whether one_hot of that depth may compare in i32 (depth <= INT32_MAX).
bool one_hot_fits_i32(int64_t depth);

// (index == d) for an i64 position d, compared in i32 when the depth allows.
llvm::Value* one_hot_compare(llvm::IRBuilder<>& b, llvm::Value* index, llvm::Value* d,
                             int64_t depth);

// The one_hot element of dtype `t` (1 or 0; bool: the hit itself) for a hit (i1).
llvm::Value* one_hot_value(llvm::IRBuilder<>& b, llvm::Value* hit, DType t);

// A loop the kernel emitter is emitting (its counter steps by 1): the place for down counters.
struct CountedLoop {
  llvm::PHINode* counter = nullptr;       // the loop's own i64 counter
  llvm::BasicBlock* preheader = nullptr;  // ends in the branch into the loop
  llvm::BasicBlock* header = nullptr;
  bool from_zero = false;  // the counter starts at 0 (down counters count positions)
  size_t cache_frame = 0;  // the emitter's frame of cached values for the loop body
  std::vector<std::pair<llvm::Value*, llvm::PHINode*>> down;  // start value -> its counter

  // The i32 counter equal to `start` - counter at every iteration (one per start value).
  llvm::PHINode* down_counter(llvm::Value* start);
  // At the latch (`b`'s insertion point, before the back branch): decrements every counter.
  void close(llvm::IRBuilder<>& b);
};

}  // namespace kiln::codegen
