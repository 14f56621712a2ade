// The op table is the spine: names are unique, every op has an eager kernel, and the generic
// checks (arity, dtypes, attribute schema) reject bad calls with clear messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/ir/op_table.h"
#include "kiln/runtime/kernels.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

using ::kiln::test::error_of;

TEST(OpTable, NamesAreUniqueAndFindable) {
  std::set<std::string> names;
  ASSERT_EQ(all_ops().size(), size_t(kNumOps));
  for (const OpInfo& op : all_ops()) {
    EXPECT_TRUE(names.insert(op.name).second) << "duplicate op name " << op.name;
    auto found = find_op(op.name);
    ASSERT_TRUE(found.has_value()) << op.name;
    EXPECT_EQ(*found, op.kind);
    EXPECT_EQ(&op_info(op.kind), &op);
  }
  EXPECT_FALSE(find_op("no_such_op").has_value());
}

TEST(OpTable, EveryOpHasAnEagerKernel) {
  for (const OpInfo& op : all_ops()) {
    EXPECT_NO_THROW(runtime::kernel_for(op.kind)) << op.name << " has no kernel";
  }
}

TEST(OpTable, TraitsAreConsistent) {
  for (const OpInfo& op : all_ops()) {
    if (op.has(kCommutative)) {
      EXPECT_EQ(op.arity, 2) << op.name;
    }
    if (op.has(kReduction)) {
      EXPECT_EQ(op.arity, 1) << op.name;
    }
  }
  EXPECT_TRUE(op_info(OpKind::Add).has(kElementwise));
  EXPECT_TRUE(op_info(OpKind::Add).has(kCommutative));
  EXPECT_FALSE(op_info(OpKind::Sub).has(kCommutative));
  EXPECT_TRUE(op_info(OpKind::Sum).has(kReduction));
  EXPECT_TRUE(op_info(OpKind::Exp).has(kTranscendental));
  EXPECT_TRUE(op_info(OpKind::ArgMax).has(kNoGradient));
}

// The fusion and codegen columns keep what the traits promise: a fusion group is lowered as
// one kernel, so every op that joins one as a loop, reduction or output member must be
// generated;
// elementwise ops and reductions fuse; contractions are the groups' library GEMMs; random
// and side-effecting ops never fuse.
TEST(OpTable, FusionAndCodegenColumnsAgreeWithTheTraits) {
  for (const OpInfo& op : all_ops()) {
    SCOPED_TRACE(op.name);
    if (op.fusion == FusionRole::Loop || op.fusion == FusionRole::Reduction ||
        op.fusion == FusionRole::Output) {
      EXPECT_TRUE(op.generated()) << "fuses as " << fusion_role_name(op.fusion);
    }
    if (op.has(kRandom) || op.has(kSideEffecting)) {
      EXPECT_EQ(op.fusion, FusionRole::NoFusion);
      EXPECT_FALSE(op.generated());
      continue;
    }
    if (op.has(kElementwise)) {
      EXPECT_EQ(op.fusion, FusionRole::Loop);
    }
    if (op.has(kReduction)) {
      EXPECT_EQ(op.fusion, FusionRole::Reduction);
    }
    if (op.has(kContraction)) {
      EXPECT_EQ(op.fusion, FusionRole::Contraction);
      EXPECT_FALSE(op.generated());
    }
  }
  EXPECT_EQ(op_info(OpKind::Softmax).fusion, FusionRole::Reduction);
  EXPECT_EQ(op_info(OpKind::Gather).fusion, FusionRole::NoFusion);
  EXPECT_EQ(op_info(OpKind::Concat).fusion, FusionRole::Output);
  EXPECT_EQ(fusion_role_name(FusionRole::Output), "output");
  EXPECT_TRUE(op_info(OpKind::Transpose).generated());
  EXPECT_FALSE(op_info(OpKind::MatMul).generated());
}

TEST(OpTable, ArityIsChecked) {
  TensorType t{DType::f32, Shape{2}};
  std::vector<TensorType> one{t};
  EXPECT_EQ(error_of([&] { infer_type(OpKind::Add, one, {}); }), "add: expected 2 inputs, got 1");
  EXPECT_EQ(error_of([&] {
              infer_type(OpKind::Concat, {}, Attrs{{"axis", int64_t(0)}});
            }),
            "concat: expected at least one input, got none");
}

