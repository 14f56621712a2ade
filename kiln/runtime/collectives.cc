#include "kiln/runtime/collectives.h"

#include <atomic>
#include <chrono>
#include <mutex>

namespace kiln::runtime {
namespace {

std::mutex& mutex() {
  static auto* m = new std::mutex();  // never destroyed (see current())
  return *m;
}
// Never destroyed: kiln::distributed removes the communicator (joining its thread) in its own
// exit handler, before MPI_Finalize, whatever the order of static destructors.
std::shared_ptr<Communicator>& current() {
  static auto* c = new std::shared_ptr<Communicator>();
  return *c;
}
std::atomic<Communicator*> current_raw{nullptr};
CollectiveStats stats;

}  // namespace

void set_communicator(std::shared_ptr<Communicator> c) {
  std::lock_guard<std::mutex> lock(mutex());
  current() = std::move(c);
  current_raw.store(current().get());
}

Communicator* communicator() { return current_raw.load(); }

CollectiveStats collective_stats() {
  std::lock_guard<std::mutex> lock(mutex());
  return stats;
}

void reset_collective_stats() {
  std::lock_guard<std::mutex> lock(mutex());
  stats = {};
}

void add_collective_stats(int64_t bytes, double seconds, double waited) {
  std::lock_guard<std::mutex> lock(mutex());
  ++stats.calls;
  stats.bytes += bytes;
  stats.seconds += seconds;
  stats.waited += waited;
}

void add_collective_wait(double waited) {
  std::lock_guard<std::mutex> lock(mutex());
  stats.waited += waited;
}

void add_collective_packed(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex());
  stats.packed += bytes;
}

namespace {
struct Done : PendingCollective {
  void wait() override {}
};
}  // namespace

std::unique_ptr<PendingCollective> Communicator::start_all_reduce_sum(void* data, int64_t count,
                                                                      DType dtype,
                                                                      std::string what) {
  const auto start = std::chrono::steady_clock::now();
  all_reduce_sum(data, count, dtype, what);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  add_collective_stats(count * int64_t(dtype_size(dtype)), s, s);
  return std::make_unique<Done>();
}

}  // namespace kiln::runtime
