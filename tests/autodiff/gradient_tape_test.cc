// GradientTape semantics (frontend/gradient_tape.cc): watching, unconnected sources,
// accumulation, broadcasting, output gradients, persistence, StopRecording, reset, dtype
// rules and variables. Higher-order gradients: higher_order_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "kiln/kiln.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln {
namespace {

using gradcheck::max_abs_diff;

using gradcheck::doubles_of;

// Expects `fn` to throw kiln::Error whose message contains `needle`.
template <typename Fn>
void expect_tape_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected kiln::Error containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// ---- watching and unconnected sources ----

TEST(GradientTape, UnwatchedSourceIsUndefinedOrZero) {
  Tensor x = tensor<double>({1, 2, 3}), z = tensor<double>({4, 5}, {2, 1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = sum(x * 2.0);
  std::vector<Tensor> none = tape.gradient(y, {x, z}, UnconnectedGradients::kNone);
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(doubles_of(none[0]), (std::vector<double>{2, 2, 2}));
  EXPECT_FALSE(none[1].defined());
  std::vector<Tensor> zero = tape.gradient(y, {x, z}, UnconnectedGradients::kZero);
  ASSERT_TRUE(zero[1].defined());
  EXPECT_EQ(zero[1].type(), z.type());
  EXPECT_EQ(doubles_of(zero[1]), (std::vector<double>{0, 0}));
  // The single-source overload too.
  EXPECT_FALSE(tape.gradient(y, z).defined());
}

// An unwatched tensor gets no gradient even when a recorded op consumed it (TensorFlow's
// semantics): only watched tensors and outputs of recorded ops are differentiable sources.
TEST(GradientTape, UnwatchedInputOfARecordedOpHasNoGradient) {
  Tensor x = tensor<double>({1, 2}), c = tensor<double>({3, 4});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * c;
  std::vector<Tensor> g = tape.gradient(y, {x, c});
  EXPECT_EQ(doubles_of(g[0]), (std::vector<double>{3, 4}));
  EXPECT_FALSE(g[1].defined());
  EXPECT_EQ(doubles_of(tape.gradient(y, std::vector<Tensor>{c}, UnconnectedGradients::kZero)[0]),
            (std::vector<double>{0, 0}));
  // Nor is an unwatched tensor its own gradient source.
  EXPECT_FALSE(tape.gradient(c, c).defined());
}

TEST(GradientTape, OpsBeforeWatchAreNotRecorded) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  Tensor y = x * x;  // x is not watched yet
  tape.watch(x);
  EXPECT_FALSE(tape.gradient(sum(y), x).defined());
}

TEST(GradientTape, WatchedListsEachTensorOnce) {
  Tensor a = tensor<double>({1}), b = tensor<double>({2});
  GradientTape tape;
  tape.watch(a);
  tape.watch({a, b});
  std::vector<Tensor> w = tape.watched();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].id(), a.id());
  EXPECT_EQ(w[1].id(), b.id());
}

