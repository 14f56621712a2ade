#include "kiln/runtime/huge_alloc.h"

#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln::runtime {

void* aligned_alloc_huge(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  if (bytes < kHuge) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice only: without THP support the call fails and the pages stay 4 KiB.
  if (p) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace kiln::runtime
