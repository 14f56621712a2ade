// The pipeline's sources: generators restarted on every pass with their errors unchanged,
// files read only when reached, the lazy MNIST reader against the in-memory one (plain and
// gzip IDX files written here, and their corruptions), and the digits and text datasets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "kiln/kiln.h"
#include "tests/data/idx_test_util.h"
#include "tests/data/pipeline_test_util.h"
#include "tests/support/error_of.h"

namespace kiln::data {
namespace {

using ::kiln::test::error_of;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::kiln::data::test;
namespace fs = std::filesystem;

// A fresh temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/kiln_pipeline_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// n images of 2 x 3 pixels (pixel i of the file = 11 i mod 256) and labels (7 i mod 10).
std::string image_bytes(uint32_t n) {
  std::string data;
  for (uint32_t i = 0; i < n * 6; ++i) data += char((11 * i) % 256);
  return idx_bytes(0x803, {n, 2, 3}, data);
}
std::string label_bytes(uint32_t n) {
  std::string data;
  for (uint32_t i = 0; i < n; ++i) data += char((7 * i) % 10);
  return idx_bytes(0x801, {n}, data);
}

TEST(PipelineSources, GeneratorRestartsOnEveryPass) {
  int makes = 0;
  Dataset ds = Dataset::from_generator([&] {
    ++makes;
    return [i = int64_t(0)]() mutable -> std::optional<Element> {
      if (i == 3) return std::nullopt;
      return Element{scalar(double(i)), tensor<int64_t>({i++})};
    };
  });
  EXPECT_EQ(makes, 0);  // lazy
  EXPECT_THAT(y_values(collect(ds, 0)), ElementsAre(0, 1, 2));
  EXPECT_THAT(y_values(collect(ds, 1)), ElementsAre(0, 1, 2));
  EXPECT_EQ(makes, 2);
  std::vector<Element> batched = collect(ds.batch(2), 0);
  ASSERT_EQ(batched.size(), 2u);
  EXPECT_EQ(batched[0].x.tensors()[0].to_vector<double>(), (std::vector<double>{0, 1}));
  EXPECT_EQ(batched[0].y.tensors()[0].shape(), Shape({2, 1}));
}

TEST(PipelineSources, GeneratorErrorsReachTheConsumerUnchanged) {
  struct Custom : std::logic_error {
    using std::logic_error::logic_error;
  };
  Dataset ds = Dataset::from_generator([] {
    return [i = 0]() mutable -> std::optional<Element> {
      if (i == 2) throw Custom("sensor 2 offline");
      return Element{scalar(double(i++))};
    };
  });
  Dataset::Iterator it = ds.map([](Element e) { return e; }).batch(1).begin_pass(0);
  EXPECT_TRUE(it.next() && it.next());
  try {
    it.next();
    ADD_FAILURE() << "no exception";
  } catch (const Custom& e) {
    EXPECT_STREQ(e.what(), "sensor 2 offline");
  }
}

TEST(PipelineSources, FilesAreReadOnlyWhenReached) {
  TempDir dir;
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    paths.push_back(dir / ("f" + std::to_string(i)));
    std::ofstream(paths.back()) << (10 * i + 5);
  }
  std::vector<std::string> read;
  auto reader = [&](const std::string& path) {
    read.push_back(path);
    int64_t v = 0;
    std::ifstream(path) >> v;
    return Element{tensor<int64_t>({v}), tensor<int64_t>({v})};
  };
  Dataset ds = Dataset::from_files(paths, reader);
  EXPECT_TRUE(read.empty());
  Dataset::Iterator it = ds.begin_pass(0);
  EXPECT_TRUE(read.empty());
  EXPECT_EQ(it.next()->x.tensors()[0].to_vector<int64_t>(), (std::vector<int64_t>{5}));
  EXPECT_EQ(read, (std::vector<std::string>{paths[0]}));
  EXPECT_THAT(y_values(collect(ds.take(2), 0)), ElementsAre(5, 15));
  EXPECT_EQ(read.size(), 3u);  // 1 + 2: take(2) did not read the third file
  EXPECT_THAT(y_values(collect(ds, 1)), ElementsAre(5, 15, 25));

