// The sources of a pipeline: rows of in-memory tensors, a generator callable, files read
// lazily.
#include <fmt/format.h>

#include <filesystem>

#include "kiln/keras/data/element_ops.h"
#include "kiln/keras/data/pipeline_stage.h"

namespace kiln::data::pipeline {
namespace {

class TensorSlices final : public Stage {
 public:
  TensorSlices(Element rows, int64_t n) : rows_(std::move(rows)), n_(n) {}

  std::unique_ptr<Stream> open(uint64_t) const override {
    struct Rows final : Stream {
      std::shared_ptr<const TensorSlices> stage;
      int64_t i = 0;
      std::optional<Element> next() override {
        if (i == stage->n_) return std::nullopt;
        return element_row(stage->rows_, i++);
      }
    };
    auto s = std::make_unique<Rows>();
    s->stage = self(this);
    return s;
  }
  int64_t cardinality() const override { return n_; }

 private:
  Element rows_;
  int64_t n_;
};

class Generator final : public Stage {
 public:
  explicit Generator(std::function<Dataset::NextFn()> make) : make_(std::move(make)) {}

  std::unique_ptr<Stream> open(uint64_t) const override {
    struct Calls final : Stream {
      Dataset::NextFn next_fn;
      explicit Calls(Dataset::NextFn f) : next_fn(std::move(f)) {}
      std::optional<Element> next() override { return next_fn(); }
    };
    Dataset::NextFn f = make_();
    if (!f) throw Error("Dataset.from_generator: the factory returned an empty next-function");
    return std::make_unique<Calls>(std::move(f));
  }
  int64_t cardinality() const override { return Dataset::kUnknown; }

 private:
  std::function<Dataset::NextFn()> make_;
};

class Files final : public Stage {
 public:
  Files(std::vector<std::string> paths, std::function<Element(const std::string&)> read)
      : paths_(std::move(paths)), read_(std::move(read)) {}

  std::unique_ptr<Stream> open(uint64_t) const override {
    struct Reads final : Stream {
      std::shared_ptr<const Files> stage;
      size_t i = 0;
      std::optional<Element> next() override {
        if (i == stage->paths_.size()) return std::nullopt;
        const std::string& path = stage->paths_[i++];
        std::error_code ec;
        if (!std::filesystem::exists(path, ec))
          throw Error(fmt::format("Dataset.from_files: file {} of {}, \"{}\", does not exist", i,
                                  stage->paths_.size(), path));
        return stage->read_(path);
      }
    };
    auto s = std::make_unique<Reads>();
    s->stage = self(this);
    return s;
  }
  int64_t cardinality() const override { return int64_t(paths_.size()); }

 private:
  std::vector<std::string> paths_;
  std::function<Element(const std::string&)> read_;
};

}  // namespace

StagePtr tensor_slices_stage(Element rows, int64_t num_rows) {
  return std::make_shared<TensorSlices>(std::move(rows), num_rows);
}

StagePtr generator_stage(std::function<Dataset::NextFn()> make) {
  return std::make_shared<Generator>(std::move(make));
}

StagePtr files_stage(std::vector<std::string> paths,
                     std::function<Element(const std::string&)> read) {
  return std::make_shared<Files>(std::move(paths), std::move(read));
}

}  // namespace kiln::data::pipeline
