#include "kiln/distributed/comm_thread.h"

#include <chrono>
#include <exception>

namespace kiln::distributed::detail {

using Clock = std::chrono::steady_clock;

struct CommThread::Job {
  std::function<void()> run;
  int64_t bytes = 0;
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
};

namespace {

class Pending : public runtime::PendingCollective {
 public:
  explicit Pending(std::shared_ptr<void> job, std::function<void()> wait)
      : job_(std::move(job)), wait_(std::move(wait)) {}
  void wait() override {
    if (wait_) {
      auto w = std::move(wait_);
      wait_ = nullptr;
      w();
    }
  }
  ~Pending() override {
    try {
      wait();  // the buffer must not be freed under a running sum
    } catch (...) {
    }
  }

 private:
  std::shared_ptr<void> job_;
  std::function<void()> wait_;
};

}  // namespace

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

std::unique_ptr<runtime::PendingCollective> CommThread::start(std::function<void()> run,
                                                              int64_t bytes) {
  auto job = std::make_shared<Job>();
  job->run = std::move(run);
  job->bytes = bytes;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job);
  }
  ready_.notify_one();
  return std::make_unique<Pending>(job, [job] {
    const auto start = Clock::now();
    std::unique_lock<std::mutex> lock(job->mutex);
    job->done_cv.wait(lock, [&] { return job->done; });
    runtime::add_collective_wait(std::chrono::duration<double>(Clock::now() - start).count());
    if (job->error) std::rethrow_exception(job->error);
  });
}

void CommThread::loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = queue_.front();
      queue_.pop_front();
    }
    const auto start = Clock::now();
    try {
      job->run();
    } catch (...) {
      job->error = std::current_exception();
    }
    runtime::add_collective_stats(job->bytes,
                                  std::chrono::duration<double>(Clock::now() - start).count(), 0);
    {
      std::lock_guard<std::mutex> lock(job->mutex);
      job->done = true;
    }
    job->done_cv.notify_all();
  }
}

}  // namespace kiln::distributed::detail
