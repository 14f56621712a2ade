// Character text data: UTF-8 decoding (and its errors), the vocabulary, training windows and
// the unigram baseline, each against hand-computed values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln::data {
namespace {

using ::kiln::test::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string write_temp(const std::string& name, const std::string& bytes) {
  char dir_template[] = "/tmp/kiln_text_test_XXXXXX";
  std::string dir = mkdtemp(dir_template);
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(Text, DecodesUtf8) {
  // "aé€😀": 1, 2, 3 and 4 bytes.
  std::u32string t = decode_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "s");
  EXPECT_EQ(t, (std::u32string{U'a', 0xE9, 0x20AC, 0x1F600}));
  EXPECT_EQ(encode_utf8(t), "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(Text, RejectsMalformedUtf8WithTheOffset) {
  EXPECT_THAT(
      error_of([] { decode_utf8("ab\xFF", "f"); }),
      HasSubstr("f is not valid UTF-8: a byte that never appears in UTF-8 at byte offset 2"));
  EXPECT_THAT(error_of([] { decode_utf8("\x80", "f"); }), HasSubstr("continuation byte"));
  EXPECT_THAT(error_of([] { decode_utf8("a\xC3", "f"); }), HasSubstr("cut off"));
  EXPECT_THAT(error_of([] { decode_utf8("\xE0\x80\x80", "f"); }), HasSubstr("overlong"));
  EXPECT_THAT(error_of([] { decode_utf8("\xED\xA0\x80", "f"); }), HasSubstr("surrogate"));
  EXPECT_THAT(error_of([] { decode_utf8("\xC3(", "f"); }), HasSubstr("continuation bytes"));
}

TEST(Text, VocabularyEncodesAndDecodes) {
  CharVocabulary v = CharVocabulary::from_text(U"hello");
  EXPECT_EQ(v.chars(), U"ehlo");
  EXPECT_EQ(v.encode("hole"), (std::vector<int32_t>{1, 3, 2, 0}));
  EXPECT_EQ(v.decode({3, 1}), "oh");
  EXPECT_THAT(error_of([&] { v.encode("helo!"); }),
              HasSubstr("character U+0021 '!' at position 4 is not in the model's vocabulary"));
  EXPECT_THAT(error_of([&] { v.decode({4}); }), HasSubstr("outside the vocabulary [0, 4)"));
  EXPECT_THAT(error_of([] { CharVocabulary(U"abca"); }), HasSubstr("appears twice"));
}

TEST(Text, LoadsAFileAndMakesWindows) {
  std::string path = write_temp("t.txt", "abcab\n");
  TextCorpus c = load_text(path);
  EXPECT_EQ(c.vocabulary.chars(), U"\nabc");
  EXPECT_EQ(c.ids, (std::vector<int32_t>{1, 2, 3, 1, 2, 0}));
  Examples w = text_windows(c.ids, 2, 2);
  // Windows start at 0 and 2 (the one at 4 would need 3 characters).
  EXPECT_EQ(w.x.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 1}));
  EXPECT_EQ(w.y.to_vector<int32_t>(), (std::vector<int32_t>{2, 3, 1, 2}));
  EXPECT_EQ(w.x.shape(), (Shape{2, 2}));
  EXPECT_THAT(error_of([&] { text_windows(c.ids, 6, 1); }),
              HasSubstr("the text has 6 characters, fewer than one window of sequence length 6"));
  fs::remove_all(fs::path(path).parent_path());
}

TEST(Text, BadFilesAreClearErrors) {
  EXPECT_THAT(error_of([] { load_text("/nonexistent/kiln.txt"); }),
              HasSubstr("/nonexistent/kiln.txt"));
  std::string empty = write_temp("empty.txt", "");
  EXPECT_THAT(error_of([&] { load_text(empty); }), HasSubstr("is empty"));
  std::string latin1 = write_temp("latin1.txt", "caf\xE9\n");
  EXPECT_THAT(error_of([&] { load_text(latin1); }), HasSubstr("latin1.txt is not valid UTF-8"));
  fs::remove_all(fs::path(empty).parent_path());
  fs::remove_all(fs::path(latin1).parent_path());
}

TEST(Text, UnigramPerplexity) {
  // Frequencies 1/2, 1/4, 1/4: entropy 1.5 bits, perplexity 2^1.5.
  EXPECT_NEAR(unigram_perplexity({0, 0, 1, 2}, 3), std::pow(2.0, 1.5), 1e-12);
  EXPECT_NEAR(unigram_perplexity({1, 1, 1}, 3), 1.0, 1e-15);
}

}  // namespace
}  // namespace kiln::data
