// The defaults of ir/ops.def ("axes:ints=[]") are the C++ op API's (frontend/ops.h,
// creation.h): each C++ function with defaulted arguments is called with them left out, inside
// a trace, and the attributes its op node records must equal the table's defaults. Python's
// numpy-style API (kiln.sum, kiln.softmax, ...) reads its defaults from the table, so the two
// APIs cannot drift apart. Every default in the table is covered by one of these calls, and each
// is written in the IR's text form of its kind.
// Most C++ functions are generated from the table (frontend/ops_generated.h, tools/op_api.cc) and
// take its defaults by construction; the calls check those too, and the hand-written ones of
// ops.h (conv2d, the pools, concat, ...), whose defaults only this test ties to the table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "kiln/kiln.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// The attributes of the first `kind` node that tracing `f` on `args` records.
template <typename F, typename... T>
Attrs recorded(OpKind kind, F f, const T&... args) {
  ConcreteFunction cf = function(f).concrete(args...);
  for (const auto& node : cf.graph().nodes())
    if (node->is_op(kind)) return node->attrs();
  ADD_FAILURE() << "no " << op_name(kind) << " node was recorded";
  return {};
}

// The (op, attribute) pairs whose default a test below compared.
std::set<std::pair<OpKind, std::string>>& covered() {
  static std::set<std::pair<OpKind, std::string>> s;
  return s;
}

// Every attribute with a table default must be recorded with it; attributes without one are
// listed in `computed` when the C++ default depends on the arguments (checked by the caller).
void expect_table_defaults(OpKind kind, const Attrs& got,
                           const std::set<std::string>& computed = {}) {
  const OpInfo& op = op_info(kind);
  bool any = false;
  for (const AttrSpec& spec : op.attrs) {
    if (!spec.default_value) continue;
    any = true;
    const AttrValue* v = got.find(spec.name);
    ASSERT_NE(v, nullptr) << op.name << " recorded no \"" << spec.name << "\"";
    EXPECT_EQ(attr_value_to_string(*v), attr_value_to_string(*spec.default_value))
        << op.name << "." << spec.name << ": the C++ default differs from ir/ops.def's";
    covered().insert({kind, spec.name});
  }
  for (const std::string& name : computed) {
    bool found = false;
    for (const AttrSpec& spec : op.attrs) found = found || spec.name == name;
    EXPECT_TRUE(found) << op.name << " has no attribute " << name;
  }
  EXPECT_TRUE(any || !computed.empty()) << op.name << " has no defaults in ir/ops.def";
}

Tensor f32(const Shape& shape) { return zeros(shape, DType::f32); }

void elementwise_and_normalisations() {
  Tensor x = f32({2, 3});
  expect_table_defaults(OpKind::LeakyRelu,
                        recorded(
                            OpKind::LeakyRelu, [](const Tensor& a) { return leaky_relu(a); }, x));
  expect_table_defaults(OpKind::Gelu,
                        recorded(
                            OpKind::Gelu, [](const Tensor& a) { return gelu(a); }, x));
  expect_table_defaults(OpKind::Softmax,
                        recorded(
                            OpKind::Softmax, [](const Tensor& a) { return softmax(a); }, x));
  expect_table_defaults(OpKind::LogSoftmax,
                        recorded(
                            OpKind::LogSoftmax, [](const Tensor& a) { return log_softmax(a); }, x));
}

