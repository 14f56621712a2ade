#include "kiln/keras/data/pipeline.h"

#include <fmt/format.h>

#include "kiln/keras/data/pipeline_stage.h"

namespace kiln::data {

// ---- Iterator

Dataset::Iterator::Iterator(std::unique_ptr<pipeline::Stream> stream)
    : stream_(std::move(stream)) {}
Dataset::Iterator::~Iterator() = default;
Dataset::Iterator::Iterator(Iterator&&) noexcept = default;
Dataset::Iterator& Dataset::Iterator::operator=(Iterator&&) noexcept = default;

std::optional<Element> Dataset::Iterator::next() {
  if (!stream_) return std::nullopt;
  std::optional<Element> e;
  try {
    e = stream_->next();
  } catch (...) {
    stream_.reset();  // the pass is over (a prefetch thread is stopped and joined)
    throw;
  }
  if (!e) stream_.reset();
  return e;
}

// ---- Dataset

namespace {

void require_at_least(const char* what, const char* name, int64_t value, int64_t min,
                      const char* hint) {
  if (value < min)
    throw Error(
        fmt::format("Dataset.{}: {} must be at least {}, got {}{}", what, name, min, value, hint));
}

}  // namespace

Dataset::Dataset(std::shared_ptr<const pipeline::Stage> stage)
    : stage_(std::move(stage)), passes_(std::make_shared<std::atomic<uint64_t>>(0)) {}

Dataset make_dataset(std::shared_ptr<const pipeline::Stage> stage) {
  return Dataset(std::move(stage));
}

Dataset Dataset::from_tensor_slices(Arrays x, Arrays y, Arrays sample_weight) {
  const int64_t n = x.num_examples("Dataset.from_tensor_slices: x");
  auto check = [&](const Arrays& a, const char* name) {
    if (a.empty()) return;
    int64_t m = a.num_examples(fmt::format("Dataset.from_tensor_slices: {}", name));
    if (m != n)
      throw Error(fmt::format(
          "Dataset.from_tensor_slices: x has {} examples ({}) but {} has {} ({}); every "
          "tensor needs the same number of rows (axis 0)",
          n, x.describe(), name, m, a.describe()));
  };
  check(y, "y");
  check(sample_weight, "sample_weight");
  for (const Arrays* a : {&x, &y, &sample_weight})
    for (const Tensor& t : a->tensors())
      if (t.is_symbolic())
        throw Error(
            "Dataset.from_tensor_slices: the tensors must hold data; a symbolic tensor (a "
            "functional-model placeholder or a value traced inside kiln::function) was given");
  return Dataset(pipeline::tensor_slices_stage(
      Element{std::move(x), std::move(y), std::move(sample_weight)}, n));
}

Dataset Dataset::from_generator(std::function<NextFn()> make) {
  if (!make) throw Error("Dataset.from_generator: the generator factory is empty");
  return Dataset(pipeline::generator_stage(std::move(make)));
}

Dataset Dataset::from_files(std::vector<std::string> paths,
                            std::function<Element(const std::string&)> read) {
  if (!read) throw Error("Dataset.from_files: the read function is empty");
  return Dataset(pipeline::files_stage(std::move(paths), std::move(read)));
}

Dataset Dataset::shuffle(int64_t buffer_size, uint64_t seed) const {
  require_at_least("shuffle", "buffer_size", buffer_size, 1,
                   " (a buffer of at least the number of elements shuffles them all)");
  return Dataset(pipeline::shuffle_stage(stage_, buffer_size, seed));
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  require_at_least("batch", "batch_size", batch_size, 1, "");
  return Dataset(pipeline::batch_stage(stage_, batch_size, drop_remainder));
}

Dataset Dataset::map(std::function<Element(Element)> fn) const {
  if (!fn) throw Error("Dataset.map: the function is empty");
  return Dataset(pipeline::map_stage(stage_, std::move(fn)));
}

Dataset Dataset::repeat(int64_t count) const {
  require_at_least("repeat", "count", count, -1, " (-1 repeats endlessly)");
  return Dataset(pipeline::repeat_stage(stage_, count));
}

Dataset Dataset::take(int64_t n) const {
  require_at_least("take", "n", n, -1, " (-1 takes every element)");
  return Dataset(pipeline::take_stage(stage_, n));
}

Dataset Dataset::prefetch(int64_t buffer_size) const {
  require_at_least("prefetch", "buffer_size", buffer_size, 1, "");
  return Dataset(pipeline::prefetch_stage(stage_, buffer_size));
}

int64_t Dataset::cardinality() const { return stage_->cardinality(); }

Dataset::Iterator Dataset::begin_pass(uint64_t pass) const { return Iterator(stage_->open(pass)); }

Dataset::Iterator Dataset::begin_pass() const { return begin_pass(passes_->fetch_add(1)); }

}  // namespace kiln::data
