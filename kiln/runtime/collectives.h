// Collectives as the runtime sees them: the all_reduce op's kernel (eager calls, the reference
// executor and compiled steps alike) sums its input across the processes of the process-wide
// Communicator. kiln::distributed (distributed/, on MPI) installs one; without one the world is
// this process alone and all_reduce is the identity.
//
// Contract of a Communicator: every rank calls the same collectives in the same order; every
// rank gets the same bits (the contributions of the ranks are added in rank order, whatever
// the transport); a collective that does not complete within the communicator's deadline
// (a rank died, hangs or runs other code) stops every rank with a message naming the
// collective, never a hang.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "kiln/ir/dtype.h"

namespace kiln::runtime {

// A sum started by Communicator::start_all_reduce_sum.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  // Returns once the buffer holds the sum; rethrows the collective's kiln::Error.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sums `count` elements of `dtype` (f32 or f64; kiln::Error naming `what` otherwise) at
  // `data` over every rank, written over `data`. `what` names the value in errors and profiles.
  virtual void all_reduce_sum(void* data, int64_t count, DType dtype, std::string_view what) = 0;
  // The same sum, run beside the caller (a communication thread) so that it overlaps the
  // caller's computation: returns at once; `data` must stay alive and untouched until wait()
  // returns. Sums started run in the order they were started. The default runs it now.
  virtual std::unique_ptr<PendingCollective> start_all_reduce_sum(void* data, int64_t count,
                                                                  DType dtype, std::string what);
};

// Installs (or, with nullptr, removes) the process-wide communicator.
void set_communicator(std::shared_ptr<Communicator> c);
// The process-wide communicator; nullptr: one process.
Communicator* communicator();

// Totals of the all_reduce sums since the last reset (benchmarks, docs/distributed.md): calls,
// bytes summed (per rank: the size of the reduced buffers), seconds the sums took (start to
// end), and seconds the computing thread was blocked waiting for them. In a compiled step the
// sums overlap the rest of the step: 1 - waited / seconds of their time is hidden. `packed`:
// bytes a compiled step copied into a gradient bucket before its sum (runtime/executable.h;
// 0 when every bucket is direct: the gradients were computed in their buckets).
struct CollectiveStats {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0;
  double waited = 0;
  int64_t packed = 0;
};
CollectiveStats collective_stats();
void reset_collective_stats();
void add_collective_stats(int64_t bytes, double seconds, double waited);
void add_collective_wait(double waited);
void add_collective_packed(int64_t bytes);

}  // namespace kiln::runtime
