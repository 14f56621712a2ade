// Random ops that take their shape from another tensor (random_*_like; the op's optional
// second input): dropout and random initialisers inside a kiln::function traced with an
// unknown batch dimension run eagerly, on the reference executor and compiled, and draw as
// many numbers as the arguments have at each call.
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/kiln.h"

namespace kiln {
namespace {

std::vector<float> float_values(const Tensor& t) { return t.to_vector<float>(); }

// x -> (dropout(x, 0.5), random_normal_like(x)), traced once for any batch size.
auto make_noisy(const char* name, ExecutionMode mode) {
  return kiln::function(
      [](const Tensor& x) {
        return std::vector<Tensor>{dropout(x, 0.5, /*seed=*/11),
                                   random_normal_like(x, /*seed=*/12, 0.0, 1.0)};
      },
      {.name = name, .input_signature = std::vector<TensorSpec>{{Shape{-1, 8}}}, .mode = mode});
}

// Dropout at rate 0.5 keeps x * 2 or gives 0, elementwise.
void expect_dropout_of(const Tensor& y, const Tensor& x) {
  ASSERT_EQ(y.shape(), x.shape());
  std::vector<float> vx = float_values(x), vy = float_values(y);
  int kept = 0;
  for (size_t i = 0; i < vx.size(); ++i) {
    EXPECT_TRUE(vy[i] == 0.0f || vy[i] == vx[i] * 2.0f) << i << ": " << vy[i] << " " << vx[i];
    kept += vy[i] != 0.0f;
  }
  // 0.5 of n kept: far outside 0 and n for the sizes used here (n >= 24).
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, int(vx.size()));
}

TEST(RandomShapes, DropoutAndNormalInAnUnknownBatchFunctionRunInEveryMode) {
  std::vector<std::vector<float>> by_mode[2];
  for (ExecutionMode mode : {ExecutionMode::kReference, ExecutionMode::kCompiled}) {
    SCOPED_TRACE(execution_mode_name(mode));
    set_random_seed(21);  // the function's random state starts from the global seed
    auto noisy = make_noisy("noisy", mode);
    for (int64_t batch : {3, 5, 3}) {
      Tensor x = random_normal({batch, 8}, /*seed=*/batch) + 3.0f;  // no zeros
      std::vector<Tensor> out = noisy(x);
      expect_dropout_of(out[0], x);
      EXPECT_EQ(out[1].shape(), (Shape{batch, 8}));
      by_mode[mode == ExecutionMode::kCompiled].push_back(float_values(out[0]));
      by_mode[mode == ExecutionMode::kCompiled].push_back(float_values(out[1]));
    }
    EXPECT_EQ(noisy.tracing_count(), 1);
  }
  // Both modes run the same counter-based kernels from the same seeds: the same numbers.
  EXPECT_EQ(by_mode[0], by_mode[1]);
  // Each call draws new numbers: the two batch-3 calls differ.
  EXPECT_NE(by_mode[1][0], by_mode[1][4]);
}

TEST(RandomShapes, EagerLikeFormsEqualTheShapeForms) {
  Tensor x = zeros({4, 6});
  EXPECT_EQ(float_values(random_uniform_like(x, 5, -1.0, 2.0)),
            float_values(random_uniform({4, 6}, 5, -1, 2)));
  EXPECT_EQ(float_values(random_normal_like(x, 6, 1.0, 3.0)),
            float_values(random_normal({4, 6}, 6, 1, 3)));
  EXPECT_EQ(random_integers_like(x, 7, 0, 9).to_vector<int64_t>(),
            random_integers({4, 6}, 7, 0, 9).to_vector<int64_t>());
  EXPECT_EQ(random_normal_like(x, 6, 0.0, 1.0, DType::f64).dtype(), DType::f64);
}

TEST(RandomShapes, AnUnknownShapeWithoutASourceIsAClearError) {
  auto f = kiln::function([](const Tensor& x) { return random_normal(x.shape(), 3); },
                          {.input_signature = std::vector<TensorSpec>{{Shape{-1, 8}}}});
  try {
    f(zeros({2, 8}));
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("random_normal"), std::string::npos) << m;
    EXPECT_NE(m.find("(None, 8)"), std::string::npos) << m;
    EXPECT_NE(m.find("random_normal_like"), std::string::npos) << m;
  }
}

TEST(RandomShapes, TheShapeAttributeMustAgreeWithTheSource) {
  ir::Graph g("g");
  ir::Value* seed = g.add_parameter({DType::i64, Shape{}});
  ir::Value* like = g.add_parameter({DType::f32, Shape{2, 3}});
  try {
    g.add_op(OpKind::RandomUniform, {seed, like},
             Attrs{{"shape", std::vector<int64_t>{3, 3}},
                   {"dtype", DType::f32},
                   {"minval", 0.0},
                   {"maxval", 1.0}});
    ADD_FAILURE() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("disagrees"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
