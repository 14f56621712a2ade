// Character-level text data for language models: a UTF-8 file decoded to Unicode code points,
// a vocabulary of the characters it uses (sorted by code point, ids 0..V-1), and training
// windows (x = ids[i : i+T], y = ids[i+1 : i+T+1], the next character at every position).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/keras/data/dataset.h"

namespace kiln::data {

// The characters of a text and their ids.
class CharVocabulary {
 public:
  CharVocabulary() = default;
  // Every distinct code point of `text`, sorted.
  static CharVocabulary from_text(const std::u32string& text);
  // The given code points (no duplicates; kiln::Error otherwise), in that order.
  explicit CharVocabulary(std::u32string chars);

  int64_t size() const { return int64_t(chars_.size()); }
  const std::u32string& chars() const { return chars_; }
  // Ids of `text` (UTF-8). kiln::Error for invalid UTF-8 or a character outside the
  // vocabulary, naming it (as U+XXXX and as text) and its position.
  std::vector<int32_t> encode(const std::string& text) const;
  // UTF-8 text of `ids`; kiln::Error for an id outside [0, size()).
  std::string decode(const std::vector<int32_t>& ids) const;

 private:
  std::u32string chars_;
  std::unordered_map<char32_t, int32_t> ids_;
};

// Code points of UTF-8 `bytes`. kiln::Error naming `what` and the byte offset for malformed
// input (bad lead or continuation bytes, overlong forms, surrogates, values above U+10FFFF).
std::u32string decode_utf8(const std::string& bytes, const std::string& what);
std::string encode_utf8(const std::u32string& text);

struct TextCorpus {
  CharVocabulary vocabulary;
  std::vector<int32_t> ids;  // the whole text
};

// Reads a UTF-8 text file: kiln::Error for a missing file, an empty one, or one that is not
// UTF-8 (with the byte offset).
TextCorpus load_text(const std::string& path);

// Windows of `seq_len` ids every `stride` positions: x [N, seq_len] and y (x shifted by one)
// [N, seq_len], int32. kiln::Error when the text has fewer than seq_len + 1 characters.
Examples text_windows(const std::vector<int32_t>& ids, int64_t seq_len, int64_t stride);

// exp(entropy) of the character frequencies of `ids`: the perplexity of the best model that
// ignores context (the unigram baseline a language model must beat).
double unigram_perplexity(const std::vector<int32_t>& ids, int64_t vocabulary_size);

}  // namespace kiln::data
