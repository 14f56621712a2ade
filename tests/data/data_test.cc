// Data loaders: the shipped digits set, MNIST IDX files (plain and gzip) written here, and
// the deterministic shuffle / split / batching helpers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "kiln/kiln.h"
#include "tests/data/idx_test_util.h"
#include "tests/support/error_of.h"

namespace kiln::data {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using ::kiln::data::test::idx_bytes;
using ::kiln::test::error_of;

TEST(Digits, LoadsTheShippedFile) {
  Examples d = load_digits();
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
  Examples d = load_digits();
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
  // A directory opens as a stream that reads nothing; it must not look like an empty file.
  EXPECT_THAT(error_of([] { load_digits(fs::temp_directory_path().string()); }),
              HasSubstr("it is a directory, not a file"));
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
  test::write_bytes(p.string(), test::idx_bytes(magic, dims, std::string(data.begin(), data.end())),
                    gz);
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

TEST(Digits, DecodesBytesAndRejectsNaNAndNamesTheLine) {
  // 64 pixels 0..16 (then a label is appended).
  std::string row = "0";
  for (int i = 1; i < 64; ++i) row.append(",").append(std::to_string(i % 17));
  Examples d = decode_digits(row + ",3\n\n" + row + ",7\r\n", "mem");
  EXPECT_EQ(d.x.shape(), Shape({2, 64}));
  EXPECT_EQ(d.y.to_vector<int64_t>(), (std::vector<int64_t>{3, 7}));
  // NaN passed the 0..16 range check (every comparison with NaN is false).
  EXPECT_THAT(error_of([&] { decode_digits("nan" + row.substr(1) + ",3\n", "mem"); }),
              HasSubstr("mem: line 1: pixel 0 is nan, outside 0..16"));
  EXPECT_THAT(error_of([&] { decode_digits(row + ",nan\n", "mem"); }),
              HasSubstr("mem: line 1: label nan is not a digit 0..9"));
  EXPECT_THAT(error_of([&] { decode_digits(row + ",1e300\n", "mem"); }),
              HasSubstr("label 1e+300 is not a digit"));
  // Lines are counted in the file, blank ones included.
  EXPECT_THAT(error_of([&] { decode_digits(row + ",3\n\n\n" + row + ",x\n", "mem"); }),
              HasSubstr("mem: line 4: \"x\" is not a number"));
}

// gzip-compressed bytes of `text`.
std::string gzip_of(const std::string& text) {
  z_stream zs{};
  deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, uLong(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = uInt(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(Gzip, DecompressionIsBounded) {
  std::string text(1 << 20, 'a');
  std::string gz = gzip_of(text);
  EXPECT_LT(gz.size(), 4096u);  // a "zip bomb" in miniature
  EXPECT_EQ(maybe_gunzip(gz, "mem"), text);
  EXPECT_EQ(maybe_gunzip("plain", "mem"), "plain");
  EXPECT_THAT(error_of([&] { maybe_gunzip(gz, "bomb.gz", 1000); }),
              HasSubstr("bomb.gz: gzip data expands to more than 1000 bytes"));
  EXPECT_THAT(error_of([&] { maybe_gunzip(gz.substr(0, gz.size() / 2), "half.gz"); }),
              HasSubstr("half.gz: truncated gzip data"));
}

TEST(Mnist, IdxElementCountLimits) {
  // 2^31 * 2^31 * 4 = 2^64 wrapped to 0 and matched the missing data.
  EXPECT_THAT(error_of([] {
                decode_idx_images(idx_bytes(0x803, {1u << 31, 1u << 31, 4}, ""), "x.idx");
              }),
              HasSubstr("x.idx: IDX header: shape (2147483648, 2147483648, 4) has more elements "
                        "than int64 can count"));
  EXPECT_THAT(error_of([] {
                decode_idx_images(idx_bytes(0x803, {65536, 65536, 65536}, ""), "x.idx");
              }),
              HasSubstr("has 281474976710656 elements, more than the limit of 1099511627776"));
  EXPECT_THAT(error_of([] {
                decode_idx_images(idx_bytes(0x803, {0, 4294967295u, 4294967295u}, ""), "x.idx");
              }),
              HasSubstr("x.idx: IDX header: shape (0, 4294967295, 4294967295) has more elements "
                        "than int64 can count"));
  Tensor labels = decode_idx_labels(gzip_of(idx_bytes(0x801, {2}, "\x05\x09")), "mem");
  EXPECT_EQ(labels.to_vector<int64_t>(), (std::vector<int64_t>{5, 9}));
}

}  // namespace
}  // namespace kiln::data
