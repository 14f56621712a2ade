// Dropout: identity at inference, inverted-dropout scaling in training, fresh masks per call,
// reproducible seeds, symbolic inputs, config and errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

TEST(DropoutTest, IdentityAtInference) {
  clear_session();
  Dropout d(0.5);
  EXPECT_EQ(d->name(), "dropout");
  Tensor x = gradcheck::uniform({4, 8}, 61);
  Tensor y = d(x);
  EXPECT_EQ(y.id(), x.id());
  EXPECT_TRUE(d->weights().empty());
}

TEST(DropoutTest, TrainingZeroesOrScalesEachElement) {
  Dropout d(0.25, {.seed = 7});
  Tensor x = gradcheck::uniform({50, 40}, 62, 0.5, 1.5);
  std::vector<double> xv = x.to_vector<double>(), yv = d(x, true).to_vector<double>();
  int zeros_seen = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0) {
      ++zeros_seen;
    } else {
      EXPECT_NEAR(yv[i], xv[i] / 0.75, 1e-12);
    }
  }
  // 2000 elements at rate 0.25: 500 expected, standard deviation ~19.
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
}

TEST(DropoutTest, SuccessiveCallsUseDifferentMasksAndSeedsReproduce) {
  Tensor x = ones({1000});
  Dropout a(0.5, {.seed = 3}), b(0.5, {.seed = 3});
  std::vector<float> a1 = a(x, true).to_vector<float>(), a2 = a(x, true).to_vector<float>();
  EXPECT_NE(a1, a2);
  EXPECT_EQ(b(x, true).to_vector<float>(), a1);
  EXPECT_EQ(b(x, true).to_vector<float>(), a2);
  // Without a seed: the global sequence, so set_random_seed reproduces the masks.
  set_random_seed(5);
  std::vector<float> c1 = Dropout(0.5)(x, true).to_vector<float>();
  set_random_seed(5);
  EXPECT_EQ(Dropout(0.5)(x, true).to_vector<float>(), c1);
}

TEST(DropoutTest, GradientIsTheMaskScaling) {
  Dropout d(0.5, {.seed = 11});
  Tensor x = gradcheck::uniform({3, 6}, 63);
  GradientTape tape;
  tape.watch(x);
  Tensor y = d(x, true);
  Tensor g = tape.gradient(sum(y), x);
  std::vector<double> yv = y.to_vector<double>(), gv = g.to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(gv[i], yv[i] == 0 ? 0 : 2.0);
}

TEST(DropoutTest, SymbolicInputsKeepTheirShape) {
  Dropout d(0.3);
  Tensor y = d(test::symbolic_input({-1, 10}), true);
  EXPECT_TRUE(y.is_symbolic());
  EXPECT_EQ(y.shape(), (Shape{-1, 10}));
  EXPECT_EQ(d->compute_output_shape({Shape{-1, 10}})[0], (Shape{-1, 10}));
}

TEST(DropoutTest, ConfigAndErrors) {
  Dropout d(0.2, {.seed = 42});
  nlohmann::json c = d->get_config();
  EXPECT_DOUBLE_EQ(c["rate"].get<double>(), 0.2);
  EXPECT_EQ(c["seed"], 42);
  EXPECT_TRUE(c["noise_shape"].is_null());
  EXPECT_TRUE(c.contains("name"));
  EXPECT_TRUE(Dropout(0.1)->get_config()["seed"].is_null());
  EXPECT_THAT(test::error_message([] { Dropout(1.0); }),
              HasSubstr("Invalid value received for argument `rate`. Expected a float value in "
                        "[0, 1). Received: rate=1"));
  EXPECT_THAT(test::error_message([] { Dropout(-0.1); }), HasSubstr("rate=-0.1"));
  EXPECT_THAT(test::error_message([] { Dropout(0.5)(ones({2}, DType::i32), true); }),
              HasSubstr("Dropout needs a floating input"));
  // rate 0 is the identity even in training.
  Tensor x = ones({3});
  EXPECT_EQ(Dropout(0.0)(x, true).id(), x.id());
}

}  // namespace
}  // namespace kiln
