// kiln::data::Dataset: a lazily evaluated, re-iterable stream of elements (tf.data's Dataset).
//
//   Dataset ds = Dataset::from_tensor_slices(x, y).shuffle(60000, /*seed=*/1).batch(128)
//                    .prefetch(2);
//   for (uint64_t epoch = 0; epoch < 3; ++epoch) {
//     Dataset::Iterator it = ds.begin_pass(epoch);
//     while (std::optional<Element> b = it.next()) model->train_on_batch(b->x, b->y);
//   }
//
// Nothing is read or computed until an iterator pulls. Each pass is a new iteration: sources
// start again (generators are made anew, files re-read) and shuffle draws a new order (pass k
// uses seed + k). Transformations return new Datasets that share their upstream (no copy).
// docs/data.md describes every transformation, prefetch threading and error propagation.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/keras/data/arrays.h"

namespace kiln::data {

// One element of a Dataset: an example (no batch axis) before batch(), a batch (every tensor
// stacked along a new axis 0) after. y and sample_weight may be empty (no tensors).
struct Element {
  Arrays x{}, y{}, sample_weight{};
};

namespace pipeline {
class Stage;
class Stream;
}  // namespace pipeline

// Contract: an immutable, cheap-to-copy handle on a pipeline. Copies share the pipeline and
// the pass counter of begin_pass(). Iterating is not thread-safe per Iterator (one consumer),
// but several iterators of one Dataset may run at once (each pass has its own state).
class Dataset {
 public:
  // cardinality() when a pass never ends, and when the number of elements is not known.
  static constexpr int64_t kInfinite = -1;
  static constexpr int64_t kUnknown = -2;

  using NextFn = std::function<std::optional<Element>()>;

  // One pass. next() returns the next element, or std::nullopt at the end of the pass; an
  // exception thrown while producing an element (by a generator, a reader, a map function or
  // a shape check) propagates from next() unchanged, and the pass is then over (later calls
  // return std::nullopt). Destroying an iterator mid-pass is fine (a prefetch thread stops).
  class Iterator {
   public:
    explicit Iterator(std::unique_ptr<pipeline::Stream> stream);
    ~Iterator();
    Iterator(Iterator&&) noexcept;
    Iterator& operator=(Iterator&&) noexcept;

    std::optional<Element> next();

   private:
    std::unique_ptr<pipeline::Stream> stream_;
  };

  // One element per row (axis 0) of x, y and sample_weight (each Arrays keeps its structure:
  // a tensor, a list or tensors by name). kiln::Error when x is empty, an entry is a scalar or
  // symbolic, or the entries disagree on the number of rows (naming the shapes).
  static Dataset from_tensor_slices(Arrays x, Arrays y = {}, Arrays sample_weight = {});
  // Every pass calls `make` for a fresh next-function and calls it until it returns
  // std::nullopt. What it throws reaches the consumer unchanged. Runs on the thread that pulls
  // (prefetch's background thread when prefetched).
  static Dataset from_generator(std::function<NextFn()> make);
  // One element per path, `read(path)` called only when the pass reaches it; a path that does
  // not exist then is a kiln::Error naming it. cardinality() is paths.size().
  static Dataset from_files(std::vector<std::string> paths,
                            std::function<Element(const std::string&)> read);

  // A buffer of `buffer_size` elements; each output is drawn uniformly from it and replaced by
  // the next upstream element. With buffer_size >= the number of elements, pass k yields
  // data::permutation(n, seed + k) (dataset.h), the order of the in-memory fit.
  Dataset shuffle(int64_t buffer_size, uint64_t seed) const;
  // Groups `batch_size` consecutive elements into one by stacking every tensor along a new
  // axis 0. The last, smaller batch is kept unless `drop_remainder`. Elements of a batch must
  // have the same structure, dtypes and shapes (kiln::Error naming the elements otherwise).
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // fn applied to every element (on the thread that pulls).
  Dataset map(std::function<Element(Element)> fn) const;
  // The upstream's passes `count` times in a row (-1: endlessly; an empty upstream then ends
  // at once). Each repetition is a new upstream pass (a shuffle reshuffles).
  Dataset repeat(int64_t count = -1) const;
  // At most the first `n` elements (-1: all).
  Dataset take(int64_t n) const;
  // A background thread pulls the upstream's elements into a queue of at most `buffer_size`
  // while the consumer works. Same elements in the same order; an upstream exception is
  // rethrown by next() after the elements before it.
  Dataset prefetch(int64_t buffer_size) const;

  // Elements per pass when known (kInfinite for an endless pass, kUnknown for generators or
  // anything built on them).
  int64_t cardinality() const;

  // A new pass numbered `pass` (fit's epoch); without an argument, the next number of this
  // handle's counter (0, 1, 2, ... shared by its copies).
  Iterator begin_pass(uint64_t pass) const;
  Iterator begin_pass() const;

 private:
  explicit Dataset(std::shared_ptr<const pipeline::Stage> stage);
  friend Dataset make_dataset(std::shared_ptr<const pipeline::Stage> stage);

  std::shared_ptr<const pipeline::Stage> stage_;
  std::shared_ptr<std::atomic<uint64_t>> passes_;
};

// A Dataset over a stage (for sources defined outside pipeline.cc, e.g. the MNIST reader).
Dataset make_dataset(std::shared_ptr<const pipeline::Stage> stage);

}  // namespace kiln::data
