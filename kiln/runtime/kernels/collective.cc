// The all_reduce kernel: the input copied to the output, then summed over the ranks of
// the process-wide communicator (runtime/collectives.h); a copy in a world of one process.
#include <chrono>
#include <cstring>

#include "kiln/runtime/collectives.h"
#include "kiln/runtime/kernels/register.h"

namespace kiln::runtime {
namespace {

void all_reduce_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  if (out.nbytes() > 0 && out.raw() != in[0].raw())
    std::memcpy(out.raw(), in[0].raw(), out.nbytes());
  Communicator* c = communicator();
  if (!c || c->size() == 1) return;
  const auto start = std::chrono::steady_clock::now();
  c->all_reduce_sum(out.raw(), out.shape.num_elements(), out.dtype,
                    "all_reduce of " + out.type().to_string());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  add_collective_stats(int64_t(out.nbytes()), s, s);  // (blocking: all of it waited)
}

}  // namespace

void register_collective_kernels(KernelTable& t) {
  t[size_t(OpKind::AllReduce)] = all_reduce_kernel;
}

}  // namespace kiln::runtime
