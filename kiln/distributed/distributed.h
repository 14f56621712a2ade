// kiln::distributed: data-parallel training across processes on MPI (Open MPI from Debian).
//
// A program launched by `mpirun -np N` joins the MPI world when it calls initialize() (or when
// fit runs with FitOptions::data_parallel); a program started without a launcher never touches
// MPI and is a world of one process (rank 0 of 1), so kiln's non-distributed users need no
// mpirun. After initialize(), the all_reduce op (frontend/ops.h, runtime/collectives.h) sums
// over the ranks.
//
// Every collective here has a deadline (Options::timeout_seconds, KILN_DISTRIBUTED_TIMEOUT):
// non-blocking MPI calls polled against it. When it passes, a rank died, hangs or runs other
// code: the waiting rank prints a kiln::Error message naming the collective and the ranks and
// stops the whole job with MPI_Abort (the other ranks cannot be told apart from a hung one, so
// no rank is left waiting forever).
//
// Results are bitwise equal on every rank: sums add the ranks' contributions in rank order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/dtype.h"

namespace kiln::distributed {

struct Options {
  // Seconds a collective may wait for the other ranks before the job is stopped; <= 0: the
  // value of KILN_DISTRIBUTED_TIMEOUT, else 300.
  double timeout_seconds = 0;
};

// Whether this process was started by an MPI launcher (mpirun / mpiexec set
// OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK).
bool launched_by_mpi();
// Joins the MPI world when launched by mpirun (MPI_Init_thread, once; MPI_Finalize at exit) and
// installs the all_reduce communicator; otherwise a world of one. Calling it again changes
// only the timeout.
void initialize(const Options& options = {});
bool initialized();
int rank();  // 0 before initialize()
int size();  // 1 before initialize()
// Rank 0: the one rank that prints progress and writes files (checkpoints, logs, weights).
bool is_output_rank();
double timeout_seconds();

// Host-side collectives (every rank calls each with the same sizes; `what` names it in
// errors). Identity / copies in a world of one.
// Copies root's `bytes` at `data` to every rank.
void broadcast(void* data, size_t bytes, const std::string& what, int root = 0);
// The sum over ranks, added in rank order (bitwise equal everywhere), written over `data`.
void all_reduce_sum(double* data, size_t count, const std::string& what);
// Every rank's `mine` (of any length), in rank order.
std::vector<std::string> all_gather(const std::string& mine, const std::string& what);
// Concatenates every rank's rows in rank order: `mine` holds `my_bytes`, `out` receives the
// sum of `bytes_per_rank` (given on every rank, identical everywhere).
void all_gather_bytes(const void* mine, const std::vector<int64_t>& bytes_per_rank, void* out,
                      const std::string& what);
void barrier(const std::string& what);

// The start-up check of data-parallel training: every rank describes what it is about to
// train (model variables, data shapes) in `description`; kiln::Error on every rank when two
// ranks differ, naming both ranks and both descriptions.
void check_same_everywhere(const std::string& description, const std::string& what);

// The rows [begin, end) of a global batch of `batch` rows that `rank` of `size` trains on:
// contiguous, in rank order, sizes differing by at most one (the first batch % size ranks take
// one more). A rank can get no rows (batch < size).
struct Shard {
  int64_t begin = 0, end = 0;
  int64_t rows() const { return end - begin; }
};
Shard shard_of(int64_t batch, int rank, int size);

}  // namespace kiln::distributed