  paths[1] = dir / "missing";
  Dataset::Iterator gap = Dataset::from_files(paths, reader).begin_pass(0);
  EXPECT_TRUE(gap.next().has_value());
  EXPECT_THAT(error_of([&] { gap.next(); }),
              HasSubstr("Dataset.from_files: file 2 of 3, \"" + paths[1] + "\", does not exist"));
}

TEST(PipelineSources, LazyMnistEqualsTheInMemoryReader) {
  TempDir dir;
  for (bool gz : {false, true}) {
    std::string images = dir / (gz ? "images.gz" : "images"),
                labels = dir / (gz ? "labels.gz" : "labels");
    write_bytes(images, image_bytes(5), gz);
    write_bytes(labels, label_bytes(5), !gz);  // one of each kind per round
    Dataset ds = mnist_dataset(images, labels);
    EXPECT_EQ(ds.cardinality(), 5);
    Tensor x = load_idx_images(images), y = load_idx_labels(labels);
    for (uint64_t pass = 0; pass < 2; ++pass) {
      std::vector<Element> examples = collect(ds, pass);
      ASSERT_EQ(examples.size(), 5u);
      EXPECT_EQ(examples[1].x.tensors()[0].shape(), Shape({2, 3}));
      EXPECT_EQ(examples[1].y.tensors()[0].shape(), Shape({}));
      // Pixel 6 (image 1, first pixel) is 66 / 255; label 1 is 7.
      EXPECT_FLOAT_EQ(examples[1].x.tensors()[0].to_vector<float>()[0], 66.0f / 255.0f);
      EXPECT_EQ(examples[1].y.tensors()[0].item<int64_t>(), 7);
      std::vector<Element> batch = collect(ds.batch(5), pass);
      ASSERT_EQ(batch.size(), 1u);
      EXPECT_TRUE(same_tensor(batch[0].x.tensors()[0], x)) << (gz ? "gzip" : "plain");
      EXPECT_TRUE(same_tensor(batch[0].y.tensors()[0], y));
    }
  }
  // The directory form finds train and test files with or without .gz.
  write_bytes(dir / "train-images-idx3-ubyte.gz", image_bytes(4), true);
  write_bytes(dir / "train-labels-idx1-ubyte", label_bytes(4), false);
  write_bytes(dir / "t10k-images-idx3-ubyte", image_bytes(2), false);
  write_bytes(dir / "t10k-labels-idx1-ubyte.gz", label_bytes(2), true);
  auto [train, test] = mnist_datasets(dir.path.string());
  auto [train_x, test_x] = load_mnist(dir.path.string());
  EXPECT_EQ(train.cardinality(), 4);
  EXPECT_EQ(test.cardinality(), 2);
  EXPECT_TRUE(same_tensor(collect(train.batch(4), 0)[0].x.tensors()[0], train_x.x));
  EXPECT_TRUE(same_tensor(collect(test.batch(4), 0)[0].y.tensors()[0], test_x.y));
}

TEST(PipelineSources, LazyMnistReportsBadFiles) {
  TempDir dir;
  std::string images = dir / "images", labels = dir / "labels";
  write_bytes(labels, label_bytes(5), false);
  // Plain file with 4 images' data for a header of 5: found on opening.
  std::string short_images = image_bytes(5);
  short_images.resize(short_images.size() - 6);
  write_bytes(images, short_images, false);
  EXPECT_THAT(error_of([&] { mnist_dataset(images, labels); }),
              HasSubstr(images + ": IDX header promises 30 bytes of data ((5, 2, 3)), but the "
                                 "file has 24"));
  // The same in gzip: found when the pass reaches record 4.
  write_bytes(images, short_images, true);
  Dataset ds = mnist_dataset(images, labels);
  Dataset::Iterator it = ds.begin_pass(0);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(it.next().has_value());
  EXPECT_THAT(error_of([&] { it.next(); }),
              HasSubstr(images + ": truncated: the IDX header promises 5 records of 6 bytes "
                                 "((5, 2, 3)), but the data ends in record 4"));
  // gzip data cut inside the compressed stream.
  write_bytes(images, image_bytes(5), true);
  std::string gz;
  {
    std::ifstream in(images, std::ios::binary);
    gz.assign(std::istreambuf_iterator<char>(in), {});
  }
  write_bytes(images, gz.substr(0, gz.size() - 12), false);
  EXPECT_THAT(error_of([&] { collect(mnist_dataset(images, labels), 0); }),
              HasSubstr(images + ": truncated: the IDX header promises 5 records of 6 bytes "
                                 "((5, 2, 3)), but the data ends in record 4 (zlib: unexpected "
                                 "end of file)"));
  // More data than the header promises (gzip: found at the end of the pass).
  write_bytes(images, image_bytes(5) + "extra", true);
  EXPECT_THAT(error_of([&] { collect(mnist_dataset(images, labels), 0); }),
              HasSubstr(images + ": the file holds more data than its IDX header promises (5 "
                                 "records of 6 bytes, (5, 2, 3))"));
  // Counts that differ, wrong magic, a missing file.
  write_bytes(images, image_bytes(4), true);
  EXPECT_THAT(error_of([&] { mnist_dataset(images, labels); }),
              HasSubstr("MNIST: " + images + " has 4 images but " + labels + " has 5 labels"));
  EXPECT_THAT(error_of([&] { mnist_dataset(labels, labels); }),
              HasSubstr(labels + ": not an IDX file of this kind: expected magic 0x00000803, "
                                 "found 0x00000801"));
  EXPECT_THAT(error_of([&] { mnist_dataset(dir / "nope", labels); }),
              HasSubstr("cannot open \"" + dir / "nope" + "\""));
  EXPECT_THAT(error_of([&] { mnist_datasets(dir.path.string()); }),
              HasSubstr("has no train-images-idx3-ubyte"));
  // An absurd record size is refused before anything is allocated.
  write_bytes(images, idx_bytes(0x803, {1, 1u << 20, 1u << 20}, ""), true);
  write_bytes(labels, label_bytes(1), false);
  EXPECT_THAT(error_of([&] { mnist_dataset(images, labels); }),
              HasSubstr("one IDX record of 1099511627776 bytes ((1, 1048576, 1048576)) exceeds "
                        "the limit of 1073741824 bytes"));
  // ... unless there are no records (as the in-memory reader, which accepts the empty tensor).
  write_bytes(images, idx_bytes(0x803, {0, 1u << 16, 1u << 16}, ""), true);
  write_bytes(labels, label_bytes(0), false);
  EXPECT_EQ(load_idx_images(images).shape(), Shape({0, 65536, 65536}));
  EXPECT_EQ(mnist_dataset(images, labels).cardinality(), 0);
  EXPECT_TRUE(collect(mnist_dataset(images, labels), 0).empty());
}

TEST(PipelineSources, DigitsAndTextDatasets) {
  Examples d = load_digits();
  Dataset digits = digits_dataset();
  EXPECT_EQ(digits.cardinality(), 1797);
  std::vector<Element> first = collect(digits.take(2).batch(2), 0);
  EXPECT_TRUE(same_tensor(first[0].x.tensors()[0], take_rows(d.x, {0, 1})));
  EXPECT_TRUE(same_tensor(first[0].y.tensors()[0], take_rows(d.y, {0, 1})));
  // "abcab": windows of 2 every 2 characters, ids a=0 b=1 c=2.
  Dataset text = text_dataset({0, 1, 2, 0, 1}, 2, 2);
  EXPECT_EQ(text.cardinality(), 2);
  std::vector<Element> windows = collect(text, 0);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows[1].x.tensors()[0].to_vector<int32_t>(), (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(windows[1].y.tensors()[0].to_vector<int32_t>(), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace kiln::data
