// ThreadSanitizer harness for the communication thread (scripts/tsan_comm_thread.sh builds it
// with -fsanitize=thread from distributed/, runtime/collectives.cc and the few files they need,
// and runs it under `mpirun -np 2` and `-np 3`): the pattern of a compiled data-parallel step
// without the rest of kiln (a TSan build of all of kiln takes hours on a small machine).
//
// Per step, like runtime::Executable::run: the caller writes gradient "buckets" into a reused
// arena, starts their sums on the communication thread (start_all_reduce_sum) and goes on
// computing meanwhile (in a helper thread too, as TBB workers do) on other bytes of the arena;
// it reads a bucket only after wait(); unread buckets are waited by the Pending's destructor;
// host collectives (fit's losses) run on the caller's thread after the sums; the statistics are
// read while the communication thread adds to them. Every sum is checked. Exit 0: no race
// reported (TSan's halt_on_error) and every value right.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "kiln/distributed/distributed.h"
#include "kiln/runtime/collectives.h"

int main() {
  using namespace kiln;
  distributed::initialize();
  runtime::Communicator* comm = runtime::communicator();
  const int n = distributed::size(), r = distributed::rank();
  if (comm == nullptr || n < 2) {
    std::fprintf(stderr, "comm_thread_tsan: run me under mpirun with 2 ranks or more\n");
    return 2;
  }
  constexpr int64_t kBucket = 4099;  // elements (uneven chunks for 2 and 3 ranks)
  std::vector<float> arena(4 * kBucket);
  int bad = 0;
  for (int step = 0; step < 200; ++step) {
    // Two buckets summed beside the computation, the second one never read (destructor waits).
    float* a = arena.data();
    float* b = arena.data() + kBucket;
    for (int64_t i = 0; i < kBucket; ++i) a[i] = float(r + 1) * float(i % 7);
    auto sum_a = comm->start_all_reduce_sum(a, kBucket, DType::f32, "bucket a");
    for (int64_t i = 0; i < kBucket; ++i) b[i] = float(step);
    auto sum_b = comm->start_all_reduce_sum(b, kBucket, DType::f32, "bucket b");
    // The rest of the backward pass: this thread and a worker on other bytes of the arena.
    float* c = arena.data() + 2 * kBucket;
    std::thread worker([c] {
      for (int64_t i = 0; i < kBucket; ++i) c[i] = float(i) * 0.5f;
    });
    for (int64_t i = 0; i < kBucket; ++i) c[kBucket + i] = float(i);
    (void)runtime::collective_stats();  // read while the communication thread adds
    worker.join();
    sum_a->wait();  // the optimizer update reads bucket a
    const float ranks = float(n) * float(n + 1) / 2;
    for (int64_t i = 0; i < kBucket; ++i)
      if (a[i] != ranks * float(i % 7)) ++bad;
    sum_b.reset();  // the end of the call waits for the unread sum
    for (int64_t i = 0; i < kBucket; ++i)
      if (b[i] != float(n) * float(step)) ++bad;
    // fit's host collective of the step's losses, on the caller's thread.
    double loss = r + 1;
    distributed::all_reduce_sum(&loss, 1, "the step's losses");
    if (loss != double(n) * (n + 1) / 2) ++bad;
  }
  runtime::CollectiveStats s = runtime::collective_stats();
  std::printf("comm_thread_tsan: rank %d of %d: %lld sums, %d wrong values\n", r, n,
              (long long)s.calls, bad);
  return bad == 0 ? 0 : 1;
}
