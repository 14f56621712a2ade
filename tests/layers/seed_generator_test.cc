// SeedGenerator (frontend/seed_generator.h): next() gives the state and advances it, eagerly and
// traced; layers keep their seed generators' states in variables() but not in their weights;
// a Dropout layer draws the same masks eagerly and inside a kiln::function (reference executor
// and compiled) from the same state, also under a GradientTape; a draw in a while_loop body
// follows the eager loop, and the gradient of such a loop is a kiln::Error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "kiln/kiln.h"
#include "tests/frontend/op_test_util.h"
#include "tests/function/function_test_util.h"

namespace kiln {
namespace {

using test::values;
using ::testing::HasSubstr;

int64_t state_of(const SeedGenerator& g) { return g.state().value().item<int64_t>(); }
void set_state(const SeedGenerator& g, int64_t v) {
  Variable s = g.state();
  s.assign(tensor<int64_t>({v}, Shape{}));
}

std::vector<std::string> variable_names(const std::vector<Variable>& vs) {
  std::vector<std::string> out;
  for (const Variable& v : vs) out.push_back(v.name());
  return out;
}

constexpr ExecutionMode kSeedModes[] = {ExecutionMode::kReference, ExecutionMode::kCompiled};

// ---------------------------------------------------------------- the generator

TEST(SeedGenerator, NextGivesTheStateAndAdvancesIt) {
  SeedGenerator g(42, "layer");
  EXPECT_EQ(g.state().name(), "layer/seed_generator_state");
  EXPECT_EQ(g.state().dtype(), DType::i64);
  EXPECT_EQ(g.state().shape(), Shape{});
  EXPECT_FALSE(g.state().trainable());
  const int64_t s0 = state_of(g);
  EXPECT_EQ(s0, seed_generator_initial_state(42));
  for (int64_t k = 0; k < 4; ++k) {
    Tensor seed = g.next();
    EXPECT_EQ(seed.type().to_string(), "i64[]");
    EXPECT_EQ(seed.item<int64_t>(), s0 + k);
  }
  EXPECT_EQ(state_of(g), s0 + 4);
  // Copies share the state.
  SeedGenerator copy = g;
  EXPECT_EQ(copy.next().item<int64_t>(), s0 + 4);
  EXPECT_EQ(state_of(g), s0 + 5);
  EXPECT_EQ(SeedGenerator(1).state().name(), "seed_generator_state");
}

TEST(SeedGenerator, InitialStatesAreMixedReproducibleAndFarFromOverflow) {
  // Nearby user seeds start far apart, so their streams s, s + 1, ... never overlap in
  // practice (2^40 draws), and every start leaves 2^62 draws before int64 overflow.
  std::vector<int64_t> starts;
  for (int64_t seed = -3; seed < 13; ++seed) {
    int64_t s = seed_generator_initial_state(seed);
    EXPECT_EQ(s, seed_generator_initial_state(seed));
    EXPECT_GE(s, 0);
    EXPECT_LT(s, int64_t(1) << 62);
    for (int64_t other : starts) EXPECT_GT(std::abs(s - other), int64_t(1) << 40) << seed;
    starts.push_back(s);
  }
  // Without a seed: the global sequence (kiln::set_random_seed).
  set_random_seed(9);
  int64_t a = state_of(SeedGenerator(std::nullopt)), b = state_of(SeedGenerator(std::nullopt));
  EXPECT_NE(a, b);
  set_random_seed(9);
  EXPECT_EQ(state_of(SeedGenerator(std::nullopt)), a);
  EXPECT_THAT(test::error_message([] { SeedGenerator().next(); }),
              HasSubstr("SeedGenerator::next: the generator handle is empty"));
}

TEST(SeedGenerator, SeedTensorsDrawWhatTheSameIntegerSeedsDraw) {
  SeedGenerator g(3);
  const int64_t s = state_of(g);
  Tensor like = zeros({5, 7});
  EXPECT_EQ(values(random_uniform_like(like, g.next(), -2, 3)),
            values(random_uniform_like(like, s, -2, 3)));
  EXPECT_EQ(values(random_normal({5, 7}, g.next(), 1, 2)),
            values(random_normal({5, 7}, s + 1, 1, 2)));
  EXPECT_EQ(random_integers_like(like, g.next(), 0, 9).to_vector<int64_t>(),
            random_integers_like(like, s + 2, 0, 9).to_vector<int64_t>());
  EXPECT_EQ(values(dropout(ones({64}), 0.5, g.next())), values(dropout(ones({64}), 0.5, s + 3)));
  EXPECT_NE(values(random_uniform_like(like, s)), values(random_uniform_like(like, s + 1)));
  EXPECT_THAT(test::error_message([&] { random_uniform_like(like, ones({}), 0, 1); }),
              HasSubstr("the seed (input 0) must be an int64 scalar, got float32"));
  EXPECT_THAT(test::error_message([&] { random_uniform_like(like, Tensor(), 0, 1); }),
              HasSubstr("the seed is an undefined tensor"));
}

// Two draws per call: the traced graph reads the captured state and adds 2 to it per call; the
// numbers are the eager ones of the seeds state, state + 1 (random ops run the same runtime
// kernel in every mode, so they are compared bitwise).
TEST(SeedGenerator, TracedCallsDrawTheEagerNumbersAndAdvanceByTheDraws) {
  for (ExecutionMode mode : kSeedModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    SeedGenerator g(7, "twice");
    auto f = function(
        [&g](const Tensor& x) {
          Tensor u = random_uniform_like(x, g.next());
          return std::vector<Tensor>{u, random_normal_like(x, g.next())};
        },
        {.name = "two_draws", .mode = mode});
    Tensor x = zeros({3, 4});
    const int64_t s0 = state_of(g);
    for (int64_t call = 0; call < 3; ++call) {
      std::vector<Tensor> out = f(x);
      EXPECT_EQ(state_of(g), s0 + 2 * (call + 1));
      EXPECT_EQ(values(out[0]), values(random_uniform_like(x, s0 + 2 * call)));
      EXPECT_EQ(values(out[1]), values(random_normal_like(x, s0 + 2 * call + 1)));
    }
    EXPECT_EQ(f.tracing_count(), 1);
    // The only variable is the generator's state: no "<function>/rng_state" seed replacement.
    ConcreteFunction c = f.concrete(x);
    ASSERT_EQ(c.variables().size(), 1u);
    EXPECT_EQ(c.variables()[0].variable.name(), "twice/seed_generator_state");
    EXPECT_TRUE(c.variables()[0].read);
    EXPECT_TRUE(c.variables()[0].written);
  }
}

// The integer-seed path is unchanged: a function's bare random op draws from its rng_state.
TEST(SeedGenerator, BareRandomOpsStillDrawFromTheFunctionState) {
  auto f = function([](const Tensor& x) { return random_uniform_like(x, 5); });
  Tensor x = zeros({64});
  std::vector<float> a = values(f(x)), b = values(f(x));
  EXPECT_NE(a, b);
  EXPECT_NE(a, values(random_uniform_like(x, 5)));
}

TEST(SeedGenerator, MadeWhileTracingIsAConcreteVariable) {
  std::optional<Dropout> d;
  auto f = function([&d](const Tensor& x) {
    if (!d) d.emplace(0.5, DropoutOptions{.seed = 3, .name = "made_in_trace"});
    return (*d)(x, true);
  });
  Tensor x = ones({32});
  Tensor first = f(x);
  ASSERT_TRUE(d.has_value());
  const SeedGenerator& g = d->get().seed_generators().at(0);
  const int64_t s0 = seed_generator_initial_state(3);
  EXPECT_EQ(state_of(g), s0 + 1);
  EXPECT_EQ(values(first), values(dropout(x, 0.5, s0)));
  f(x);
  EXPECT_EQ(state_of(g), s0 + 2);
}

// ---------------------------------------------------------------- layers' state

TEST(SeedGenerator, StatesAreVariablesButNotWeights) {
  clear_session();
  Dropout d(0.5, {.seed = 1});
  EXPECT_EQ(variable_names(d->variables()),
            std::vector<std::string>{"dropout/seed_generator_state"});
  EXPECT_TRUE(d->weights().empty());
  EXPECT_TRUE(d->non_trainable_weights().empty());
  EXPECT_TRUE(d->get_weights().empty());
  EXPECT_EQ(d->count_params(), 0);
  EXPECT_TRUE(Dropout(0.0)->variables().empty());  // Keras: no generator at rate 0

  Sequential m({Dense(4), Dropout(0.5), Dense(2)}, Shape{3});
  EXPECT_EQ(
      variable_names(m->variables()),
      (std::vector<std::string>{"dense/kernel", "dense/bias", "dropout_2/seed_generator_state",
                                "dense_1/kernel", "dense_1/bias"}));
  EXPECT_EQ(m->weights().size(), 4u);
  EXPECT_EQ(m->trainable_weights().size(), 4u);
  EXPECT_TRUE(m->non_trainable_weights().empty());
  EXPECT_EQ(m->count_params(), 3 * 4 + 4 + 4 * 2 + 2);
  m->set_weights(m->get_weights());  // still the 4 weights

  // Recurrent layers (always, as Keras' cells), attention (with dropout), wrappers.
  LSTM lstm(3, {.dropout = 0.2, .name = "lstm"});
  lstm(ones({2, 4, 5}));
  EXPECT_EQ(lstm->variables().size(), lstm->weights().size() + 1);
  EXPECT_EQ(lstm->variables().back().name(), "lstm/seed_generator_state");
  Bidirectional bi(GRU(3, {.recurrent_dropout = 0.1, .name = "gru"}));
  bi(ones({2, 4, 5}));
  std::vector<std::string> bi_vars = variable_names(bi->variables());
  EXPECT_EQ(bi_vars.size(), bi->weights().size() + 2);
  EXPECT_EQ(
      std::count_if(bi_vars.begin(), bi_vars.end(),
                    [](const std::string& n) { return n.ends_with("/seed_generator_state"); }),
      2);
  MultiHeadAttention mha(2, 4, {.dropout = 0.1, .name = "mha"});
  mha(std::vector<Tensor>{ones({1, 3, 8}), ones({1, 3, 8})});
  EXPECT_EQ(variable_names(mha->variables()).back(), "mha/seed_generator_state");
  EXPECT_EQ(mha->variables().size(), mha->weights().size() + 1);
  EXPECT_EQ(MultiHeadAttention(2, 4)->variables().size(), 0u);  // not built, no dropout
  TimeDistributed td(Dropout(0.5, {.name = "inner"}));
  EXPECT_EQ(variable_names(td->variables()),
            std::vector<std::string>{"inner/seed_generator_state"});
  EXPECT_TRUE(td->weights().empty());
}

// ---------------------------------------------------------------- eager == traced

// Four training calls of one Dropout layer eagerly, then the same four calls from the same
// state inside a kiln::function. The masks are compared bitwise. So are the kept values: each
// is x * float32(1 / (1 - rate)), one correctly rounded float32 product in every mode (eager
// kernel, reference executor, JIT kernel), so no tolerance is needed.
TEST(SeedGenerator, DropoutLayerDrawsTheEagerMasksWhenTraced) {
  Tensor x = random_uniform({16, 33}, 5, 0.5, 1.5);  // no zeros: a zero output is a dropped one
  for (ExecutionMode mode : kSeedModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    Dropout d(0.3, {.seed = 11});
    const SeedGenerator& g = d->seed_generators().at(0);
    const int64_t s0 = state_of(g);
    std::vector<std::vector<float>> eager;
    for (int i = 0; i < 4; ++i) eager.push_back(values(d(x, true)));
    EXPECT_EQ(state_of(g), s0 + 4);
    EXPECT_NE(eager[0], eager[1]);

    set_state(g, s0);
    auto f = function([&d](const Tensor& x) { return d(x, true); }, {.mode = mode});
    for (int i = 0; i < 4; ++i) {
      std::vector<float> traced = values(f(x));
      EXPECT_EQ(state_of(g), s0 + i + 1);
      EXPECT_EQ(traced, eager[i]) << "call " << i;
    }
    EXPECT_EQ(f.tracing_count(), 1);
  }
}

// Under a GradientTape inside the function: the gradient is the mask times 1 / (1 - rate), the
// same as eagerly; the state advances once per call.
TEST(SeedGenerator, DropoutUnderATapeDrawsTheEagerMaskWhenTraced) {
  Tensor x = random_uniform({8, 9}, 6, 0.5, 1.5);
  Dropout d(0.5, {.seed = 12});
  const SeedGenerator& g = d->seed_generators().at(0);
  auto step = [&d](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = d(x, true);
    return std::vector<Tensor>{y, tape.gradient(sum(y * y), x)};
  };
  const int64_t s0 = state_of(g);
  std::vector<std::vector<float>> eager;
  for (int i = 0; i < 2; ++i)
    for (const Tensor& t : step(x)) eager.push_back(values(t));
  for (ExecutionMode mode : kSeedModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    set_state(g, s0);
    auto f = function(step, {.mode = mode});
    std::vector<std::vector<float>> traced;
    for (int i = 0; i < 2; ++i)
      for (const Tensor& t : f(x)) traced.push_back(values(t));
    EXPECT_EQ(state_of(g), s0 + 2);
    // Outputs: exact as above. Gradients 2 y * 2 (rate 0.5): products by powers of two of
    // exact values, so exact as well.
    EXPECT_EQ(traced, eager);
  }
}

// A function called while an eager tape records runs its forward graph once (the state's
// assignment included) and is differentiated with that call's mask.
TEST(SeedGenerator, FunctionUnderAnOuterTapeAdvancesOnceAndUsesItsMask) {
  Tensor x = random_uniform({5, 6}, 8, 0.5, 1.5);
  Dropout d(0.5, {.seed = 16});
  const SeedGenerator& g = d->seed_generators().at(0);
  auto loss_and_gradient = [&x](const std::function<Tensor(const Tensor&)>& fn) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = fn(x);
    return std::vector<std::vector<float>>{values(y), values(tape.gradient(sum(y * y), x))};
  };
  const int64_t s0 = state_of(g);
  auto eager = loss_and_gradient([&d](const Tensor& x) { return d(x, true); });
  EXPECT_EQ(state_of(g), s0 + 1);
  for (ExecutionMode mode : kSeedModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    set_state(g, s0);
    auto f = function([&d](const Tensor& x) { return d(x, true); }, {.mode = mode});
    EXPECT_EQ(loss_and_gradient([&f](const Tensor& x) { return f(x); }), eager);  // exact
    EXPECT_EQ(state_of(g), s0 + 1);
  }
}

// A draw in a while_loop body: eagerly each iteration draws from the next state; traced, the
// state is a loop-carried variable and the same happens. acc + u is one correctly rounded
// addition per iteration in the same order in every mode, so the results are compared bitwise.
TEST(SeedGenerator, DrawsInAWhileLoopBodyFollowTheEagerLoop) {
  SeedGenerator g(13, "loop");
  auto loop = [&g](const Tensor& acc0) {
    auto cond = [](const std::vector<Tensor>& v) { return less(v[0], scalar(3, DType::i64)); };
    auto body = [&g](const std::vector<Tensor>& v) {
      return std::vector<Tensor>{v[0] + scalar(1, DType::i64),
                                 v[1] + random_uniform_like(v[1], g.next())};
    };
    return while_loop(cond, body, {scalar(0, DType::i64), acc0})[1];
  };
  Tensor acc0 = zeros({4, 5});
  const int64_t s0 = state_of(g);
  std::vector<float> eager1 = values(loop(acc0)), eager2 = values(loop(acc0));
  EXPECT_EQ(state_of(g), s0 + 6);
  EXPECT_NE(eager1, eager2);
  for (ExecutionMode mode : kSeedModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    set_state(g, s0);
    auto f = function(loop, {.mode = mode});
    EXPECT_EQ(values(f(acc0)), eager1);
    EXPECT_EQ(state_of(g), s0 + 3);
    EXPECT_EQ(values(f(acc0)), eager2);
    EXPECT_EQ(state_of(g), s0 + 6);
  }
}

// A bare random op with an integer seed in a traced loop body has one seed for every iteration
// (fixed at trace time), unlike an eager loop computing a seed per iteration: kiln says so
// once per function; a SeedGenerator draw in the same body does not warn.
TEST(SeedGenerator, AnIntegerSeedInATracedLoopBodyWarnsOnce) {
  auto loop = [](const Tensor& acc0, bool from_generator, SeedGenerator* g) {
    auto cond = [](const std::vector<Tensor>& v) { return less(v[0], scalar(3, DType::i64)); };
    auto body = [from_generator, g](const std::vector<Tensor>& v) {
      Tensor u = from_generator ? random_uniform_like(v[1], g->next())
                                : random_uniform_like(v[1], int64_t(99));
      return std::vector<Tensor>{v[0] + scalar(1, DType::i64), v[1] + u};
    };
    return while_loop(cond, body, {scalar(0, DType::i64), acc0})[1];
  };
  SeedGenerator g(5, "warn_loop");
  for (bool from_generator : {false, true}) {
    test::WarningCapture warnings;
    auto f = function([&](const Tensor& x) { return loop(x, from_generator, &g); },
                      {.name = from_generator ? "seeded_loop" : "fixed_seed_loop"});
    f(zeros({2}));
    f(zeros({3}));  // a second trace: still one warning
    if (from_generator) {
      EXPECT_TRUE(warnings.warnings().empty());
    } else {
      ASSERT_EQ(warnings.warnings().size(), 1u);
      EXPECT_THAT(warnings.warnings()[0],
                  HasSubstr("fixed_seed_loop: a random op with an integer seed inside a "
                            "while_loop body draws the same numbers in every iteration"));
    }
  }
}

// A Dropout layer in a cond branch under a tape: the gradient re-traces the branch, which must
// draw the forward call's mask again (from the state before the cond), as the eager gradient
// uses the mask of the call that ran.
TEST(SeedGenerator, DropoutInACondBranchHasTheGradientOfItsOwnMask) {
  Tensor x = random_uniform({6, 7}, 7, 0.5, 1.5);
  Dropout d(0.5, {.seed = 15});
  const SeedGenerator& g = d->seed_generators().at(0);
  auto step = [&d](const Tensor& x, const Tensor& flag) {
    GradientTape tape;
    tape.watch(x);
    Tensor y = cond(
        greater(flag, scalar(0)), [&] { return d(x, true); }, [&] { return x; });
    return std::vector<Tensor>{y, tape.gradient(sum(y * y), x)};
  };
  const int64_t s0 = state_of(g);
  std::vector<std::vector<float>> eager;
  for (const Tensor& t : step(x, scalar(1))) eager.push_back(values(t));
  EXPECT_EQ(state_of(g), s0 + 1);
  for (ExecutionMode mode : kSeedModes) {
    SCOPED_TRACE(execution_mode_name(mode));
    set_state(g, s0);
    auto f = function(step, {.mode = mode});
    std::vector<std::vector<float>> traced;
    for (const Tensor& t : f(x, scalar(1))) traced.push_back(values(t));
    EXPECT_EQ(state_of(g), s0 + 1);
    // y and 2 y * 2: exact (see above).
    EXPECT_EQ(traced, eager);
    f(x, scalar(0));  // the other branch does not draw
    EXPECT_EQ(state_of(g), s0 + 1);
  }
}

// The gradient of a traced loop re-runs its body; a body that draws random numbers is refused
// with a kiln::Error rather than differentiated with other numbers.
TEST(SeedGenerator, GradientOfALoopThatDrawsIsAClearError) {
  SeedGenerator g(14);
  auto f = function([&g](const Tensor& x) {
    GradientTape tape;
    tape.watch(x);
    auto cond = [](const std::vector<Tensor>& v) { return less(v[0], scalar(2, DType::i64)); };
    auto body = [&g](const std::vector<Tensor>& v) {
      return std::vector<Tensor>{v[0] + scalar(1, DType::i64), dropout(v[1], 0.5, g.next())};
    };
    Tensor y = while_loop(cond, body, {scalar(0, DType::i64), x})[1];
    return tape.gradient(sum(y), x);
  });
  EXPECT_THAT(test::error_message([&] { f(ones({4})); }),
              HasSubstr("draws random numbers (random_uniform)"));
}

}  // namespace
}  // namespace kiln
