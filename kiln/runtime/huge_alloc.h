// Aligned allocations for kernels' operands and scratch: 64-byte aligned, and, from 2 MiB up,
// 2 MiB aligned and advised to the kernel as transparent huge pages (madvise MADV_HUGEPAGE, the
// default THP mode on Debian is "madvise"). GEMM tiles touch a dozen rows of C and of B's
// panels per call, each on a page of its own with 4 KiB pages; with huge pages those stay in
// the TLB (measured: docs/benchmarks.md). Free with std::free.
#pragma once

#include <cstddef>

namespace kiln::runtime {

// nullptr when out of memory (the callers throw their own errors).
void* aligned_alloc_huge(size_t bytes);

}  // namespace kiln::runtime
