// Bad input to ops throws kiln::Error (never aborts) with a message that names the op and the
// values involved.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/frontend/op_test_util.h"

namespace kiln {
namespace {

using test::error_message;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(OpErrors, ErrorIsARuntimeError) {
  try {
    add(zeros({2}), zeros({3}));
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(dynamic_cast<const Error*>(&e), nullptr);
  }
}

TEST(OpErrors, ShapesThatDoNotBroadcast) {
  EXPECT_THAT(error_message([] {
                add(zeros({2, 3}), zeros({4}));
              }),
              AllOf(HasSubstr("add"), HasSubstr("(2, 3)"), HasSubstr("(4,)"),
                    HasSubstr("do not broadcast")));
  EXPECT_THAT(error_message([] {
                mul(zeros({5, 1, 3}), zeros({2, 2}));
              }),
              AllOf(HasSubstr("mul"), HasSubstr("(5, 1, 3)"), HasSubstr("(2, 2)")));
  EXPECT_THAT(error_message([] { zeros({3}) - zeros({2}); }),
              AllOf(HasSubstr("sub"), HasSubstr("(3,)"), HasSubstr("(2,)")));
  EXPECT_THAT(error_message([] { less(zeros({0}), zeros({2})); }),
              AllOf(HasSubstr("less"), HasSubstr("(0,)"), HasSubstr("(2,)")));
  EXPECT_THAT(error_message([] {
                where(tensor<bool>({true, false, true}), zeros({2}), zeros({2}));
              }),
              AllOf(HasSubstr("select"), HasSubstr("(3,)"), HasSubstr("(2,)")));
  EXPECT_THAT(error_message([] {
                broadcast_to(zeros({3, 2}), {3, 4});
              }),
              AllOf(HasSubstr("broadcast_to"), HasSubstr("(3, 2)"), HasSubstr("(3, 4)")));
}

TEST(OpErrors, DTypeMismatch) {
  EXPECT_THAT(
      error_message([] { add(zeros({2}), zeros({2}, DType::f64)); }),
      AllOf(HasSubstr("add"), HasSubstr("float32"), HasSubstr("float64"), HasSubstr("kiln::cast")));
  EXPECT_THAT(error_message([] { equal(zeros({2}, DType::i32), zeros({2}, DType::i64)); }),
              AllOf(HasSubstr("equal"), HasSubstr("int32"), HasSubstr("int64")));
  EXPECT_THAT(error_message([] {
                matmul(zeros({2, 2}), zeros({2, 2}, DType::f64));
              }),
              AllOf(HasSubstr("matmul"), HasSubstr("float32"), HasSubstr("float64")));
  EXPECT_THAT(error_message([] {
                concat({zeros({2}), zeros({2}, DType::i32)});
              }),
              AllOf(HasSubstr("concat"), HasSubstr("int32"), HasSubstr("float32")));
  EXPECT_THAT(
      error_message([] { where(tensor<bool>({true}), zeros({1}), zeros({1}, DType::i64)); }),
      AllOf(HasSubstr("select"), HasSubstr("float32"), HasSubstr("int64")));
  EXPECT_THAT(error_message([] { where(zeros({1}), zeros({1}), zeros({1})); }),
              AllOf(HasSubstr("select"), HasSubstr("condition"), HasSubstr("bool")));
}

TEST(OpErrors, FloatOnlyOpsRejectIntegers) {
  EXPECT_THAT(error_message([] { exp(zeros({2}, DType::i32)); }),
              AllOf(HasSubstr("exp"), HasSubstr("int32"), HasSubstr("floating")));
  EXPECT_THAT(error_message([] { sqrt(zeros({2}, DType::i64)); }),
              AllOf(HasSubstr("sqrt"), HasSubstr("int64")));
  EXPECT_THAT(error_message([] { mean(zeros({2}, DType::i32)); }),
              AllOf(HasSubstr("mean"), HasSubstr("int32")));
  EXPECT_THAT(error_message([] { softmax(zeros({2}, DType::i32)); }),
              AllOf(HasSubstr("softmax"), HasSubstr("int32")));
  EXPECT_THAT(error_message([] { pow(ones({2}, DType::i32), ones({2}, DType::i32)); }),
              AllOf(HasSubstr("pow"), HasSubstr("int32")));
  EXPECT_THAT(error_message([] { add(tensor<bool>({true}), tensor<bool>({true})); }),
              AllOf(HasSubstr("add"), HasSubstr("bool")));
  EXPECT_THAT(error_message([] { logical_and(ones({1}), ones({1})); }),
              AllOf(HasSubstr("logical_and"), HasSubstr("float32")));
}

TEST(OpErrors, BadAxis) {
  EXPECT_THAT(error_message([] {
                sum(zeros({2, 3}), {2});
              }),
              AllOf(HasSubstr("sum"), HasSubstr("axis 2"), HasSubstr("rank 2")));
  EXPECT_THAT(error_message([] {
                max(zeros({2, 3}), {-3});
              }),
              AllOf(HasSubstr("max"), HasSubstr("axis -3"), HasSubstr("rank 2")));
  EXPECT_THAT(error_message([] {
                softmax(zeros({2, 3}), 5);
              }),
              AllOf(HasSubstr("softmax"), HasSubstr("axis 5"), HasSubstr("rank 2")));
  EXPECT_THAT(error_message([] { argmax(zeros({4}), 1); }),
              AllOf(HasSubstr("argmax"), HasSubstr("axis 1"), HasSubstr("rank 1")));
  EXPECT_THAT(error_message([] { argmin(scalar(1)); }),
              AllOf(HasSubstr("argmin"), HasSubstr("rank 0")));
  EXPECT_THAT(error_message([] {
                concat({zeros({2}), zeros({2})}, 1);
              }),
              AllOf(HasSubstr("concat"), HasSubstr("axis 1"), HasSubstr("rank 1")));
  EXPECT_THAT(error_message([] { gather(zeros({2}), tensor({0}), 2); }),
              AllOf(HasSubstr("gather"), HasSubstr("axis 2"), HasSubstr("rank 1")));
  EXPECT_THAT(error_message([] { expand_dims(zeros({2}), 3); }),
              AllOf(HasSubstr("expand_dims"), HasSubstr("axis 3")));
  EXPECT_THAT(error_message([] {
                stack({zeros({2}), zeros({2})}, -3);
              }),
              AllOf(HasSubstr("stack"), HasSubstr("axis -3")));
  EXPECT_THAT(error_message([] {
                sum(zeros({2, 3}), {1, -1});
              }),
              AllOf(HasSubstr("sum"), HasSubstr("same axis twice")));
}

TEST(OpErrors, EmptyReductionsWithoutIdentity) {
  EXPECT_THAT(error_message([] {
                max(zeros({0, 3}));
              }),
              AllOf(HasSubstr("max"), HasSubstr("(0, 3)"), HasSubstr("size 0")));
  EXPECT_THAT(error_message([] {
                argmax(zeros({3, 0}));
              }),
              AllOf(HasSubstr("argmax"), HasSubstr("(3, 0)")));
}

TEST(OpErrors, MatmulInnerDimensions) {
  EXPECT_EQ(error_message([] {
              matmul(zeros({64, 784}), zeros({256, 10}));
            }),
            "matmul: inner dimensions differ: a is (64, 784), b is (256, 10)");
  EXPECT_EQ(error_message([] {
              matmul(zeros({3, 4}), zeros({5, 4}), false, false);
            }),
            "matmul: inner dimensions differ: a is (3, 4), b is (5, 4)");
  EXPECT_EQ(error_message([] {
              matmul(zeros({3, 4}), zeros({4, 3}), false, true);
            }),
            "matmul: inner dimensions differ: a is (3, 4), b is (4, 3) (transposed)");
  EXPECT_EQ(error_message([] {
              matmul(zeros({4, 3}), zeros({3, 5}), true, false);
            }),
            "matmul: inner dimensions differ: a is (4, 3) (transposed), b is (3, 5)");
  EXPECT_THAT(error_message([] {
                matmul(zeros({4}), zeros({4, 2}));
              }),
              AllOf(HasSubstr("matmul"), HasSubstr("rank >= 2"), HasSubstr("(4,)")));
  EXPECT_THAT(error_message([] {
                matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
              }),
              AllOf(HasSubstr("matmul"), HasSubstr("(2,)"), HasSubstr("(3,)")));
}

TEST(OpErrors, ShapeOps) {
  EXPECT_THAT(
      error_message([] {
        reshape(zeros({2, 3}), {4});
      }),
      AllOf(HasSubstr("reshape"), HasSubstr("(2, 3)"), HasSubstr("6 elements"), HasSubstr("(4,)")));
  EXPECT_THAT(error_message([] {
                reshape(zeros({2, 3}), {4, -1});
              }),
              AllOf(HasSubstr("reshape"), HasSubstr("(2, 3)"), HasSubstr("[4, -1]")));
  EXPECT_THAT(error_message([] {
                reshape(zeros({2, 3}), {-1, -1});
              }),
              AllOf(HasSubstr("reshape"), HasSubstr("more than one -1")));
  EXPECT_THAT(error_message([] {
                transpose(zeros({2, 3, 4}), {0, 0, 1});
              }),
              AllOf(HasSubstr("transpose"), HasSubstr("[0, 0, 1]"), HasSubstr("permutation")));
  EXPECT_THAT(error_message([] {
                transpose(zeros({2, 3}), {0, 1, 2});
              }),
              AllOf(HasSubstr("transpose"), HasSubstr("(2, 3)"), HasSubstr("rank 2")));
  EXPECT_THAT(error_message([] {
                transpose(zeros({2, 3}), {0, 2});
              }),
              AllOf(HasSubstr("transpose"), HasSubstr("permutation")));
  EXPECT_THAT(
      error_message([] {
        concat({zeros({2, 3}), zeros({2, 4})}, 0);
      }),
      AllOf(HasSubstr("concat"), HasSubstr("(2, 4)"), HasSubstr("(2, 3)"), HasSubstr("axis 0")));
  EXPECT_THAT(error_message([] {
                concat({zeros({2, 3}), zeros({6})}, 0);
              }),
              AllOf(HasSubstr("concat"), HasSubstr("(6,)")));
  EXPECT_THAT(error_message([] { concat({}); }), HasSubstr("concat"));
  EXPECT_THAT(error_message([] {
                concat({scalar(1), scalar(2)});
              }),
              AllOf(HasSubstr("concat"), HasSubstr("scalars")));
  EXPECT_THAT(error_message([] {
                stack({zeros({2}), zeros({3})});
              }),
              AllOf(HasSubstr("stack"), HasSubstr("(2,)"), HasSubstr("(3,)")));
  EXPECT_THAT(error_message([] {
                squeeze(zeros({2, 1}), {0});
              }),
              AllOf(HasSubstr("squeeze"), HasSubstr("(2, 1)"), HasSubstr("not 1")));
}

TEST(OpErrors, SliceAndPad) {
  EXPECT_THAT(error_message([] { slice(zeros({5}), {0}, {5}, {0}); }),
              AllOf(HasSubstr("slice"), HasSubstr("step"), HasSubstr("positive")));
  EXPECT_THAT(error_message([] { slice(zeros({5}), {4}, {0}, {-1}); }),
              AllOf(HasSubstr("slice"), HasSubstr("-1"), HasSubstr("positive")));
  EXPECT_THAT(error_message([] {
                slice(zeros({5, 5}), {0}, {5});
              }),
              AllOf(HasSubstr("slice"), HasSubstr("start"), HasSubstr("(5, 5)")));
  EXPECT_THAT(error_message([] { pad(zeros({3}), {-1}, {0}); }),
              AllOf(HasSubstr("pad"), HasSubstr(">= 0")));
  EXPECT_THAT(error_message([] {
                pad(zeros({3, 3}), {1}, {1});
              }),
              AllOf(HasSubstr("pad"), HasSubstr("low"), HasSubstr("(3, 3)")));
}

TEST(OpErrors, GatherScatterOneHot) {
  Tensor params = zeros({3, 4});
  EXPECT_THAT(error_message([&] {
                gather(params, tensor({0, 3}), 0);
              }),
              AllOf(HasSubstr("gather"), HasSubstr("index 3"), HasSubstr("[0, 3)")));
  EXPECT_THAT(error_message([&] { gather(params, tensor({-1}, Shape{1}, DType::i64), 1); }),
              AllOf(HasSubstr("gather"), HasSubstr("index -1"), HasSubstr("[0, 4)")));
  EXPECT_THAT(error_message([&] { gather(params, zeros({2})); }),
              AllOf(HasSubstr("gather"), HasSubstr("int32 or int64"), HasSubstr("float32")));
  EXPECT_THAT(error_message([] {
                scatter_add(ones({2}), tensor({0, 5}), 0, 3);
              }),
              AllOf(HasSubstr("scatter_add"), HasSubstr("index 5"), HasSubstr("[0, 3)")));
  EXPECT_THAT(error_message([] {
                scatter_add(ones({2, 2}), tensor({0, 1, 1}), 0, 3);
              }),
              AllOf(HasSubstr("scatter_add"), HasSubstr("(2, 2)"), HasSubstr("(3,)")));
  EXPECT_THAT(error_message([] { one_hot(zeros({2}), 3); }),
              AllOf(HasSubstr("one_hot"), HasSubstr("int32 or int64")));
  EXPECT_THAT(error_message([] { one_hot(tensor({1}), -2); }),
              AllOf(HasSubstr("one_hot"), HasSubstr("depth"), HasSubstr("-2")));
}

TEST(OpErrors, ConvAndPool) {
  Tensor x = zeros({1, 5, 5, 3});
  EXPECT_THAT(error_message([&] {
                conv2d(x, zeros({3, 3, 2, 4}));
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("channels"), HasSubstr("(1, 5, 5, 3)"),
                    HasSubstr("(3, 3, 2, 4)")));
  EXPECT_THAT(error_message([&] {
                conv2d(x, zeros({3, 3, 3, 4}), {1, 1}, "full");
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("padding"), HasSubstr("\"full\"")));
  EXPECT_THAT(error_message([&] {
                conv2d(x, zeros({6, 6, 3, 1}));
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("valid")));
  EXPECT_THAT(error_message([&] {
                conv2d(zeros({5, 5, 3}), zeros({3, 3, 3, 4}));
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("rank-4"), HasSubstr("(5, 5, 3)")));
  EXPECT_THAT(error_message([&] {
                conv2d(x, zeros({3, 3, 3, 4}), {0, 1});
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("strides"), HasSubstr("[0, 1]")));
  EXPECT_THAT(error_message([&] {
                conv2d(x, zeros({3, 3, 3, 4}), {1, 1}, "same", {1});
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("dilations")));
  EXPECT_THAT(error_message([] {
                max_pool2d(zeros({1, 2, 2, 1}), {3, 3});
              }),
              AllOf(HasSubstr("max_pool2d"), HasSubstr("window of size 3"), HasSubstr("size 2"),
                    HasSubstr("\"valid\"")));
  EXPECT_THAT(error_message([] {
                avg_pool2d(zeros({1, 4, 4, 1}), {2, 2}, {}, "VALID ");
              }),
              AllOf(HasSubstr("avg_pool2d"), HasSubstr("padding")));
  EXPECT_THAT(error_message([] {
                avg_pool2d(zeros({4, 4}), {2, 2});
              }),
              AllOf(HasSubstr("avg_pool2d"), HasSubstr("rank-4")));
}

TEST(OpErrors, UndefinedTensorInput) {
  EXPECT_THAT(error_message([] { add(Tensor(), ones({1})); }),
              AllOf(HasSubstr("add"), HasSubstr("input 0"), HasSubstr("undefined")));
  EXPECT_THAT(error_message([] {
                matmul(ones({1, 1}), Tensor());
              }),
              AllOf(HasSubstr("matmul"), HasSubstr("input 1"), HasSubstr("undefined")));
  EXPECT_THAT(error_message([] { exp(Tensor()); }),
              AllOf(HasSubstr("exp"), HasSubstr("undefined")));
  EXPECT_THAT(error_message([] { Tensor() + 1.0; }), HasSubstr("undefined"));
  EXPECT_THAT(error_message([] {
                concat({ones({1}), Tensor()});
              }),
              AllOf(HasSubstr("concat"), HasSubstr("undefined")));
}

TEST(OpErrors, CreationRandomAndThreads) {
  EXPECT_THAT(error_message([] { dropout(ones({2}), 1.0, 1); }),
              AllOf(HasSubstr("dropout"), HasSubstr("[0, 1)")));
  EXPECT_THAT(error_message([] { dropout(ones({2}), -0.1, 1); }), HasSubstr("dropout"));
  EXPECT_THAT(error_message([] { random_integers({2}, 1, 5, 5); }),
              AllOf(HasSubstr("minval 5"), HasSubstr("maxval 5")));
  EXPECT_THAT(error_message([] { random_uniform({2}, 1, 0, 1, DType::i32); }),
              AllOf(HasSubstr("random_uniform"), HasSubstr("int32")));
  EXPECT_THAT(error_message([] { random_integers({2}, 1, 0, 5, DType::f32); }),
              AllOf(HasSubstr("random_int"), HasSubstr("float32")));
  EXPECT_THAT(error_message([] { set_num_threads(0); }), HasSubstr("0"));
  EXPECT_THAT(error_message([] { zeros({1, 1, 1, 1, 1, 1, 1}); }), HasSubstr("rank 7"));
  EXPECT_THAT(error_message([] { zeros({2, -3}); }), HasSubstr("-3"));
  EXPECT_THAT(error_message([] { div(ones({2}, DType::i64), zeros({1}, DType::i64)); }),
              AllOf(HasSubstr("div"), HasSubstr("division by zero")));
}

}  // namespace
}  // namespace kiln
