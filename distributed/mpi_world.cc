// Joining MPI, the deadline on every collective, and the deterministic sum.
#include "kiln/distributed/mpi_world.h"

#include <fmt/format.h>

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

}  // namespace

void deterministic_sum(MPI_Comm comm, void* data, int64_t count, bool f64,
                       const std::string& what) {
  const World& w = world();
  const int n = w.size;
  if (n == 1 || count == 0) return;
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
