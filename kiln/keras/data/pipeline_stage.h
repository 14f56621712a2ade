// The inside of data::Dataset (pipeline.h): a pipeline is a chain of immutable Stages (a
// source, or a transformation holding its upstream Stage); a pass opens one Stream per Stage,
// each pulling from its upstream's Stream. Sources outside pipeline_*.cc (the MNIST reader)
// implement Stage and wrap it with make_dataset().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/keras/data/pipeline.h"

namespace kiln::data::pipeline {

// Contract: one pass over a stage's elements, pulled by one thread at a time. next() returns
// std::nullopt at the end of the pass; exceptions propagate to the caller unchanged.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual std::optional<Element> next() = 0;
};

// Contract: an immutable pipeline node, shared by every Dataset built on it and safe to open
// from several threads at once. open(pass) starts pass number `pass` (shuffle seeds it with
// seed + pass; repeat numbers its upstream passes from it). A Stream keeps its Stage alive
// (self()), so an iterator outlives the Datasets it came from. Always held by a shared_ptr.
class Stage : public std::enable_shared_from_this<Stage> {
 public:
  virtual ~Stage() = default;
  virtual std::unique_ptr<Stream> open(uint64_t pass) const = 0;
  // Elements per pass: >= 0, Dataset::kInfinite or Dataset::kUnknown.
  virtual int64_t cardinality() const = 0;

 protected:
  // This stage as its own type, for the streams it opens to hold.
  template <typename Self>
  std::shared_ptr<const Self> self(const Self* me) const {
    return std::static_pointer_cast<const Self>(me->shared_from_this());
  }
};

using StagePtr = std::shared_ptr<const Stage>;

// Sources (pipeline_sources.cc).
StagePtr tensor_slices_stage(Element rows, int64_t num_rows);
StagePtr generator_stage(std::function<Dataset::NextFn()> make);
StagePtr files_stage(std::vector<std::string> paths,
                     std::function<Element(const std::string&)> read);

// Transformations (pipeline_transforms.cc; prefetch in pipeline_prefetch.cc). Arguments are
// checked by Dataset's methods.
StagePtr shuffle_stage(StagePtr upstream, int64_t buffer_size, uint64_t seed);
StagePtr batch_stage(StagePtr upstream, int64_t batch_size, bool drop_remainder);
StagePtr map_stage(StagePtr upstream, std::function<Element(Element)> fn);
StagePtr repeat_stage(StagePtr upstream, int64_t count);
StagePtr take_stage(StagePtr upstream, int64_t n);
StagePtr prefetch_stage(StagePtr upstream, int64_t buffer_size);

}  // namespace kiln::data::pipeline