TEST(GradientTape, GradientOfTargetWithRespectToItselfIsOnes) {
  Tensor x = tensor<double>({1, 2, 3});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(x, x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(doubles_of(g), (std::vector<double>{1, 1, 1}));
}

// ---- accumulation, broadcasting, targets ----

TEST(GradientTape, FanOutAccumulates) {
  Tensor x = tensor<double>({-1.5, 0, 2, 3.25});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x + x;
  Tensor g = tape.gradient(y, x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(doubles_of(g), (std::vector<double>{-2, 1, 5, 7.5}));  // 2x + 1
}

TEST(GradientTape, BroadcastingReducesToTheSourceShape) {
  Tensor x = tensor<double>({1, 2, 3}, {3, 1});
  Tensor s = scalar(2.0, DType::f64);
  Tensor c = tensor<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  GradientTape tape;
  tape.watch({x, s});
  Tensor y = x * c + s;  // (3, 4)
  std::vector<Tensor> g = tape.gradient(y, {x, s});
  EXPECT_EQ(g[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(doubles_of(g[0]), (std::vector<double>{10, 26, 42}));  // row sums of c
  EXPECT_EQ(g[1].shape(), Shape{});
  EXPECT_EQ(g[1].item<double>(), 12.0);
}

TEST(GradientTape, NonScalarTargetIsSummed) {
  Tensor x = tensor<double>({1, -2, 3, 0.5}, {2, 2});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(x * x, x);
  EXPECT_EQ(doubles_of(g), (std::vector<double>{2, -4, 6, 1}));
}

TEST(GradientTape, OutputGradientWeightsTheTarget) {
  Tensor x = tensor<double>({1, -2, 3}), w = tensor<double>({0.5, 2, -1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  std::vector<Tensor> g = tape.gradient(y, {x}, UnconnectedGradients::kNone, w);
  EXPECT_EQ(doubles_of(g[0]), (std::vector<double>{1, -8, -6}));  // 2 x w
  expect_tape_error(
      [&] {
        tape.gradient(y, {x}, UnconnectedGradients::kNone, tensor<double>({1, 2}));
      },
      "output_gradient");
  expect_tape_error(
      [&] {
        tape.gradient(y, {x}, UnconnectedGradients::kNone, tensor<float>({1, 2, 3}));
      },
      "output_gradient");
}

TEST(GradientTape, GradientWithRespectToAnIntermediate) {
  Tensor x = tensor<double>({0.5, -1});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  Tensor z = exp(y) * 3.0;
  std::vector<Tensor> g = tape.gradient(z, {y, x});
  ASSERT_TRUE(g[0].defined() && g[1].defined());
  EXPECT_LT(max_abs_diff(g[0], 3.0 * exp(y)), 1e-12);
  EXPECT_LT(max_abs_diff(g[1], 6.0 * x * exp(y)), 1e-12);
  // An intermediate on the path is also a valid single source afterwards.
  EXPECT_LT(max_abs_diff(tape.gradient(z, y), 3.0 * exp(y)), 1e-12);
}

TEST(GradientTape, TwoSourcesSharingAPath) {
  Tensor a = tensor<double>({1.5, -2}), b = tensor<double>({0.5, 3});
  GradientTape tape;
  tape.watch({a, b});
  Tensor c = a * b;
  Tensor z = c * c + a;
  std::vector<Tensor> g = tape.gradient(z, {a, b});
  // dz/da = 2 c b + 1, dz/db = 2 c a.
  EXPECT_EQ(doubles_of(g[0]), (std::vector<double>{2 * 0.75 * 0.5 + 1, 2 * -6.0 * 3 + 1}));
  EXPECT_EQ(doubles_of(g[1]), (std::vector<double>{2 * 0.75 * 1.5, 2 * -6.0 * -2}));
}

TEST(GradientTape, SameSourceListedTwice) {
  Tensor x = tensor<double>({2, 3});
  GradientTape tape;
  tape.watch(x);
  std::vector<Tensor> g = tape.gradient(x * x, {x, x});
  EXPECT_EQ(doubles_of(g[0]), (std::vector<double>{4, 6}));
  EXPECT_EQ(doubles_of(g[1]), (std::vector<double>{4, 6}));
}

// ---- persistence, StopRecording, reset ----

TEST(GradientTape, NonPersistentTapeAllowsOneCall) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  EXPECT_FALSE(tape.persistent());
  tape.watch(x);
  Tensor y = sum(x * x);
  Tensor g = tape.gradient(y, x);
  EXPECT_EQ(doubles_of(g), (std::vector<double>{2, 4}));
  expect_tape_error([&] { tape.gradient(y, x); }, "persistent");
}

TEST(GradientTape, PersistentTapeAllowsSeveralCalls) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape(/*persistent=*/true);
  EXPECT_TRUE(tape.persistent());
  tape.watch(x);
  Tensor y = x * x, z = y * x;
  EXPECT_EQ(doubles_of(tape.gradient(y, x)), (std::vector<double>{2, 4}));
  EXPECT_EQ(doubles_of(tape.gradient(z, x)), (std::vector<double>{3, 12}));
  EXPECT_EQ(doubles_of(tape.gradient(y, x)), (std::vector<double>{2, 4}));
  // Recording continues between calls.
  Tensor w = z + y;
  EXPECT_EQ(doubles_of(tape.gradient(w, x)), (std::vector<double>{5, 16}));
}

TEST(GradientTape, StopRecordingPausesOnlyThisTape) {
  Tensor x = tensor<double>({1, 2});
  GradientTape other;
  other.watch(x);
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor y = x * x;
  Tensor paused;
  {
    GradientTape::StopRecording stop(tape);
    paused = y * x;  // not recorded by `tape`, recorded by `other`
  }
  Tensor resumed = y * 3.0;  // recorded again
  EXPECT_FALSE(tape.gradient(paused, x).defined());
  EXPECT_EQ(doubles_of(tape.gradient(resumed, x)), (std::vector<double>{6, 12}));
  EXPECT_EQ(doubles_of(other.gradient(paused, x)), (std::vector<double>{3, 12}));
}

TEST(GradientTape, StopRecordingOnAPausedPathStopsTheGradient) {
  Tensor x = tensor<double>({2});
  GradientTape tape;
  tape.watch(x);
  Tensor frozen;
  {
    GradientTape::StopRecording stop(tape);
    frozen = x * x;  // acts as a constant
  }
  Tensor y = frozen * x;
  EXPECT_EQ(doubles_of(tape.gradient(y, x)), (std::vector<double>{4}));
}

TEST(GradientTape, ResetForgetsRecordsAndWatches) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  tape.watch(x);
  Tensor y = x * x;
  tape.reset();
  EXPECT_TRUE(tape.watched().empty());
  EXPECT_FALSE(tape.gradient(y, x).defined());
  // reset also re-arms a used non-persistent tape.
  tape.reset();
  tape.watch(x);
  Tensor z = x * x * x;
  EXPECT_EQ(doubles_of(tape.gradient(z, x)), (std::vector<double>{3, 12}));
}

// Tapes are per thread: ops run on another thread are not recorded.
TEST(GradientTape, OpsOnAnotherThreadAreNotRecorded) {
  Tensor x = tensor<double>({1, 2});
  GradientTape tape;
  tape.watch(x);
  Tensor y;
  std::thread([&] { y = x * x; }).join();
  Tensor z = x * 3.0;
  Tensor g = tape.gradient(y + z, x);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(doubles_of(g), (std::vector<double>{3, 3}));
}

// ---- dtypes ----

TEST(GradientTape, WatchingAnIntegerTensorIsAnError) {
  GradientTape tape;
  expect_tape_error([&] { tape.watch(tensor<int32_t>({1, 2})); }, "floating");
  expect_tape_error([&] { tape.watch(tensor<bool>({true})); }, "floating");
  expect_tape_error([&] { tape.watch(Tensor()); }, "undefined");
}

TEST(GradientTape, IntegerOpsAreNotRecorded) {
  Tensor x = tensor<double>({1.5, 2.5});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  Tensor i = cast(x, DType::i64);
  Tensor j = i + i;
  Tensor back = cast(j, DType::f64);
  EXPECT_FALSE(tape.gradient(back, x).defined());
  // Comparisons, argmax (kNoGradient) neither.
  Tensor mask = cast(greater(x, scalar(2.0, DType::f64)), DType::f64);
  EXPECT_FALSE(tape.gradient(mask, x).defined());
  Tensor am = cast(argmax(x), DType::f64);
  EXPECT_FALSE(tape.gradient(am, x).defined());
  // A target that is not floating is an error.
  expect_tape_error([&] { tape.gradient(j, x); }, "floating");
}

TEST(GradientTape, Float32Gradients) {
  Tensor x = tensor<float>({1, 2, 3});
  GradientTape tape;
  tape.watch(x);
  Tensor g = tape.gradient(sum(x * x * x), x);
  ASSERT_EQ(g.dtype(), DType::f32);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{3, 12, 27}));
}

// ---- variables ----

TEST(GradientTape, TrainableVariableReadsAreWatched) {
  Variable v("w", tensor<double>({1, -2, 3}));
  Variable frozen("f", tensor<double>({2, 2, 2}), /*trainable=*/false);
  GradientTape tape;
  Tensor loss = sum(v.read() * v.read() * frozen.read());
  std::vector<Tensor> g = tape.gradient(loss, std::vector<Variable>{v, frozen});
  ASSERT_EQ(g.size(), 2u);
  ASSERT_TRUE(g[0].defined());
  EXPECT_EQ(doubles_of(g[0]), (std::vector<double>{4, -8, 12}));  // 2 v f
  EXPECT_FALSE(g[1].defined());                                   // not trainable, not watched
}

TEST(GradientTape, VariableReadsOutsideTheTapeOrWhilePausedAreNotWatched) {
  Variable v("w", tensor<double>({1, 2}));
  Tensor before = v.read();
  GradientTape tape(/*persistent=*/true);
  Tensor y = before * 3.0;
  EXPECT_FALSE(tape.gradient(y, std::vector<Variable>{v})[0].defined());
  Tensor paused_read;
  {
    GradientTape::StopRecording stop(tape);
    paused_read = v.read();
  }
  EXPECT_TRUE(tape.watched().empty());
  Tensor z = v.read() * v.read();  // now watched
  std::vector<Tensor> g = tape.gradient(z, std::vector<Variable>{v}, UnconnectedGradients::kZero);
  EXPECT_EQ(doubles_of(g[0]), (std::vector<double>{2, 4}));
}

// One training step as fit() runs it: the gradient of a loss w.r.t. a variable, applied with
// assign_sub, then a fresh tape for the next step sees the new value.
TEST(GradientTape, GradientDescentStepsOnAVariable) {
  Variable w("w", tensor<double>({3.0}));
  for (int step = 0; step < 3; ++step) {
    GradientTape tape;
    Tensor loss = sum(square(w.read() - 1.0));  // minimum at 1
    Tensor g = tape.gradient(loss, std::vector<Variable>{w})[0];
    ASSERT_TRUE(g.defined()) << "step " << step;
    w.assign_sub(g * 0.25);  // w <- w - 0.5 (w - 1)
  }
  EXPECT_DOUBLE_EQ(w.value().item<double>(), 1.25);  // 3 -> 2 -> 1.5 -> 1.25
}

}  // namespace
}  // namespace kiln
