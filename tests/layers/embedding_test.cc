// Embedding: lookup against the table, gradients with respect to the table, dtype errors,
// symbolic shapes, config, regularization.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/layers/layer_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::HasSubstr;

TEST(EmbeddingTest, LooksUpRowsOfTheTable) {
  clear_session();
  Embedding e(10, 3);
  EXPECT_FALSE(e->built());
  Tensor idx = tensor<int32_t>({1, 0, 9, 1, 4, 4}, {2, 3});
  Tensor y = e(idx);
  EXPECT_TRUE(e->built());
  EXPECT_EQ(e->embeddings.name(), "embedding/embeddings");
  EXPECT_EQ(e->embeddings.shape(), (Shape{10, 3}));
  std::vector<double> table = e->embeddings.value().to_vector<double>(), want;
  for (double v : table) {
    EXPECT_GE(v, -0.05);
    EXPECT_LE(v, 0.05);
  }
  for (int32_t i : idx.to_vector<int32_t>())
    for (int c = 0; c < 3; ++c) want.push_back(table[size_t(i * 3 + c)]);
  test::expect_tensor(y, DType::f32, {2, 3, 3}, want, 0);
  test::expect_tensor(e(tensor<int64_t>({9})), DType::f32, {1, 3},
                      {table[27], table[28], table[29]}, 0);
  test::expect_tensor(e(tensor<uint8_t>({0})), DType::f32, {1, 3}, {table[0], table[1], table[2]},
                      0);
}

TEST(EmbeddingTest, GradientWithRespectToTheTable) {
  Embedding e(5, 2, {.dtype = DType::f64});
  Tensor idx = tensor<int64_t>({0, 3, 3, 1}, {2, 2});
  e(idx);
  EXPECT_TRUE(test::check_layer_gradients(e, idx, false, /*wrt_input=*/false));
  // Repeated indices accumulate: row 3 appears twice.
  GradientTape tape;
  Tensor y = e(idx);
  Tensor g = tape.gradient(sum(y), std::vector<Variable>{e->embeddings})[0];
  test::expect_tensor(g, DType::f64, {5, 2}, {1, 1, 1, 1, 0, 0, 2, 2, 0, 0}, 0);
}

TEST(EmbeddingTest, WholeFloatIndicesAreCastOthersAreAnError) {
  clear_session();
  Embedding e(4, 2);
  // Keras casts float indices to int32: the same rows as the int32 indices.
  Tensor ints = e(tensor<int32_t>({3, 0, 2, 1}, {4}));
  Tensor floats = e(tensor<float>({3, 0, 2, 1}, {4}));
  test::expect_tensor(floats, DType::f32, {4, 2}, ints.to_vector<double>(), 0);
  EXPECT_EQ(error_message([&] {
              e(full({2, 3}, 1.5));
            }),
            "layer \"embedding\": Embedding casts float indices to int32, but 6 of the 6 values "
            "of its float32 input of shape (2, 3) are not whole numbers (or do not fit in "
            "int32); pass integer indices");
  EXPECT_THAT(error_message([&] { e(cast(ones({2}), DType::b8)); }),
              HasSubstr("Embedding expects integer indices (int32 or int64) or float indices "
                        "holding whole numbers, but received a bool input"));
  EXPECT_THAT(error_message([] { Embedding(0, 2); }),
              HasSubstr("Both `input_dim` and `output_dim` should be positive"));
}

TEST(EmbeddingTest, SymbolicShapesConfigAndRegularization) {
  Embedding e(100, 8, {.embeddings_regularizer = regularizers::l2(0.5)});
  EXPECT_EQ(e->compute_output_shape({Shape{-1, 20}})[0], (Shape{-1, 20, 8}));
  Tensor y = e(test::symbolic_input({-1, 20}, DType::i32));
  EXPECT_EQ(y.shape(), (Shape{-1, 20, 8}));
  EXPECT_EQ(y.dtype(), DType::f32);
  double l2 = 0;
  for (double v : e->embeddings.value().to_vector<double>()) l2 += v * v;
  ASSERT_EQ(e->losses().size(), 1u);
  EXPECT_NEAR(e->losses()[0].item<double>(), 0.5 * l2, 1e-6);
  nlohmann::json c = e->get_config();
  for (const char* key :
       {"name", "trainable", "dtype", "input_dim", "output_dim", "embeddings_initializer",
        "embeddings_regularizer", "embeddings_constraint", "mask_zero"})
    EXPECT_TRUE(c.contains(key)) << key;
  EXPECT_EQ(c["input_dim"], 100);
  EXPECT_EQ(c["output_dim"], 8);
  EXPECT_EQ(c["embeddings_initializer"], "random_uniform");
  EXPECT_EQ(c["embeddings_regularizer"]["class_name"], "L2");
}

}  // namespace
}  // namespace kiln
