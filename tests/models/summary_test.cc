// Model summaries against golden texts in Keras 3's format (rich's table as Keras prints it
// to a log: 88 columns for sequential-like models, 108 with "Connected to").
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "kiln/kiln.h"
#include "tests/models/model_test_util.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Dense(128) on 64 features: 64 * 128 + 128 = 8,320; Dense(10): 128 * 10 + 10 = 1,290.
// Total 9,610 float32 params = 38,440 bytes = 37.54 KB (1 KB = 1024 B).
constexpr const char* kMlpRows =
    "│ dense (Dense)                        │ (None, 128)                 │           8,320 │\n"
    "├──────────────────────────────────────┼─────────────────────────────┼─────────────────┤\n"
    "│ dense_1 (Dense)                      │ (None, 10)                  │           1,290 │\n"
    "└──────────────────────────────────────┴─────────────────────────────┴─────────────────┘\n"
    " Total params: 9,610 (37.54 KB)\n"
    " Trainable params: 9,610 (37.54 KB)\n"
    " Non-trainable params: 0 (0.00 B)\n";

constexpr const char* kHeader3 =
    "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┓\n"
    "┃ Layer (type)                         ┃ Output Shape                ┃         Param # ┃\n"
    "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━┩\n";

TEST(Summary, SequentialMlp) {
  clear_session();
  Sequential model({Dense(128, {.activation = "relu"}), Dense(10)}, Shape{64});
  std::string want = std::string("Model: \"sequential\"\n") + kHeader3 + kMlpRows;
  EXPECT_EQ(model->summary_string(), want);
  std::ostringstream os;
  model->summary(os);
  EXPECT_EQ(os.str(), want);
}

// The digits MLP as a functional model: a chain, so Keras prints it without "Connected to",
// with the InputLayer as the first row (0 params).
TEST(Summary, FunctionalDigitsMlp) {
  clear_session();
  Tensor x = Input({64});
  Tensor h = Dense(128, {.activation = "relu"})(x);
  Model model(x, Dense(10)(h));
  std::string want =
      std::string("Model: \"functional\"\n") + kHeader3 +
      "│ input_layer (InputLayer)             │ (None, 64)                  │               0 │\n"
      "├──────────────────────────────────────┼─────────────────────────────┼─────────────────┤\n" +
      kMlpRows;
  EXPECT_EQ(model->summary_string(), want);
}

// A diamond: Connected to lists each input as <layer>[node index][tensor index].
// Params: Dense(8) on 16 features 16 * 8 + 8 = 136 (twice); Dense(1) on 8: 9.
// Total 281 params = 1,124 bytes = 1.10 KB.
TEST(Summary, FunctionalWithConnections) {
  clear_session();
  Tensor x = Input({16});
  Tensor a = Dense(8)(x);
  Tensor b = Dense(8)(x);
  Model model(x, Dense(1)(Add()({a, b})), "diamond");
  EXPECT_EQ(
      model->summary_string(),
      "Model: \"diamond\"\n"
      "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━━━━"
      "━━━━━━━━━━━━━━━━━━┓\n"
      "┃ Layer (type)                  ┃ Output Shape              ┃         Param # ┃ Connected "
      "to               ┃\n"
      "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━━━"
      "━━━━━━━━━━━━━━━━━━┩\n"
      "│ input_layer (InputLayer)      │ (None, 16)                │               0 │ -        "
      "                  │\n"
      "├───────────────────────────────┼───────────────────────────┼─────────────────┼──────────"
      "──────────────────┤\n"
      "│ dense (Dense)                 │ (None, 8)                 │             136 │ input_lay"
      "er[0][0]          │\n"
      "├───────────────────────────────┼───────────────────────────┼─────────────────┼──────────"
      "──────────────────┤\n"
      "│ dense_1 (Dense)               │ (None, 8)                 │             136 │ input_lay"
      "er[0][0]          │\n"
      "├───────────────────────────────┼───────────────────────────┼─────────────────┼──────────"
      "──────────────────┤\n"
      "│ add (Add)                     │ (None, 8)                 │               0 │ dense[0]["
      "0], dense_1[0][0] │\n"
      "├───────────────────────────────┼───────────────────────────┼─────────────────┼──────────"
      "──────────────────┤\n"
      "│ dense_2 (Dense)               │ (None, 1)                 │               9 │ add[0][0]"
      "                  │\n"
      "└───────────────────────────────┴───────────────────────────┴─────────────────┴──────────"
      "──────────────────┘\n"
      " Total params: 281 (1.10 KB)\n"
      " Trainable params: 281 (1.10 KB)\n"
      " Non-trainable params: 0 (0.00 B)\n");
}

// Before its first call a subclassed model's layers are unbuilt: "?" and "0 (unbuilt)".
class TwoDenseImpl : public ModelImpl {
 public:
  TwoDenseImpl() : ModelImpl("TwoDense"), a(track(Dense(4))), b(track(Dense(2))) {}
  Tensor call(const Tensor& x, bool) override { return b(a(x)); }
  Dense a, b;
};