void reductions() {
  Tensor x = f32({2, 3});
  using Fn = Tensor (*)(const Tensor&, const Axes&, bool);
  const std::pair<OpKind, Fn> reductions[] = {
      {OpKind::Sum, &sum}, {OpKind::Mean, &mean}, {OpKind::Max, &max},
      {OpKind::Min, &min}, {OpKind::Prod, &prod}, {OpKind::LogSumExp, &logsumexp},
  };
  for (const auto& [kind, fn] : reductions)
    expect_table_defaults(kind, recorded(
                                    kind, [fn](const Tensor& a) { return fn(a, {}, false); }, x));
  // The same through the defaulted call itself (the pointer above fixes the arguments).
  expect_table_defaults(OpKind::Sum, recorded(
                                         OpKind::Sum, [](const Tensor& a) { return sum(a); }, x));
  expect_table_defaults(OpKind::Mean,
                        recorded(
                            OpKind::Mean, [](const Tensor& a) { return mean(a); }, x));
  expect_table_defaults(OpKind::Max, recorded(
                                         OpKind::Max, [](const Tensor& a) { return max(a); }, x));
  expect_table_defaults(OpKind::Min, recorded(
                                         OpKind::Min, [](const Tensor& a) { return min(a); }, x));
  expect_table_defaults(OpKind::Prod,
                        recorded(
                            OpKind::Prod, [](const Tensor& a) { return prod(a); }, x));
  expect_table_defaults(OpKind::LogSumExp,
                        recorded(
                            OpKind::LogSumExp, [](const Tensor& a) { return logsumexp(a); }, x));
  expect_table_defaults(OpKind::ArgMax,
                        recorded(
                            OpKind::ArgMax, [](const Tensor& a) { return argmax(a); }, x));
  expect_table_defaults(OpKind::ArgMin,
                        recorded(
                            OpKind::ArgMin, [](const Tensor& a) { return argmin(a); }, x));
}

void contractions_and_pooling() {
  Tensor a = f32({2, 3}), b = f32({3, 4});
  expect_table_defaults(
      OpKind::MatMul,
      recorded(
          OpKind::MatMul, [](const Tensor& p, const Tensor& q) { return matmul(p, q); }, a, b));
  Tensor image = f32({1, 4, 4, 2}), filter = f32({3, 3, 2, 5});
  expect_table_defaults(
      OpKind::Conv2D,
      recorded(
          OpKind::Conv2D, [](const Tensor& p, const Tensor& q) { return conv2d(p, q); }, image,
          filter));
  // A pool's strides default to its pool size (Keras): computed, so not in the table.
  for (OpKind kind : {OpKind::MaxPool2D, OpKind::AvgPool2D}) {
    Attrs got = recorded(
        kind,
        [kind](const Tensor& p) {
          return kind == OpKind::MaxPool2D ? max_pool2d(p, {2, 2}) : avg_pool2d(p, {2, 2});
        },
        image);
    expect_table_defaults(kind, got, {"strides"});
    EXPECT_FALSE(op_info(kind).attrs[1].default_value.has_value());
    EXPECT_EQ(got.get_ints("strides", "test"), (Axes{2, 2}));
  }
  // attention's scale defaults to 1 / sqrt(d): computed from q.
  Tensor q = f32({2, 3, 4});
  Attrs got = recorded(
      OpKind::Attention,
      [](const Tensor& p, const Tensor& k, const Tensor& v) { return attention(p, k, v); }, q, q,
      q);
  expect_table_defaults(OpKind::Attention, got, {"scale"});
  EXPECT_EQ(got.get_double("scale", "test"), 1.0 / std::sqrt(4.0));
}

void layout_and_indexing() {
  Tensor x = f32({2, 3});
  expect_table_defaults(OpKind::Concat, recorded(
                                            OpKind::Concat,
                                            [](const Tensor& p, const Tensor& q) {
                                              return concat({p, q});
                                            },
                                            x, x));
  Tensor idx = zeros({2}, DType::i32);
  expect_table_defaults(
      OpKind::Gather,
      recorded(
          OpKind::Gather, [](const Tensor& p, const Tensor& i) { return gather(p, i); }, x, idx));
  expect_table_defaults(OpKind::OneHot,
                        recorded(
                            OpKind::OneHot, [](const Tensor& i) { return one_hot(i, 3); }, idx));
  // Defaults computed from the arguments: transpose reverses the axes, slice steps by 1, pad
  // puts nothing between elements.
  Tensor x3 = f32({2, 3, 4});
  Attrs t = recorded(
      OpKind::Transpose, [](const Tensor& p) { return transpose(p); }, x3);
  expect_table_defaults(OpKind::Transpose, t, {"perm"});
  EXPECT_EQ(t.get_ints("perm", "test"), (Axes{2, 1, 0}));
  Attrs s = recorded(
      OpKind::Slice,
      [](const Tensor& p) {
        return slice(p, {0, 1}, {1, 3});
      },
      x);
  expect_table_defaults(OpKind::Slice, s, {"step"});
  EXPECT_EQ(s.get_ints("step", "test"), (Axes{1, 1}));
  Attrs p = recorded(
      OpKind::Pad,
      [](const Tensor& a) {
        return pad(a, {1, 0}, {0, 2});
      },
      x);
  expect_table_defaults(OpKind::Pad, p, {"interior"});
  EXPECT_EQ(p.get_ints("interior", "test"), (Axes{0, 0}));
}

