// The one seeded shuffle of kiln's data code: a bounded buffer from which a uniformly chosen
// element is taken each time (tf.data's shuffle buffer). With a buffer that holds every
// element it is a full permutation: data::permutation (the in-memory fit's order) and
// Dataset::shuffle with buffer_size >= the number of elements both run this code, so they give
// the same order for the same seed. Random numbers: splitmix64 mapped to [0, size) by
// multiply-shift, no std:: distributions, so the order is the same on every machine.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kiln/ir/error.h"

namespace kiln::data {

// Sebastiano Vigna's splitmix64: advances `state` and returns 64 random bits.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Contract: add() fills the buffer; take() removes and returns buf[j] for j drawn uniformly in
// [0, size()) and puts `refill` (the next upstream element) in its place, or, when there is
// none, moves the last element into the hole. The sequence of draws depends only on the seed
// and the sizes, never on the elements.
template <typename T>
class ShuffleBuffer {
 public:
  explicit ShuffleBuffer(uint64_t seed) : state_(seed) {}

  void add(T value) { buf_.push_back(std::move(value)); }
  size_t size() const { return buf_.size(); }
  bool empty() const { return buf_.empty(); }

  T take(std::optional<T> refill) {
    KILN_ASSERT(!buf_.empty(), "ShuffleBuffer::take on an empty buffer");
    // Multiply-shift maps 64 random bits to [0, size) (bias < 2^-40 for any realistic size).
    auto j = size_t((static_cast<unsigned __int128>(splitmix64(state_)) * buf_.size()) >> 64);
    T out = std::move(buf_[j]);
    if (refill) {
      buf_[j] = std::move(*refill);
    } else {
      if (j + 1 != buf_.size()) buf_[j] = std::move(buf_.back());
      buf_.pop_back();
    }
    return out;
  }

 private:
  uint64_t state_;
  std::vector<T> buf_;
};

}  // namespace kiln::data
