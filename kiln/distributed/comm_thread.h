// Internal to distributed/: the communication thread beside kiln's oneTBB arena. Compiled
// steps start each gradient's all_reduce on it as soon as the gradient exists
// (runtime::Communicator::start_all_reduce_sum) and go on computing; it runs the sums one after
// another, in the order they were started (the same on every rank: every rank runs the same
// steps), each polled against the collective deadline (mpi_world.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "kiln/runtime/collectives.h"

namespace kiln::distributed::detail {

class CommThread {
 public:
  CommThread();
  ~CommThread();  // finishes the queued sums, then joins
  // Queues `job` (a blocking collective); the handle's wait() returns when it ran and rethrows
  // its exception.
  std::unique_ptr<runtime::PendingCollective> start(std::function<void()> job, int64_t bytes);

 private:
  struct Job;
  void loop();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::distributed::detail
