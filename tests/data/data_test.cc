// Data loaders: the shipped digits set, MNIST IDX files (plain and gzip) written here, and
// the deterministic shuffle / split / batching helpers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln::data {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using ::kiln::test::error_of;

TEST(Digits, LoadsTheShippedFile) {
  Dataset d = load_digits();
  EXPECT_EQ(d.x.shape(), Shape({1797, 64}));
  EXPECT_EQ(d.y.shape(), Shape({1797}));
  EXPECT_EQ(d.y.dtype(), DType::i64);
  EXPECT_GE(min(d.x).item<float>(), 0.0f);
  EXPECT_LE(max(d.x).item<float>(), 1.0f);
  EXPECT_EQ(max(d.x).item<float>(), 1.0f);  // some pixel is 16
  // Every class is present, roughly 180 examples each.
  Tensor counts = sum(one_hot(d.y, 10), {0});
  for (float c : counts.to_vector<float>()) EXPECT_NEAR(c, 180, 10);
  // The first row of the UCI test set is a 0.
  EXPECT_EQ(d.y.to_vector<int64_t>()[0], 0);
}

TEST(Digits, SplitIsDeterministicAndDisjoint) {
  Dataset d = load_digits();
  auto [train1, test1] = train_test_split(d, 0.2, 0);
  auto [train2, test2] = train_test_split(d, 0.2, 0);
  EXPECT_EQ(train1.size(), 1438);
  EXPECT_EQ(test1.size(), 359);
  EXPECT_EQ(test1.y.to_vector<int64_t>(), test2.y.to_vector<int64_t>());
  EXPECT_EQ(test1.x.to_vector<float>(), test2.x.to_vector<float>());
  auto [train3, test3] = train_test_split(d, 0.2, 1);
  EXPECT_NE(test1.y.to_vector<int64_t>(), test3.y.to_vector<int64_t>());
}

TEST(Digits, RejectsMalformedFiles) {
  fs::path p = fs::temp_directory_path() / "kiln_bad_digits.csv";
  std::ofstream(p) << "1,2,3\n";
  EXPECT_THAT(error_of([&] { load_digits(p.string()); }), HasSubstr("line 1 has 3 values"));
  std::ofstream(p) << std::string(64 * 2, '0').replace(0, 1, "x") << "\n";
  EXPECT_THAT(error_of([&] { load_digits(p.string()); }), HasSubstr("is not a number"));
  fs::remove(p);
  EXPECT_THAT(error_of([] { load_digits("/no/such/digits.csv.gz"); }), HasSubstr("cannot open"));
}

TEST(Shuffle, PermutationIsSeededAndComplete) {
  std::vector<int64_t> a = permutation(1000, 42), b = permutation(1000, 42);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, permutation(1000, 43));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(sorted[size_t(i)], i);
  // Pinned: the same order on every machine (splitmix64 + Fisher-Yates, no std:: distributions).
  std::vector<int64_t> small = permutation(5, 7);
  std::vector<int64_t> again = permutation(5, 7);
  EXPECT_EQ(small, again);
}

TEST(Batches, KeepTheLastPartialBatch) {
  auto b = batch_indices(10, 4, false, 0);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(b[2], (std::vector<int64_t>{8, 9}));
  auto s = batch_indices(10, 4, true, 3);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].size(), 2u);
  EXPECT_NE(s[0], b[0]);
  EXPECT_THAT(error_of([] { batch_indices(10, 0, false, 0); }), HasSubstr("at least 1"));
}

// Writes an IDX file (optionally gzip-compressed).
void write_idx(const fs::path& p, uint32_t magic, const std::vector<uint32_t>& dims,
               const std::vector<uint8_t>& data, bool gz) {
  std::string bytes;
  auto be = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes += char((v >> s) & 0xff);
  };
  be(magic);
  for (uint32_t d : dims) be(d);
  bytes.append(data.begin(), data.end());
  if (!gz) {
    std::ofstream(p, std::ios::binary) << bytes;
    return;
  }
  gzFile f = gzopen(p.string().c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

TEST(Mnist, ReadsIdxFilesPlainAndGzip) {
  fs::path dir = fs::temp_directory_path() / "kiln_mnist_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<uint8_t> px(3 * 2 * 2);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 20);
  write_idx(dir / "train-images-idx3-ubyte", 0x803, {3, 2, 2}, px, false);
  write_idx(dir / "train-labels-idx1-ubyte.gz", 0x801, {3}, {7, 0, 9}, true);
  write_idx(dir / "t10k-images-idx3-ubyte.gz", 0x803, {1, 2, 2}, {0, 255, 51, 102}, true);
  write_idx(dir / "t10k-labels-idx1-ubyte", 0x801, {1}, {4}, false);
  auto [train, test] = load_mnist(dir.string());
  EXPECT_EQ(train.x.shape(), Shape({3, 2, 2}));
  EXPECT_EQ(train.y.to_vector<int64_t>(), (std::vector<int64_t>{7, 0, 9}));
  EXPECT_FLOAT_EQ(train.x.to_vector<float>()[1], 20.0f / 255.0f);
  EXPECT_EQ(test.x.to_vector<float>(), (std::vector<float>{0, 1, 0.2f, 0.4f}));
  EXPECT_EQ(test.y.to_vector<int64_t>(), (std::vector<int64_t>{4}));

  write_idx(dir / "t10k-labels-idx1-ubyte", 0x801, {2}, {4}, false);  // promises 2, has 1
  EXPECT_THAT(error_of([&] { load_mnist(dir.string()); }), HasSubstr("promises 2 bytes"));
  write_idx(dir / "t10k-labels-idx1-ubyte", 0x803, {1}, {4}, false);  // wrong magic
  EXPECT_THAT(error_of([&] { load_mnist(dir.string()); }), HasSubstr("expected magic 0x00000801"));
  write_idx(dir / "t10k-labels-idx1-ubyte", 0x801, {2}, {4, 5}, false);  // count mismatch
  EXPECT_THAT(error_of([&] { load_mnist(dir.string()); }), HasSubstr("has 1 images but"));
  std::ofstream(dir / "t10k-images-idx3-ubyte.gz", std::ios::binary) << "\x1f\x8b garbage";
  EXPECT_THAT(error_of([&] { load_mnist(dir.string()); }), HasSubstr("corrupt gzip data"));
  fs::remove(dir / "t10k-images-idx3-ubyte.gz");
  EXPECT_THAT(error_of([&] { load_mnist(dir.string()); }),
              HasSubstr("has no t10k-images-idx3-ubyte"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::data
