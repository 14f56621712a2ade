// The transformations of a pipeline that run on the pulling thread: shuffle, batch, map,
// repeat and take (prefetch, which starts a thread, is in pipeline_prefetch.cc).
#include "kiln/keras/data/element_ops.h"
#include "kiln/keras/data/pipeline_stage.h"
#include "kiln/keras/data/shuffle_buffer.h"

namespace kiln::data::pipeline {
namespace {

// A stage with one upstream stage.
class Transform : public Stage {
 public:
  explicit Transform(StagePtr upstream) : upstream_(std::move(upstream)) {}

 protected:
  StagePtr upstream_;
};

class Shuffle final : public Transform {
 public:
  Shuffle(StagePtr up, int64_t buffer_size, uint64_t seed)
      : Transform(std::move(up)), buffer_size_(size_t(buffer_size)), seed_(seed) {}

  std::unique_ptr<Stream> open(uint64_t pass) const override {
    // Fills the buffer on the first pull, then takes one element per pull, refilling its slot
    // from upstream while upstream lasts (ShuffleBuffer: the same draws as data::permutation).
    struct Draws final : Stream {
      std::unique_ptr<Stream> up;
      size_t capacity;
      ShuffleBuffer<Element> buffer;
      bool filled = false, exhausted = false;
      Draws(std::unique_ptr<Stream> u, size_t c, uint64_t seed)
          : up(std::move(u)), capacity(c), buffer(seed) {}
      std::optional<Element> pull() {
        std::optional<Element> e;
        if (!exhausted) e = up->next();
        exhausted = !e;
        return e;
      }
      std::optional<Element> next() override {
        for (; !filled && buffer.size() < capacity;) {
          std::optional<Element> e = pull();
          if (!e) break;
          buffer.add(std::move(*e));
        }
        filled = true;
        if (buffer.empty()) return std::nullopt;
        return buffer.take(pull());
      }
    };
    return std::make_unique<Draws>(upstream_->open(pass), buffer_size_, seed_ + pass);
  }
  int64_t cardinality() const override { return upstream_->cardinality(); }

 private:
  size_t buffer_size_;
  uint64_t seed_;
};

class Batch final : public Transform {
 public:
  Batch(StagePtr up, int64_t batch_size, bool drop_remainder)
      : Transform(std::move(up)), batch_size_(batch_size), drop_remainder_(drop_remainder) {}

  std::unique_ptr<Stream> open(uint64_t pass) const override {
    struct Batches final : Stream {
      std::unique_ptr<Stream> up;
      int64_t size;
      bool drop;
      int64_t position = 0;  // pass position of the next upstream element
      std::optional<Element> next() override {
        std::vector<Element> elements;
        const int64_t first = position;
        while (int64_t(elements.size()) < size) {
          std::optional<Element> e = up->next();
          if (!e) break;
          elements.push_back(std::move(*e));
          ++position;
        }
        if (elements.empty() || (drop && int64_t(elements.size()) < size)) return std::nullopt;
        return stack_elements(elements, first);
      }
    };
    auto s = std::make_unique<Batches>();
    s->up = upstream_->open(pass);
    s->size = batch_size_;
    s->drop = drop_remainder_;
    return s;
  }
  int64_t cardinality() const override {
    int64_t n = upstream_->cardinality();
    if (n < 0) return n;
    return drop_remainder_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  }

 private:
  int64_t batch_size_;
  bool drop_remainder_;
};

class Map final : public Transform {
 public:
  Map(StagePtr up, std::function<Element(Element)> fn)
      : Transform(std::move(up)), fn_(std::move(fn)) {}

  std::unique_ptr<Stream> open(uint64_t pass) const override {
    struct Mapped final : Stream {
      std::unique_ptr<Stream> up;
      std::shared_ptr<const Map> stage;
      std::optional<Element> next() override {
        std::optional<Element> e = up->next();
        if (!e) return e;
        return stage->fn_(std::move(*e));
      }
    };
    auto s = std::make_unique<Mapped>();
    s->up = upstream_->open(pass);
    s->stage = self(this);
    return s;
  }
  int64_t cardinality() const override { return upstream_->cardinality(); }

 private:
  std::function<Element(Element)> fn_;
};

class Repeat final : public Transform {
 public:
  Repeat(StagePtr up, int64_t count) : Transform(std::move(up)), count_(count) {}

  std::unique_ptr<Stream> open(uint64_t pass) const override {
    struct Repeats final : Stream {
      std::shared_ptr<const Repeat> stage;
      uint64_t pass = 0;
      int64_t repetition = 0;
      std::unique_ptr<Stream> current;
      bool current_produced = false;
      std::optional<Element> next() override {
        const int64_t count = stage->count_;
        for (;;) {
          if (!current) {
            if (count >= 0 && repetition >= count) return std::nullopt;
            // Upstream pass numbers: pass p's repetitions are p*count .. p*count + count-1
            // (distinct across passes); an endless repeat's are p * 2^32 + r.
            uint64_t up_pass = count >= 0 ? pass * uint64_t(count) + uint64_t(repetition)
                                          : (pass << 32) + uint64_t(repetition);
            current = stage->upstream_->open(up_pass);
            current_produced = false;
          }
          if (std::optional<Element> e = current->next()) {
            current_produced = true;
            return e;
          }
          current.reset();
          ++repetition;
          // An endless repeat of an empty pass would never return.
          if (count < 0 && !current_produced) return std::nullopt;
        }
      }
    };
    auto s = std::make_unique<Repeats>();
    s->stage = self(this);
    s->pass = pass;
    return s;
  }
  int64_t cardinality() const override {
    int64_t n = upstream_->cardinality();
    if (count_ == 0 || n == 0) return 0;
    if (count_ < 0) return Dataset::kInfinite;  // (an empty upstream ends at once)
    if (n < 0) return n;
    return n * count_;
  }

 private:
  int64_t count_;
};

class Take final : public Transform {
 public:
  Take(StagePtr up, int64_t n) : Transform(std::move(up)), n_(n) {}

  std::unique_ptr<Stream> open(uint64_t pass) const override {
    struct Taken final : Stream {
      std::unique_ptr<Stream> up;
      int64_t left;
      std::optional<Element> next() override {
        if (left == 0) return std::nullopt;
        if (left > 0) --left;
        return up->next();
      }
    };
    auto s = std::make_unique<Taken>();
    s->up = upstream_->open(pass);
    s->left = n_;
    return s;
  }
  int64_t cardinality() const override {
    int64_t n = upstream_->cardinality();
    if (n_ < 0) return n;
    if (n == Dataset::kInfinite) return n_;
    if (n == Dataset::kUnknown) return n_ == 0 ? 0 : n;
    return std::min(n, n_);
  }

 private:
  int64_t n_;
};

}  // namespace

StagePtr shuffle_stage(StagePtr upstream, int64_t buffer_size, uint64_t seed) {
  return std::make_shared<Shuffle>(std::move(upstream), buffer_size, seed);
}

StagePtr batch_stage(StagePtr upstream, int64_t batch_size, bool drop_remainder) {
  return std::make_shared<Batch>(std::move(upstream), batch_size, drop_remainder);
}

StagePtr map_stage(StagePtr upstream, std::function<Element(Element)> fn) {
  return std::make_shared<Map>(std::move(upstream), std::move(fn));
}

StagePtr repeat_stage(StagePtr upstream, int64_t count) {
  return std::make_shared<Repeat>(std::move(upstream), count);
}

StagePtr take_stage(StagePtr upstream, int64_t n) {
  return std::make_shared<Take>(std::move(upstream), n);
}

}  // namespace kiln::data::pipeline
