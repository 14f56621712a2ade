// SeedGenerator: Keras 3's seed generator. Random numbers drawn through it depend only on the
// value of its state variable and on the order of the draws, so a step run eagerly and the
// same step traced by kiln::function (reference executor or compiled) draw the same numbers
// from the same state, and advance the state by the same amount.
//
//   SeedGenerator gen(/*seed=*/std::nullopt, "dropout");   // state "dropout/seed_generator_state"
//   Tensor y = dropout(x, 0.5, gen.next());
//
// How it differs from the bare random ops (random_uniform(shape, int64_t seed), dropout(x,
// rate, int64_t seed)): a bare op traced inside a kiln::function has its integer seed replaced
// by one derived from the function's own "<function>/rng_state" variable (tracing_random.h), so
// that the function draws fresh numbers per call; those are not the numbers the same call makes
// eagerly. A seed tensor from next() is, when traced, a read of the captured state variable and
// goes into the graph as it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"

namespace kiln {

// The global seed sequence, which every draw without an explicit seed uses (an initializer, a
// SeedGenerator made without a seed, a traced function's rng_state): the same program gets the
// same numbers after the same reset.
// Resets the global seed generator (Keras' keras.utils.set_random_seed; starts at 1337).
void set_random_seed(uint64_t seed);
// The next seed of the global sequence (thread-safe).
int64_t next_global_seed();

// Contract:
//  - A handle with reference semantics (copies share the state), like Variable and Layer. A
//    default-constructed handle is empty (defined() == false); next() on it throws kiln::Error.
//  - The state is an int64 scalar, non-trainable Variable named
//    "<scope>/seed_generator_state" ("seed_generator_state" for an empty scope), created
//    eagerly (under InitScope), so a generator made while a function traces is an ordinary
//    variable that the trace captures. Its initial value is a mix of `seed` (or, without one,
//    of the next seed of the global sequence, kiln::set_random_seed), non-negative and below
//    2^62, so nearby user seeds give unrelated streams and the state does not overflow.
//  - next() returns the current state as an int64 scalar seed tensor (concrete eagerly; the
//    traced value of the captured state inside a trace) and adds 1 to the state (assign_add,
//    a recorded assignment when traced). The random ops are Philox keyed by the seed, so seeds
//    s and s + 1 give independent streams. n draws per step advance the state by n, in every
//    mode; inside a kiln::while_loop body the state is a loop-carried variable, so each
//    iteration draws from the next state, as the eager loop does.
class SeedGenerator {
 public:
  SeedGenerator() = default;
  explicit SeedGenerator(std::optional<int64_t> seed, const std::string& scope = "");

  bool defined() const { return state_.defined(); }
  // The seed for the next draw; advances the state by one.
  Tensor next();
  // The state variable (Keras' SeedGenerator.state).
  const Variable& state() const { return state_; }

  friend bool operator==(const SeedGenerator& a, const SeedGenerator& b) {
    return a.state_ == b.state_;
  }

 private:
  Variable state_;
};

// The initial state for a seed (exposed for tests): mixed, in [0, 2^62).
int64_t seed_generator_initial_state(int64_t seed);

}  // namespace kiln
