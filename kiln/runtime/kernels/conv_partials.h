// The last step of a filter gradient summed in fixed parts (conv.cc's im2col chunks,
// conv_direct.cc's bands): part 0 went into dw, parts 1 .. parts-1 into `partials` (a scratch
// slot, `size` values each); they are added to dw in part order, so the bits never depend on
// the thread count.
#pragma once

#include <cstdint>

#include "kiln/runtime/threading.h"

namespace kiln::runtime {

template <typename T>
void add_partials(T* dw, const T* partials, int64_t parts, int64_t size) {
  parallel_for(size, kElementwiseGrain, [&](int64_t e0, int64_t e1) {
    for (int64_t p = 1; p < parts; ++p) {
      const T* src = partials + (p - 1) * size;
      for (int64_t e = e0; e < e1; ++e) dw[e] += src[e];
    }
  });
}

}  // namespace kiln::runtime
