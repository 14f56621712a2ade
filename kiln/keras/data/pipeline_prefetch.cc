// prefetch: a background thread pulls the upstream stream into a bounded queue while the
// consumer works on the elements already there.
//
// Threading: the producer thread is started when the pass is opened and is the only thread
// that touches the upstream stream until it is joined (so generators, readers and map
// functions upstream run on it; kiln's tracing and tape state are thread_local, so their
// eager ops run untraced there). The queue, the end/error marker and the stop flag are
// guarded by one mutex. An exception from upstream is stored after the elements produced
// before it and rethrown by the consumer's next() in that position. The stream's destructor
// sets the stop flag, wakes a producer blocked on a full queue and joins it; a producer inside
// an upstream next() call finishes that call first.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "kiln/keras/data/pipeline_stage.h"

namespace kiln::data::pipeline {
namespace {

class PrefetchStream final : public Stream {
 public:
  PrefetchStream(std::unique_ptr<Stream> up, size_t capacity)
      : up_(std::move(up)), capacity_(capacity) {
    thread_ = std::thread([this] { produce(); });
  }

  ~PrefetchStream() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    not_full_.notify_all();
    thread_.join();
  }

  std::optional<Element> next() override {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (!queue_.empty()) {
      Element e = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      not_full_.notify_one();
      return e;
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    return std::nullopt;
  }

 private:
  void produce() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        not_full_.wait(lock, [&] { return stop_ || queue_.size() < capacity_; });
        if (stop_) return;
      }
      std::optional<Element> e;
      std::exception_ptr error;
      try {
        e = up_->next();
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (e) {
          queue_.push_back(std::move(*e));
        } else {
          finished_ = true;
          error_ = error;
        }
      }
      not_empty_.notify_one();
      if (!e) return;
    }
  }

  std::unique_ptr<Stream> up_;
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Element> queue_;
  bool finished_ = false;  // the producer has put its last element (end or error)
  bool stop_ = false;      // the consumer is gone
  std::exception_ptr error_;
  std::thread thread_;  // last: started after every member it uses exists
};

class Prefetch final : public Stage {
 public:
  Prefetch(StagePtr up, int64_t buffer_size) : up_(std::move(up)), buffer_size_(buffer_size) {}

  std::unique_ptr<Stream> open(uint64_t pass) const override {
    return std::make_unique<PrefetchStream>(up_->open(pass), size_t(buffer_size_));
  }
  int64_t cardinality() const override { return up_->cardinality(); }

 private:
  StagePtr up_;
  int64_t buffer_size_;
};

}  // namespace

StagePtr prefetch_stage(StagePtr upstream, int64_t buffer_size) {
  return std::make_shared<Prefetch>(std::move(upstream), buffer_size);
}

}  // namespace kiln::data::pipeline