void random_ops() {
  Tensor x = f32({2});
  expect_table_defaults(
      OpKind::RandomUniform,
      recorded(
          OpKind::RandomUniform, [](const Tensor& a) { return a + random_uniform({2}, 7); }, x));
  expect_table_defaults(
      OpKind::RandomNormal,
      recorded(
          OpKind::RandomNormal, [](const Tensor& a) { return a + random_normal({2}, 7); }, x));
  expect_table_defaults(
      OpKind::RandomInt,
      recorded(
          OpKind::RandomInt,
          [](const Tensor& a) { return a + cast(random_integers({2}, 7, 0, 5), DType::f32); }, x));
}

TEST(OpDefaults, ElementwiseAndNormalisations) { elementwise_and_normalisations(); }
TEST(OpDefaults, Reductions) { reductions(); }
TEST(OpDefaults, ContractionsAndPooling) { contractions_and_pooling(); }
TEST(OpDefaults, LayoutAndIndexing) { layout_and_indexing(); }
TEST(OpDefaults, RandomOps) { random_ops(); }

// The schema strings of ir/ops.def, to check how each default is written.
struct Row {
  const char* name;
  const char* schema;
};
constexpr Row kRows[] = {
#define KILN_OP(e, name, arity, traits, dtypes, bf16, fusion, codegen, rounding, attrs, rule) \
  {name, attrs},
#include "kiln/ir/ops.def"
#undef KILN_OP
};

TEST(OpDefaults, EveryDefaultIsTheCppDefaultAndWrittenInItsKind) {
  covered().clear();
  elementwise_and_normalisations();
  reductions();
  contractions_and_pooling();
  layout_and_indexing();
  random_ops();
  int defaults = 0;
  for (const Row& row : kRows) {
    const OpInfo& op = op_info(*find_op(row.name));
    for (const AttrSpec& spec : op.attrs) {
      if (!spec.default_value) continue;
      ++defaults;
      EXPECT_EQ(attr_kind_of(*spec.default_value), spec.kind) << row.name << "." << spec.name;
      // Written as the IR writes a value of its kind: the schema holds "name:kind=<text>".
      EXPECT_THAT(std::string(row.schema),
                  HasSubstr(spec.name + ":" + std::string(schema_kind_word(spec.kind)) + "=" +
                            attr_value_to_string(*spec.default_value)))
          << row.name << "." << spec.name << " is not written in the IR text form of its kind";
      EXPECT_TRUE(covered().count({op.kind, spec.name}))
          << row.name << "." << spec.name
          << " has a default in ir/ops.def that no call here compares with the C++ API's";
    }
  }
  EXPECT_GT(defaults, 20);
}

TEST(OpDefaults, TheIrStillRequiresEveryAttribute) {
  TensorType x{DType::f32, Shape{2, 3}};
  EXPECT_THAT(test::error_of([&] {
                infer_type(OpKind::Sum, {&x, 1}, Attrs{});
              }),
              HasSubstr("missing attribute \"axes\""));
  EXPECT_THAT(test::error_of([&] {
                infer_type(OpKind::Softmax, {&x, 1}, Attrs{});
              }),
              HasSubstr("missing attribute \"axis\""));
}

TEST(OpDefaults, TraitNames) {
  EXPECT_THAT(trait_names(op_info(OpKind::Add).traits),
              ::testing::ElementsAre("elementwise", "commutative"));
  EXPECT_THAT(trait_names(op_info(OpKind::MaxPool2DGrad).traits),
              ::testing::ElementsAre("window", "internal"));
  EXPECT_THAT(trait_names(op_info(OpKind::Slice).traits),
              ::testing::ElementsAre("layout", "selects"));
  EXPECT_THAT(trait_names(op_info(OpKind::Gather).traits), ::testing::ElementsAre("selects"));
  EXPECT_TRUE(op_info(OpKind::ElementCount).has(kInternal));
  EXPECT_FALSE(op_info(OpKind::Sum).has(kInternal));
}

}  // namespace
}  // namespace kiln
