#include "kiln/keras/data/loader_datasets.h"

#include <fmt/format.h>

#include "kiln/keras/data/idx_stream.h"
#include "kiln/keras/data/mnist.h"
#include "kiln/keras/data/pipeline_stage.h"
#include "kiln/keras/data/text.h"
#include "kiln/runtime/array.h"

namespace kiln::data {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803, kLabelsMagic = 0x00000801;

class MnistRecords final : public pipeline::Stage {
 public:
  MnistRecords(std::string images, std::string labels)
      : images_(std::move(images)), labels_(std::move(labels)) {
    n_ = open_checked().first.num_records();
  }

  std::unique_ptr<pipeline::Stream> open(uint64_t) const override {
    struct Records final : pipeline::Stream {
      std::pair<IdxRecordReader, IdxRecordReader> files;
      std::string bytes;
      explicit Records(std::pair<IdxRecordReader, IdxRecordReader>&& f) : files(std::move(f)) {}
      std::optional<Element> next() override {
        auto& [images, labels] = files;
        if (!images.next(bytes)) {
          labels.next(bytes);  // (checks that nothing follows the last label)
          return std::nullopt;
        }
        runtime::Array x =
            runtime::Array::empty(DType::f32, Shape{images.dims()[1], images.dims()[2]});
        float* px = x.data<float>();
        for (size_t i = 0; i < bytes.size(); ++i) px[i] = float(uint8_t(bytes[i])) / 255.0f;
        labels.next(bytes);
        runtime::Array y = runtime::Array::empty(DType::i64, Shape{});
        *y.data<int64_t>() = uint8_t(bytes[0]);
        return Element{Tensor(std::move(x)), Tensor(std::move(y)), {}};
      }
    };
    return std::make_unique<Records>(open_checked());
  }
  int64_t cardinality() const override { return n_; }

 private:
  // Both readers, their headers checked and their counts equal.
  std::pair<IdxRecordReader, IdxRecordReader> open_checked() const {
    std::pair<IdxRecordReader, IdxRecordReader> files{std::piecewise_construct,
                                                      std::forward_as_tuple(images_, kImagesMagic),
                                                      std::forward_as_tuple(labels_, kLabelsMagic)};
    if (files.first.num_records() != files.second.num_records())
      throw Error(fmt::format("MNIST: {} has {} images but {} has {} labels", images_,
                              files.first.num_records(), labels_, files.second.num_records()));
    return files;
  }

  std::string images_, labels_;
  int64_t n_ = 0;
};

}  // namespace

Dataset digits_dataset(const std::string& path) {
  Examples d = load_digits(path);
  return Dataset::from_tensor_slices(d.x, d.y);
}

Dataset text_dataset(const std::vector<int32_t>& ids, int64_t seq_len, int64_t stride) {
  Examples d = text_windows(ids, seq_len, stride);
  return Dataset::from_tensor_slices(d.x, d.y);
}

Dataset mnist_dataset(const std::string& images_path, const std::string& labels_path) {
  return make_dataset(std::make_shared<MnistRecords>(images_path, labels_path));
}

std::pair<Dataset, Dataset> mnist_datasets(const std::string& dir) {
  auto one = [&](const char* images, const char* labels) {
    std::string images_path = find_mnist_file(dir, images);  // (images first in errors)
    return mnist_dataset(images_path, find_mnist_file(dir, labels));
  };
  return {one("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          one("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")};
}

}  // namespace kiln::data