TEST(OpTable, InputDtypesAreChecked) {
  std::vector<TensorType> ints{{DType::i32, Shape{3}}};
  EXPECT_THAT(error_of([&] { infer_type(OpKind::Exp, ints, {}); }),
              HasSubstr("exp: input 0 has dtype int32, but exp needs a floating dtype"));
  std::vector<TensorType> bools{{DType::b8, Shape{3}}, {DType::b8, Shape{3}}};
  EXPECT_THAT(error_of([&] { infer_type(OpKind::Add, bools, {}); }),
              HasSubstr("needs a numeric dtype (not bool)"));
}

TEST(OpTable, AttributesAreCheckedAgainstTheSchema) {
  std::vector<TensorType> x{{DType::f32, Shape{2, 3}}};
  EXPECT_EQ(error_of([&] {
              infer_type(OpKind::Sum, x, Attrs{{"axes", std::vector<int64_t>{0}}});
            }),
            "sum: missing attribute \"keepdims\"");
  EXPECT_EQ(error_of([&] {
              infer_type(OpKind::Sum, x, Attrs{{"axes", int64_t(0)}, {"keepdims", false}});
            }),
            "sum: attribute \"axes\" must be of type int list, got int (0)");
  EXPECT_EQ(error_of([&] {
              infer_type(OpKind::Softmax, x, Attrs{{"axis", int64_t(-1)}, {"axes", int64_t(1)}});
            }),
            "softmax: unknown attribute \"axes\" (expected: axis)");
  // An int is accepted where a float is expected.
  EXPECT_NO_THROW(infer_type(OpKind::LeakyRelu, x, Attrs{{"alpha", int64_t(0)}}));
}

TEST(OpTable, ShapeRulesGiveOutputTypes) {
  std::vector<TensorType> ab{{DType::f32, Shape{64, 784}}, {DType::f32, Shape{784, 256}}};
  Attrs mm{{"transpose_a", false}, {"transpose_b", false}};
  EXPECT_EQ(infer_type(OpKind::MatMul, ab, mm).to_string(), "f32[64,256]");
  std::vector<TensorType> cmp{{DType::f64, Shape{3, 1}}, {DType::f64, Shape{4}}};
  EXPECT_EQ(infer_type(OpKind::Less, cmp, {}).to_string(), "bool[3,4]");
  std::vector<TensorType> img{{DType::f32, Shape{8, 28, 28, 3}}, {DType::f32, Shape{3, 3, 3, 16}}};
  Attrs conv{{"strides", std::vector<int64_t>{2, 2}},
             {"dilations", std::vector<int64_t>{1, 1}},
             {"padding", std::string("same")}};
  EXPECT_EQ(infer_type(OpKind::Conv2D, img, conv).to_string(), "f32[8,14,14,16]");
}

TEST(Shape, BasicsAndErrors) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.to_string(), "(2, 3, 4)");
  EXPECT_EQ(Shape{5}.to_string(), "(5,)");
  EXPECT_EQ(Shape{}.to_string(), "()");
  EXPECT_EQ(Shape{}.num_elements(), 1);
  EXPECT_EQ(Shape({0, 3}).num_elements(), 0);
  EXPECT_EQ(s.dim(-1), 4);
  EXPECT_THAT(error_of([] { Shape({1, 2, 3, 4, 5, 6, 7}); }), HasSubstr("rank 7 is not supported"));
  EXPECT_THAT(error_of([] { Shape({2, -3}); }), HasSubstr("invalid dimension -3"));
  EXPECT_EQ(broadcast_shapes(Shape{3, 1}, Shape{4}, "add").to_string(), "(3, 4)");
  EXPECT_EQ(error_of([] {
              broadcast_shapes(Shape{2, 3}, Shape{4, 3}, "add");
            }),
            "add: shapes (2, 3) and (4, 3) do not broadcast: dimension 2 (from the right) is 2 "
            "in one and 4 in the other; they must be equal or 1");
}

TEST(DType, NamesRoundTrip) {
  for (DType t : kAllDTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
    EXPECT_EQ(parse_dtype(dtype_short_name(t)), t);
  }
  EXPECT_THAT(error_of([] { parse_dtype("float16"); }), HasSubstr("unknown dtype \"float16\""));
}

}  // namespace
}  // namespace kiln
