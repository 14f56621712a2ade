// Joining MPI, the deadline on every collective, and the deterministic sum.
#include "kiln/distributed/mpi_world.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "kiln/ir/error.h"

namespace kiln::distributed::detail {

World& world() {
  static World w;
  return w;
}

std::mutex& mpi_mutex() {
  static std::mutex m;
  return m;
}

namespace {

[[noreturn]] void stop_every_rank(const std::string& message) {
  Error e(message);
  std::fprintf(stderr, "kiln: error: %s\n", e.what());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 70);
  std::_Exit(70);
}

}  // namespace

void check(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  const World& w = world();
  stop_every_rank(fmt::format(
      "kiln::distributed: rank {} of {}: {} failed in MPI: {}. The ranks no longer agree on "
      "what they exchange (another model, other data, or a bug: please report it). Stopping every "
      "rank (MPI_Abort)",
      w.rank, w.size, what, std::string(text, size_t(length))));
}

void wait(MPI_Request& request, const std::string& what) {
  const World& w = world();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(w.timeout);
  for (int polls = 0;; ++polls) {
    int done = 0, rc = 0;
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    check(rc, what);
    if (done) return;
    // Spin briefly (a collective between ranks in step completes in microseconds), then poll
    // every 50 us so a waiting rank leaves the core to the computing threads.
    if (polls < 200) {
      std::this_thread::yield();
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline)
      stop_every_rank(fmt::format(
          "kiln::distributed: rank {} of {} waited {:g} s for {} but not every rank took part: a "
          "rank died, hangs, or runs other code (another model, other data, another number of "
          "steps). Stopping every rank (MPI_Abort). If a step really takes this long, raise "
          "KILN_DISTRIBUTED_TIMEOUT (seconds) or distributed::Options::timeout_seconds",
          w.rank, w.size, w.timeout, what));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

namespace {

int checked_int(int64_t n, const std::string& what) {
  if (n > std::numeric_limits<int>::max())
    throw Error(fmt::format(
        "kiln::distributed: {} has {} elements per rank; MPI counts stop at {} (split the "
        "tensor)",
        what, n, std::numeric_limits<int>::max()));
  return int(n);
}

template <typename T>
void sum_in_rank_order(T* out, const T* parts, int64_t len, int ranks) {
  for (int64_t i = 0; i < len; ++i) {
    double s = 0;
    for (int r = 0; r < ranks; ++r) s += double(parts[int64_t(r) * len + i]);
    out[i] = T(s);
  }
}

// FNV-1a: the same on every rank (std::hash need not be).
int64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return int64_t(h >> 1);
}

// What a rank sums, in the record every rank shares when the ranks' sums differ.
struct SumRecord {
  int64_t number = 0, count = 0, f64 = 0;
  char what[232] = {};
};

// Set once the ranks' sums differed: every later sum fails with the same error at once (the
// ranks no longer agree on what they exchange).
std::string& diverged() {
  static std::string message;
  return message;
}

// Sum `number` on `comm`: every rank checks, with one small all-reduce (the maximum of the
// signature and of its negation), that every rank runs the same sum (its number, size, dtype
// and name) before the data moves; if not, every rank learns what every other runs and throws
// a kiln::Error naming rank 0's sum and the first rank's that differs.
void check_same_sum(MPI_Comm comm, int64_t number, int64_t count, bool f64,
                    const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    if (!diverged().empty()) throw Error(diverged());
  }
  const World& w = world();
  const int64_t sig[4] = {number, count, f64 ? 1 : 0, name_hash(what)};
  int64_t both[8], max[8];
  for (int i = 0; i < 4; ++i) {
    both[i] = sig[i];
    both[4 + i] = -sig[i];
  }
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    check(MPI_Iallreduce(both, max, 8, MPI_INT64_T, MPI_MAX, comm, &req), what);
  }
  wait(req, what + " (the check that every rank runs this sum)");
  bool same = true;
  for (int i = 0; i < 4; ++i) same = same && max[i] == -max[4 + i];
  if (same) return;
  SumRecord mine{.number = number, .count = count, .f64 = f64 ? 1 : 0};
  std::strncpy(mine.what, what.c_str(), sizeof(mine.what) - 1);
  std::vector<SumRecord> all(size_t(w.size));
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    check(MPI_Iallgather(&mine, sizeof(SumRecord), MPI_BYTE, all.data(), sizeof(SumRecord),
                         MPI_BYTE, comm, &req),
          what);
  }
  wait(req, what + " (the records of the ranks' sums)");
  auto describe = [](const SumRecord& r) {
    return fmt::format("sum {} \"{}\" of {} {} values", r.number, r.what, r.count,
                       r.f64 ? "float64" : "float32");
  };
  size_t other = 1;
  while (other + 1 < all.size() && std::memcmp(&all[other], &all[0], sizeof(SumRecord)) == 0)
    ++other;
  std::string message = fmt::format(
      "kiln::distributed: the ranks run different sums: rank 0 runs {} but rank {} runs {}. "
      "Every rank must run the same all_reduce nodes in the same order: the same model, step "
      "function and data shapes, and the same KILN_BUCKET_BYTES (codegen::set_bucket_bytes) "
      "everywhere",
      describe(all[0]), other, describe(all[other]));
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    diverged() = message;
  }
  throw Error(message);
}

}  // namespace

void deterministic_sum(MPI_Comm comm, void* data, int64_t count, bool f64,
                       const std::string& what) {
  World& w = world();
  const int n = w.size;
  if (n == 1) return;
  // (numbered per communicator: the gradients' and the host's run on different threads)
  std::atomic<int64_t>& sums = comm == w.grads ? w.grad_sums : w.host_sums;
  check_same_sum(comm, ++sums, count, f64, what);
  if (count == 0) return;
  const size_t elem = f64 ? 8 : 4;
  MPI_Datatype type = f64 ? MPI_DOUBLE : MPI_FLOAT;
  // Chunk c: elements [off[c], off[c + 1]); rank c sums it.
  std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) {
    const int64_t b = count * c / n, e = count * (c + 1) / n;
    displs[size_t(c)] = checked_int(b, what);
    counts[size_t(c)] = checked_int(e - b, what);
  }
  const int mine = counts[size_t(w.rank)];
  std::vector<char> parts(size_t(mine) * size_t(n) * elem);
  std::vector<int> recv_counts(static_cast<size_t>(n), mine), recv_displs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) recv_displs[size_t(r)] = r * mine;
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    check(MPI_Ialltoallv(data, counts.data(), displs.data(), type, parts.data(), recv_counts.data(),
                         recv_displs.data(), type, comm, &req),
          what);
  }
  wait(req, what + " (reduce-scatter)");
  char* my_chunk = static_cast<char*>(data) + size_t(displs[size_t(w.rank)]) * elem;
  if (f64)
    sum_in_rank_order(reinterpret_cast<double*>(my_chunk),
                      reinterpret_cast<const double*>(parts.data()), mine, n);
  else
    sum_in_rank_order(reinterpret_cast<float*>(my_chunk),
                      reinterpret_cast<const float*>(parts.data()), mine, n);
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, data, counts.data(), displs.data(), type, comm,
                          &req),
          what);
  }
  wait(req, what + " (all-gather)");
}

}  // namespace kiln::distributed::detail