TEST(Summary, SubclassedBeforeAndAfterCall) {
  clear_session();
  Model model(std::make_shared<TwoDenseImpl>());
  EXPECT_EQ(model->summary_string(), std::string("Model: \"two_dense\"\n") + kHeader3 +
                                         "│ dense (Dense)                        │ ?               "
                                         "            │     0 (unbuilt) │\n"
                                         "├──────────────────────────────────────┼─────────────────"
                                         "────────────┼─────────────────┤\n"
                                         "│ dense_1 (Dense)                      │ ?               "
                                         "            │     0 (unbuilt) │\n"
                                         "└──────────────────────────────────────┴─────────────────"
                                         "────────────┴─────────────────┘\n"
                                         " Total params: 0 (0.00 B)\n"
                                         " Trainable params: 0 (0.00 B)\n"
                                         " Non-trainable params: 0 (0.00 B)\n");
  model(ones({5, 3}));
  std::string s = model->summary_string();
  EXPECT_THAT(s, HasSubstr("│ dense (Dense)                        │ (5, 4)                      │"
                           "              16 │\n"));
  EXPECT_THAT(s, HasSubstr(" Total params: 26 (104.00 B)\n"));
}

// Frozen layers count as non-trainable; sizes switch units at 1024.
// dense: 100 * 1000 + 1000 = 101,000 (404,000 B = 394.53 KB), frozen;
// dense_1: 1000 * 1000 + 1000 = 1,001,000 (4,004,000 B = 3.82 MB); total 4,408,000 B = 4.20 MB.
TEST(Summary, NonTrainableParamsAndUnits) {
  clear_session();
  Dense frozen(1000);
  Sequential model({frozen, Dense(1000)}, Shape{100});
  frozen->set_trainable(false);
  std::string s = model->summary_string();
  EXPECT_THAT(s, HasSubstr(" Total params: 1,102,000 (4.20 MB)\n"
                           " Trainable params: 1,001,000 (3.82 MB)\n"
                           " Non-trainable params: 101,000 (394.53 KB)\n"));
  EXPECT_THAT(s, HasSubstr("│         101,000 │"));
}

// After the compiled optimizer's first step its variables are listed and added to the total.
// Dense(2) on 3 features: 8 params (32 B). Adam: iterations (int64, 8 B), learning_rate
// (float64, 8 B) plus two float32 slots per weight (16 values, 64 B): 18 params, 80 B (Keras
// counts 2 + 2 x trainable too). Total 26 params, 112 B.
TEST(Summary, OptimizerParamsAfterAStep) {
  clear_session();
  Sequential model({Dense(2)}, Shape{3});
  model->compile({.optimizer = Adam(), .loss = "mse"});
  EXPECT_THAT(model->summary_string(), Not(HasSubstr("Optimizer params")));
  std::vector<Variable> vars = model->trainable_weights();
  std::vector<Tensor> grads;
  for (const Variable& v : vars) grads.push_back(ones(v.shape()));
  model->compile_options().optimizer->apply_gradients(grads, vars);
  EXPECT_THAT(model->summary_string(), HasSubstr(" Total params: 26 (112.00 B)\n"
                                                 " Trainable params: 8 (32.00 B)\n"
                                                 " Non-trainable params: 0 (0.00 B)\n"
                                                 " Optimizer params: 18 (80.00 B)\n"));
}

// A narrow table: rich shrinks the columns evenly, wraps cells at spaces, cuts words longer
// than a cell with "…", and pads the other cells of a taller row.
TEST(Summary, NarrowLineLengthWrapsCells) {
  clear_session();
  Sequential model({test::ScaleBias(1, "a_rather_long_layer_name_here")});
  EXPECT_EQ(model->summary_string(60),
            "Model: \"sequential\"\n"
            "┏━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━┓\n"
            "┃ Layer (type)             ┃ Output Shape      ┃   Param # ┃\n"
            "┡━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━┩\n"
            "│ a_rather_long_layer_nam… │ ?                 │         0 │\n"
            "│ (ScaleBias)              │                   │ (unbuilt) │\n"
            "└──────────────────────────┴───────────────────┴───────────┘\n"
            " Total params: 0 (0.00 B)\n"
            " Trainable params: 0 (0.00 B)\n"
            " Non-trainable params: 0 (0.00 B)\n");
  EXPECT_THAT(test::error_message([&] { model->summary_string(8); }),
              HasSubstr("line_length 8 is too small"));
}

TEST(Summary, NestedModelsAndEmptyModel) {
  clear_session();
  Sequential inner({Dense(3)});
  Tensor x = Input({2});
  Model model(x, inner(x));
  EXPECT_THAT(model->summary_string(),
              HasSubstr("│ sequential (Sequential)              │ (None, 3)                   │"
                        "               9 │\n"));
  EXPECT_EQ(Sequential()->summary_string(),
            std::string("Model: \"sequential_1\"\n") + kHeader3 +
                "└──────────────────────────────────────┴─────────────────────────────┴──────────"
                "───────┘\n"
                " Total params: 0 (0.00 B)\n"
                " Trainable params: 0 (0.00 B)\n"
                " Non-trainable params: 0 (0.00 B)\n");
}

}  // namespace
}  // namespace kiln
