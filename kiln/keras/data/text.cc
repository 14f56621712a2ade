#include "kiln/keras/data/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kiln/frontend/creation.h"
#include "kiln/keras/io/file_util.h"

namespace kiln::data {
namespace {

std::string describe(char32_t c) {
  std::string text = c >= 0x20 && c != 0x7f ? encode_utf8(std::u32string(1, c)) : "";
  return text.empty() ? fmt::format("U+{:04X}", uint32_t(c))
                      : fmt::format("U+{:04X} '{}'", uint32_t(c), text);
}

}  // namespace

std::u32string decode_utf8(const std::string& bytes, const std::string& what) {
  std::u32string out;
  out.reserve(bytes.size());
  size_t i = 0;
  auto bad = [&](const char* why) {
    throw Error(fmt::format("{} is not valid UTF-8: {} at byte offset {} (byte 0x{:02X})", what,
                            why, i, static_cast<unsigned char>(bytes[i])));
  };
  while (i < bytes.size()) {
    const auto b0 = static_cast<unsigned char>(bytes[i]);
    int len = 1;
    char32_t c = 0;
    if (b0 < 0x80) {
      len = 1, c = b0;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2, c = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3, c = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4, c = b0 & 0x07;
    } else {
      bad(b0 >= 0x80 && b0 < 0xC0 ? "a continuation byte without a lead byte"
                                  : "a byte that never appears in UTF-8");
    }
    if (i + size_t(len) > bytes.size()) bad("a character cut off by the end of the data");
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(bytes[i + size_t(k)]);
      if ((b & 0xC0) != 0x80) bad("a lead byte not followed by enough continuation bytes");
      c = (c << 6) | (b & 0x3F);
    }
    if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000)) bad("an overlong encoding");
    if (c >= 0xD800 && c <= 0xDFFF) bad("an encoded surrogate");
    if (c > 0x10FFFF) bad("a code point above U+10FFFF");
    out.push_back(c);
    i += size_t(len);
  }
  return out;
}

std::string encode_utf8(const std::u32string& text) {
  std::string out;
  for (char32_t c : text) {
    if (c < 0x80) {
      out += char(c);
    } else if (c < 0x800) {
      out += char(0xC0 | (c >> 6));
      out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += char(0xE0 | (c >> 12));
      out += char(0x80 | ((c >> 6) & 0x3F));
      out += char(0x80 | (c & 0x3F));
    } else {
      out += char(0xF0 | (c >> 18));
      out += char(0x80 | ((c >> 12) & 0x3F));
      out += char(0x80 | ((c >> 6) & 0x3F));
      out += char(0x80 | (c & 0x3F));
    }
  }
  return out;
}

CharVocabulary CharVocabulary::from_text(const std::u32string& text) {
  std::u32string chars = text;
  std::sort(chars.begin(), chars.end());
  chars.erase(std::unique(chars.begin(), chars.end()), chars.end());
  return CharVocabulary(std::move(chars));
}

CharVocabulary::CharVocabulary(std::u32string chars) : chars_(std::move(chars)) {
  for (size_t i = 0; i < chars_.size(); ++i)
    if (!ids_.emplace(chars_[i], int32_t(i)).second)
      throw Error(fmt::format("character vocabulary: {} appears twice (positions {} and {})",
                              describe(chars_[i]), ids_.at(chars_[i]), i));
}

std::vector<int32_t> CharVocabulary::encode(const std::string& text) const {
  std::u32string cps = decode_utf8(text, "the text");
  std::vector<int32_t> ids;
  ids.reserve(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    auto it = ids_.find(cps[i]);
    if (it == ids_.end())
      throw Error(fmt::format(
          "character {} at position {} is not in the model's vocabulary of {} characters "
          "(the characters of its training text); use only characters that text contains",
          describe(cps[i]), i, chars_.size()));
    ids.push_back(it->second);
  }
  return ids;
}

std::string CharVocabulary::decode(const std::vector<int32_t>& ids) const {
  std::u32string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= int32_t(chars_.size()))
      throw Error(
          fmt::format("character id {} is outside the vocabulary [0, {})", id, chars_.size()));
    out.push_back(chars_[size_t(id)]);
  }
  return encode_utf8(out);
}

TextCorpus load_text(const std::string& path) {
  std::string bytes = io::read_file(path);
  if (bytes.empty())
    throw Error(fmt::format("text file {} is empty; a language model needs some text", path));
  std::u32string text = decode_utf8(bytes, "text file " + path);
  TextCorpus c;
  c.vocabulary = CharVocabulary::from_text(text);
  c.ids.reserve(text.size());
  std::unordered_map<char32_t, int32_t> id;
  for (size_t i = 0; i < c.vocabulary.chars().size(); ++i) id[c.vocabulary.chars()[i]] = int32_t(i);
  for (char32_t ch : text) c.ids.push_back(id.at(ch));
  return c;
}

Examples text_windows(const std::vector<int32_t>& ids, int64_t seq_len, int64_t stride) {
  if (seq_len <= 0 || stride <= 0)
    throw Error(fmt::format("text windows: sequence length {} and stride {} must be positive",
                            seq_len, stride));
  const int64_t n = int64_t(ids.size());
  if (n < seq_len + 1)
    throw Error(fmt::format(
        "the text has {} characters, fewer than one window of sequence length {} plus the "
        "next character; use a longer text or a shorter sequence length",
        n, seq_len));
  const int64_t windows = (n - seq_len - 1) / stride + 1;
  std::vector<int32_t> x, y;
  x.reserve(size_t(windows * seq_len));
  y.reserve(size_t(windows * seq_len));
  for (int64_t w = 0; w < windows; ++w)
    for (int64_t t = 0; t < seq_len; ++t) {
      x.push_back(ids[size_t(w * stride + t)]);
      y.push_back(ids[size_t(w * stride + t + 1)]);
    }
  return {tensor(x, {windows, seq_len}), tensor(y, {windows, seq_len})};
}

double unigram_perplexity(const std::vector<int32_t>& ids, int64_t vocabulary_size) {
  std::vector<double> counts(size_t(std::max<int64_t>(vocabulary_size, 1)), 0);
  for (int32_t id : ids) counts.at(size_t(id)) += 1;
  double entropy = 0;
  for (double c : counts)
    if (c > 0) {
      double p = c / double(ids.size());
      entropy -= p * std::log(p);
    }
  return std::exp(entropy);
}

}  // namespace kiln::data
