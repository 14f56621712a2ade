// Internal to distributed/: the MPI world kiln joined, and the deadline every collective is
// waited against (distributed/distributed.h states the contract).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace kiln::distributed::detail {

struct World {
  int rank = 0, size = 1;
  bool mpi = false;                // joined MPI (launched by mpirun); else a world of one
  MPI_Comm host = MPI_COMM_NULL;   // host-side collectives (fit's logs, broadcasts, checks)
  MPI_Comm grads = MPI_COMM_NULL;  // the all_reduce op (gradients)
  double timeout = 300;
  std::atomic<int64_t> grad_sums{0}, host_sums{0};  // deterministic_sum calls so far, per comm
};

// The world (a world of one before initialize()).
World& world();
// Serialises MPI calls (MPI_THREAD_SERIALIZED): the communication thread and the caller's.
std::mutex& mpi_mutex();

// Waits for `request` by polling MPI_Test until the world's deadline; past it, prints a
// kiln::Error naming `what`, this rank and the timeout, and stops every rank (MPI_Abort).
void wait(MPI_Request& request, const std::string& what);
// `rc` of an MPI call that starts or tests a collective: anything but MPI_SUCCESS (the ranks
// no longer agree on what they exchange) prints a kiln::Error naming `what` and MPI's message,
// and stops every rank (MPI_Abort): the other ranks would wait for this one otherwise.
void check(int rc, const std::string& what);

// The deterministic sum over the ranks of `comm`, written over the data: a reduce-scatter (each
// rank sums one chunk, adding the ranks' contributions in rank order; float32 accumulated in
// float64) then an all-gather of the chunks. Bytes each rank sends and receives: 2 (N-1)/N of the
// buffer, as a ring all-reduce. MPI_FLOAT or MPI_DOUBLE. Before the data moves, one small
// all-reduce checks that every rank runs the same sum (its number on `comm`, size, dtype and
// `what`); when they differ, every rank throws a kiln::Error naming rank 0's sum and the first
// other rank's, and every later sum throws it too.
void deterministic_sum(MPI_Comm comm, void* data, int64_t count, bool f64, const std::string& what);

}  // namespace kiln::distributed::detail
