// The IR text printer and parser: print(parse(print(g))) == print(g) for graphs using every op,
// constants of every dtype, variables, assignments and nested control flow; the canonical
// form of hand-written text; and golden files printed back byte for byte.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/parser.h"
#include "kiln/ir/printer.h"
#include "kiln/ir/value_numbering.h"
#include "tests/support/error_of.h"

namespace kiln::ir {
namespace {

using ::kiln::test::error_of;
using ::testing::HasSubstr;
using Ints = std::vector<int64_t>;

TensorType T(DType dtype, std::initializer_list<int64_t> dims) { return {dtype, Shape(dims)}; }
constexpr int64_t U = kUnknownDim;
constexpr DType f32 = DType::f32, f64 = DType::f64, i32 = DType::i32, i64 = DType::i64,
                b8 = DType::b8, u8 = DType::u8;

// Valid inputs and attributes for every op of ir/ops.def. Adding an op to the table makes
// PrinterParser.RoundTripsEveryOp fail until the op has a row here.
struct OpCase {
  std::vector<TensorType> inputs;
  Attrs attrs;
};

const std::map<std::string, OpCase>& op_cases() {
  static const auto* cases = new std::map<std::string, OpCase>{
      {"add", {{T(f32, {U, 3}), T(f32, {3})}, {}}},
      {"sub", {{T(i32, {2, 3}), T(i32, {2, 1})}, {}}},
      {"mul", {{T(f64, {4}), T(f64, {})}, {}}},
      {"div", {{T(f32, {2}), T(f32, {2})}, {}}},
      {"pow", {{T(f32, {2, 3}), T(f32, {2, 3})}, {}}},
      {"maximum", {{T(i64, {3}), T(i64, {3})}, {}}},
      {"minimum", {{T(u8, {3}), T(u8, {3})}, {}}},
      {"equal", {{T(b8, {3}), T(b8, {3})}, {}}},
      {"not_equal", {{T(i32, {U}), T(i32, {U})}, {}}},
      {"less", {{T(f32, {2}), T(f32, {2})}, {}}},
      {"less_equal", {{T(f32, {2}), T(f32, {1})}, {}}},
      {"greater", {{T(f64, {2}), T(f64, {2})}, {}}},
      {"greater_equal", {{T(i64, {2}), T(i64, {2})}, {}}},
      {"logical_and", {{T(b8, {3}), T(b8, {3})}, {}}},
      {"logical_or", {{T(b8, {3}), T(b8, {})}, {}}},
      {"neg", {{T(f32, {U, 4})}, {}}},
      {"abs", {{T(i32, {3})}, {}}},
      {"sign", {{T(f32, {3})}, {}}},
      {"square", {{T(f64, {3})}, {}}},
      {"sqrt", {{T(f32, {3})}, {}}},
      {"rsqrt", {{T(f32, {3})}, {}}},
      {"exp", {{T(f64, {3})}, {}}},
      {"log", {{T(f32, {3})}, {}}},
      {"log1p", {{T(f32, {3})}, {}}},
      {"tanh", {{T(f32, {3})}, {}}},
      {"sigmoid", {{T(f32, {3})}, {}}},
      {"relu", {{T(i64, {3})}, {}}},
      {"leaky_relu", {{T(f32, {3})}, {{"alpha", 0.2}}}},
      {"gelu", {{T(f32, {3})}, {{"approximate", true}}}},
      {"erf", {{T(f32, {3})}, {}}},
      {"softplus", {{T(f32, {3})}, {}}},
      {"logical_not", {{T(b8, {2})}, {}}},
      {"cast", {{T(i32, {3})}, {{"dtype", f32}}}},
      {"select", {{T(b8, {3}), T(f32, {3}), T(f32, {3})}, {}}},
      {"sum", {{T(f32, {2, 3})}, {{"axes", Ints{}}, {"keepdims", false}}}},
      {"mean", {{T(f32, {2, 3})}, {{"axes", Ints{1}}, {"keepdims", true}}}},
      {"max", {{T(i32, {2, 3})}, {{"axes", Ints{0, 1}}, {"keepdims", false}}}},
      {"min", {{T(f32, {2, 3})}, {{"axes", Ints{-1}}, {"keepdims", false}}}},
      {"prod", {{T(f64, {2, 3})}, {{"axes", Ints{0}}, {"keepdims", false}}}},
      {"logsumexp", {{T(f32, {U, 3})}, {{"axes", Ints{1}}, {"keepdims", false}}}},
      {"argmax", {{T(f32, {2, 3})}, {{"axis", int64_t(-1)}, {"keepdims", false}}}},
      {"argmin", {{T(i32, {2, 3})}, {{"axis", int64_t(0)}, {"keepdims", true}}}},
      {"softmax", {{T(f32, {2, 3})}, {{"axis", int64_t(-1)}}}},
      {"log_softmax", {{T(f64, {2, 3})}, {{"axis", int64_t(1)}}}},
      {"matmul",
       {{T(f32, {U, 4}), T(f32, {4, 5})}, {{"transpose_a", false}, {"transpose_b", false}}}},
      {"conv2d",
       {{T(f32, {1, 5, 5, 2}), T(f32, {3, 3, 2, 4})},
        {{"strides", Ints{1, 1}}, {"dilations", Ints{1, 1}}, {"padding", std::string("same")}}}},
      {"conv2d_backprop_input",
       {{T(f32, {3, 3, 2, 4}), T(f32, {1, 5, 5, 4})},
        {{"input_shape", Ints{1, 5, 5, 2}},
         {"strides", Ints{1, 1}},
         {"dilations", Ints{1, 1}},
         {"padding", std::string("same")}}}},
      {"conv2d_backprop_filter",
       {{T(f32, {1, 5, 5, 2}), T(f32, {1, 3, 3, 4})},
        {{"filter_shape", Ints{3, 3, 2, 4}},
         {"strides", Ints{1, 1}},
         {"dilations", Ints{1, 1}},
         {"padding", std::string("valid")}}}},
      {"max_pool2d",
       {{T(f32, {1, 4, 4, 2})},
        {{"pool_size", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"padding", std::string("valid")}}}},
      {"avg_pool2d",
       {{T(f64, {1, 4, 4, 2})},
        {{"pool_size", Ints{2, 2}}, {"strides", Ints{1, 1}}, {"padding", std::string("same")}}}},
      {"max_pool2d_grad",
       {{T(f32, {1, 4, 4, 2}), T(f32, {1, 2, 2, 2})},
        {{"pool_size", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"padding", std::string("valid")}}}},
      {"avg_pool2d_grad",
       {{T(f32, {1, 2, 2, 2})},
        {{"input_shape", Ints{1, 4, 4, 2}},
         {"pool_size", Ints{2, 2}},
         {"strides", Ints{2, 2}},
         {"padding", std::string("valid")}}}},
      {"reshape", {{T(f32, {U, 6})}, {{"shape", Ints{-1, 2, 3}}}}},
      {"transpose", {{T(f32, {2, 3})}, {{"perm", Ints{1, 0}}}}},
      {"broadcast_to", {{T(f32, {3})}, {{"shape", Ints{2, 3}}}}},
      {"copy", {{T(f32, {U, 3})}, {}}},
      {"broadcast_like", {{T(f32, {1, 3}), T(i32, {U, 3})}, {}}},
      {"element_count", {{T(f32, {U, 3})}, {{"axes", Ints{0}}, {"dtype", i64}}}},
      {"concat", {{T(f32, {2, 3}), T(f32, {2, 1}), T(f32, {2, 2})}, {{"axis", int64_t(1)}}}},
      {"slice",
       {{T(f32, {4, 6})}, {{"start", Ints{0, 1}}, {"stop", Ints{4, 5}}, {"step", Ints{2, 1}}}}},
      {"pad",
       {{T(i32, {2, 3})}, {{"low", Ints{1, 0}}, {"high", Ints{0, 2}}, {"interior", Ints{0, 1}}}}},
      {"gather", {{T(f32, {5, 3}), T(i32, {4})}, {{"axis", int64_t(0)}}}},
      {"scatter_add",
       {{T(f32, {4, 3}), T(i64, {4})}, {{"axis", int64_t(0)}, {"dim_size", int64_t(10)}}}},
      {"one_hot", {{T(i64, {4})}, {{"depth", int64_t(3)}, {"dtype", f32}}}},
      {"random_uniform",
       {{T(i64, {})},
        {{"shape", Ints{2, 3}}, {"dtype", f32}, {"minval", -1.5}, {"maxval", 1e-07}}}},
      {"random_normal",
       {{T(i64, {})}, {{"shape", Ints{2}}, {"dtype", f64}, {"mean", 0.0}, {"stddev", 1e20}}}},
      {"random_int",
       {{T(i64, {})},
        {{"shape", Ints{4}}, {"dtype", i32}, {"minval", int64_t(-5)}, {"maxval", int64_t(10)}}}},
      {"attention",
       {{T(f32, {U, 4, 3}), T(f32, {U, 5, 3}), T(f32, {U, 5, 2}), T(b8, {1, 5})},
        {{"scale", 0.5}, {"causal", true}}}},
      {"attention_grad",
       {{T(f64, {2, 4, 3}), T(f64, {2, 5, 3}), T(f64, {2, 5, 6}), T(f64, {2, 4, 6})},
        {{"scale", 0.25}, {"causal", false}}}},
      {"all_reduce", {{T(f32, {U, 3})}, {}}},
      // With a shape source (input 1): the shape attribute may have unknown dimensions.
      {"random_uniform",
       {{T(i64, {}), T(f32, {-1, 3})},
        {{"shape", Ints{-1, 3}}, {"dtype", f32}, {"minval", 0.0}, {"maxval", 1.0}}}},
  };
  return *cases;
}

// ---- structural comparison of two graphs (value references compared by canonical number)

void expect_same_graph(const Graph& a, const Graph& b, const std::string& where);

void expect_same_node(const Node& a, const Node& b, const ValueNumbering& na,
                      const ValueNumbering& nb, const std::string& where) {
  ASSERT_EQ(a.kind(), b.kind()) << where;
  EXPECT_EQ(a.op_name(), b.op_name()) << where;
  if (a.kind() == NodeKind::kOp) {
    EXPECT_EQ(a.op(), b.op()) << where;
  }
  EXPECT_TRUE(a.attrs() == b.attrs()) << where;
  EXPECT_EQ(a.name(), b.name()) << where;
  EXPECT_EQ(a.location(), b.location()) << where;
  EXPECT_EQ(a.variable(), b.variable()) << where;
  ASSERT_EQ(a.literal() == nullptr, b.literal() == nullptr) << where;
  if (a.literal()) {
    EXPECT_TRUE(a.literal()->equals(*b.literal())) << where;
  }
  ASSERT_EQ(a.inputs().size(), b.inputs().size()) << where;
  for (size_t i = 0; i < a.inputs().size(); ++i)
    EXPECT_EQ(na.number(a.input(i)), nb.number(b.input(i))) << where << " input " << i;
  ASSERT_EQ(a.num_outputs(), b.num_outputs()) << where;
  for (size_t i = 0; i < a.num_outputs(); ++i)
    EXPECT_EQ(a.output(i)->type(), b.output(i)->type()) << where << " output " << i;
  ASSERT_EQ(a.subgraphs().size(), b.subgraphs().size()) << where;
  for (size_t i = 0; i < a.subgraphs().size(); ++i)
    expect_same_graph(a.subgraph(i), b.subgraph(i), where + "/sub" + std::to_string(i));
}

void expect_same_graph(const Graph& a, const Graph& b, const std::string& where) {
  ValueNumbering na(a), nb(b);
  EXPECT_EQ(a.parameter_types(), b.parameter_types()) << where;
  ASSERT_EQ(a.variables().size(), b.variables().size()) << where;
  for (size_t i = 0; i < a.variables().size(); ++i) {
    const GraphVariable &va = a.variable(i), &vb = b.variable(i);
    EXPECT_EQ(va.name, vb.name) << where;
    EXPECT_EQ(va.type, vb.type) << where;
    EXPECT_EQ(va.trainable, vb.trainable) << where << " $" << i;
    EXPECT_EQ(va.read, vb.read) << where << " $" << i;
    EXPECT_EQ(va.written, vb.written) << where << " $" << i;
    EXPECT_EQ(na.number(va.entry), nb.number(vb.entry)) << where;
  }
  ASSERT_EQ(a.nodes().size(), b.nodes().size()) << where;
  for (size_t i = 0; i < a.nodes().size(); ++i)
    expect_same_node(*a.nodes()[i], *b.nodes()[i], na, nb, where + " node " + std::to_string(i));
  ASSERT_EQ(a.outputs().size(), b.outputs().size()) << where;
  for (size_t i = 0; i < a.outputs().size(); ++i)
    EXPECT_EQ(na.number(a.outputs()[i]), nb.number(b.outputs()[i])) << where << " output " << i;
}

// Prints g, parses it back, and checks the structure and that printing is a fixed point.
void expect_round_trip(const Graph& g) {
  std::string text = print_graph(g);
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parse_graph(text, "round_trip.kir");
  } catch (const Error& e) {
    FAIL() << e.what() << "\n" << text;
  }
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_EQ(parsed->name(), g.name());
  expect_same_graph(g, *parsed, "graph");
}

template <typename C>
Node* constant(Graph& g, TensorType t, std::initializer_list<C> values) {
  return g.add_constant(Literal::copy_of(std::move(t), values.begin()));
}

TEST(PrinterParser, RoundTripsEveryOp) {
  Graph g("every_op");
  std::vector<Value*> outputs;
  for (const OpInfo& op : all_ops()) {
    auto it = op_cases().find(op.name);
    if (it == op_cases().end()) {
      ADD_FAILURE() << "op \"" << op.name << "\" has no row in op_cases(); add valid inputs";
      continue;
    }
    std::vector<Value*> inputs;
    for (const TensorType& t : it->second.inputs) inputs.push_back(g.add_parameter(t));
    Node* n = g.add_op(op.kind, inputs, it->second.attrs);
    n->set_name(std::string("layer/") + op.name);
    outputs.push_back(n->output());
  }
  for (const auto& [name, c] : op_cases())
    EXPECT_TRUE(find_op(name).has_value()) << "op_cases() row for unknown op " << name;
  g.set_outputs(outputs);
  expect_round_trip(g);
}

TEST(PrinterParser, RoundTripsConstantsOfEveryDType) {
  Graph g("constants");
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  const double dmax = std::numeric_limits<double>::max();
  std::vector<Value*> out;
  auto add = [&](Node* n) { out.push_back(n->output()); };
  add(constant<float>(g, T(f32, {}), {0.5f}));
  add(constant<float>(g, T(f32, {2, 2}), {0.1f, -0.0f, fnan, -finf}));
  add(constant<float>(g, T(f32, {4}), {finf, 1e-45f, 3.4028235e38f, 123456792.0f}));
  add(constant<float>(g, T(f32, {3}), {-0.0f, -0.0f, -0.0f}));
  add(constant<float>(g, T(f32, {0, 3}), {}));
  add(constant<double>(g, T(f64, {3}), {0.1, dmax, 5e-324}));
  add(constant<double>(g, T(f64, {1, 1}), {std::nan("")}));
  add(constant<double>(g, T(f64, {2}), {1.0, 0.0}));
  add(constant<int32_t>(g, T(i32, {3}), {INT32_MIN, 0, INT32_MAX}));
  add(constant<int32_t>(g, T(i32, {2, 2}), {7, 7, 7, 7}));
  add(constant<int64_t>(g, T(i64, {2}), {INT64_MIN, INT64_MAX}));
  add(constant<int64_t>(g, T(i64, {}), {-1}));
  add(constant<uint8_t>(g, T(u8, {3}), {0, 128, 255}));
  add(constant<bool>(g, T(b8, {3}), {true, false, true}));
  add(constant<bool>(g, T(b8, {}), {false}));
  add(constant<bool>(g, T(b8, {0}), {}));
  g.set_outputs(out);
  expect_round_trip(g);
  std::string text = print_graph(g);
  EXPECT_THAT(text, HasSubstr("%0 = constant dense<0.5> : f32[]\n"));
  EXPECT_THAT(text, HasSubstr("dense<[0.1, -0.0, nan, -inf]> : f32[2,2]"));
  EXPECT_THAT(text, HasSubstr("dense<[inf, 1e-45, 3.4028235e+38, 123456792.0]> : f32[4]"));
  EXPECT_THAT(text, HasSubstr("dense<-0.0> : f32[3]"));
  EXPECT_THAT(text, HasSubstr("dense<[]> : f32[0,3]"));
  EXPECT_THAT(text, HasSubstr("dense<[0.1, 1.7976931348623157e+308, 5e-324]> : f64[3]"));
  EXPECT_THAT(text, HasSubstr("dense<nan> : f64[1,1]"));
  EXPECT_THAT(text, HasSubstr("dense<[-2147483648, 0, 2147483647]> : i32[3]"));
  EXPECT_THAT(text, HasSubstr("dense<7> : i32[2,2]"));
  EXPECT_THAT(text, HasSubstr("dense<[-9223372036854775808, 9223372036854775807]> : i64[2]"));
  EXPECT_THAT(text, HasSubstr("dense<[0, 128, 255]> : u8[3]"));
  EXPECT_THAT(text, HasSubstr("dense<[true, false, true]> : bool[3]"));
}

TEST(PrinterParser, RoundTripsVariablesAssignmentsAndMetadata) {
  Graph g("train step/v2");  // not an identifier: printed as @"train step/v2"
  Value* x = g.add_parameter(T(f32, {U, 3}));
  for (int flags = 0; flags < 8; ++flags) {
    int v = g.add_variable(fmt::format("var{}/\"q\"\\", flags), T(f32, {3}), flags & 1);
    g.variable(size_t(v)).read = (flags & 2) != 0;
    g.variable(size_t(v)).written = (flags & 4) != 0;
  }
  Node* s = g.add_op(OpKind::Sum, {x}, {{"axes", Ints{0}}, {"keepdims", false}});
  s->set_name("loss/sum");
  s->set_location({"examples/a \"b\".cc", 12, 5});
  Node* a1 = g.add_assignment(NodeKind::kAssign, 0, s->output());
  a1->set_location({"x.cc", 1, 1});
  Node* a2 = g.add_assignment(NodeKind::kAssignAdd, 3, a1->output());
  a2->set_name("tab\there");
  Node* a3 = g.add_assignment(NodeKind::kAssignSub, 7, a2->output());
  // The flags come from the text, not from what the assignments imply.
  for (size_t i = 0; i < 8; ++i) {
    g.variable(i).read = (i & 2) != 0;
    g.variable(i).written = (i & 4) != 0;
  }
  g.set_outputs({a3->output(), s->output()});
  expect_round_trip(g);
  std::string text = print_graph(g);
  EXPECT_THAT(text, HasSubstr("graph @\"train step/v2\"(%0: f32[?,3]) -> (f32[3], f32[3]) {\n"
                              "  variables {\n"
                              "    $0 = \"var0/\\\"q\\\"\\\\\" : f32[3] -> %1\n"
                              "    $1 = \"var1/\\\"q\\\"\\\\\" : f32[3] trainable -> %2\n"));
  EXPECT_THAT(text, HasSubstr("$7 = \"var7/\\\"q\\\"\\\\\" : f32[3] trainable read write -> %8\n"));
  EXPECT_THAT(text, HasSubstr("%9 = sum(%0) {axes=[0], keepdims=false} : f32[3] name(\"loss/sum\") "
                              "loc(\"examples/a \\\"b\\\".cc\":12:5)\n"));
  EXPECT_THAT(text, HasSubstr("%10 = assign $0, %9 : f32[3] loc(\"x.cc\":1:1)\n"));
  EXPECT_THAT(text, HasSubstr("%11 = assign_add $3, %10 : f32[3] name(\"tab\\there\")\n"));
  EXPECT_THAT(text, HasSubstr("%12 = assign_sub $7, %11 : f32[3]\n  return %12, %9\n}\n"));
}

// (x: f32[3], s: f32[]) -> (-x or x * s, s).
std::unique_ptr<Graph> make_branch(const std::string& name, bool negate) {
  auto g = std::make_unique<Graph>(name);
  Value* x = g->add_parameter(T(f32, {3}));
  Value* s = g->add_parameter(T(f32, {}));
  Value* y =
      negate ? g->add_op(OpKind::Neg, {x})->output() : g->add_op(OpKind::Mul, {x, s})->output();
  g->set_outputs({y, s});
  return g;
}

std::unique_ptr<Graph> make_while_cond() {
  auto cond = std::make_unique<Graph>("cond");
  Value* i = cond->add_parameter(T(i64, {}));
  cond->add_parameter(T(f32, {3}));
  Value* n = cond->add_parameter(T(i64, {}));
  cond->set_outputs({cond->add_op(OpKind::Less, {i, n})->output()});
  return cond;
}

// while (i < n) { i += 1; if nested: x = cond(i > 1, x, 0.5) whose else branch runs a loop }.
// Loop variables i, x; invariant n.
Node* add_while(Graph& g, Value* i0, Value* x0, Value* n, bool nested) {
  auto body = std::make_unique<Graph>("body");
  Value* i = body->add_parameter(T(i64, {}));
  Value* x = body->add_parameter(T(f32, {3}));
  body->add_parameter(T(i64, {}));
  Value* one = constant<int64_t>(*body, T(i64, {}), {1})->output();
  Value* next = body->add_op(OpKind::Add, {i, one})->output();
  Value* y = x;
  if (nested) {
    Value* half = constant<float>(*body, T(f32, {}), {0.5f})->output();
    Value* p = body->add_op(OpKind::Greater, {i, one})->output();
    std::vector<std::unique_ptr<Graph>> branches;
    branches.push_back(make_branch("then", true));
    auto other = std::make_unique<Graph>("else");
    Value* bx = other->add_parameter(T(f32, {3}));
    Value* bs = other->add_parameter(T(f32, {}));
    Value* zero = constant<int64_t>(*other, T(i64, {}), {0})->output();
    Value* two = constant<int64_t>(*other, T(i64, {}), {2})->output();
    Node* inner = add_while(*other, zero, bx, two, false);
    other->set_outputs({inner->output(1), bs});
    branches.push_back(std::move(other));
    Node* c = body->add_control_flow(NodeKind::kCond, {p, x, half}, std::move(branches),
                                     {T(f32, {3}), T(f32, {})});
    c->set_name("loop/branch");
    c->set_location({"model.cc", 40, 7});
    y = c->output(0);
  }
  body->set_outputs({next, y});
  std::vector<std::unique_ptr<Graph>> subs;
  subs.push_back(make_while_cond());
  subs.push_back(std::move(body));
  return g.add_control_flow(NodeKind::kWhile, {i0, x0, n}, std::move(subs),
                            {T(i64, {}), T(f32, {3})});
}

TEST(PrinterParser, RoundTripsNestedControlFlow) {
  Graph g("control");
  Value* p = g.add_parameter(T(b8, {}));
  Value* x = g.add_parameter(T(f32, {3}));
  Value* s = g.add_parameter(T(f32, {}));
  Value* n = g.add_parameter(T(i64, {}));
  std::vector<std::unique_ptr<Graph>> branches;
  branches.push_back(make_branch("then", true));
  branches.push_back(make_branch("else", false));
  Node* c = g.add_control_flow(NodeKind::kCond, {p, x, s}, std::move(branches),
                               {T(f32, {3}), T(f32, {})});
  Value* zero = constant<int64_t>(g, T(i64, {}), {0})->output();
  Node* w = add_while(g, zero, c->output(0), n, true);
  // A cond without results (its branches return nothing).
  std::vector<std::unique_ptr<Graph>> empty;
  empty.push_back(std::make_unique<Graph>("then"));
  empty.push_back(std::make_unique<Graph>("else"));
  for (auto& b : empty) b->add_parameter(T(f32, {3}));
  g.add_control_flow(NodeKind::kCond, {p, x}, std::move(empty), {});
  g.set_outputs({w->output(1), c->output(1)});
  expect_round_trip(g);
  EXPECT_EQ(g.total_node_count(), 19u);
  std::string text = print_graph(g);
  EXPECT_THAT(text, HasSubstr("graph @control(%0: bool[], %1: f32[3], %2: f32[], %3: i64[]) -> "
                              "(f32[3], f32[]) {\n"
                              "  %4, %5 = cond(%0, %1, %2) : f32[3], f32[] {\n"
                              "    then (%0: f32[3], %1: f32[]) -> (f32[3], f32[]) {\n"
                              "      %2 = neg(%0) : f32[3]\n"
                              "      return %2, %1\n"
                              "    }\n"
                              "    else (%0: f32[3], %1: f32[]) -> (f32[3], f32[]) {\n"
                              "      %2 = mul(%0, %1) : f32[3]\n"
                              "      return %2, %1\n"
                              "    }\n"
                              "  }\n"
                              "  %6 = constant dense<0> : i64[]\n"
                              "  %7, %8 = while(%6, %4, %3) : i64[], f32[3] {\n"
                              "    cond (%0: i64[], %1: f32[3], %2: i64[]) -> (bool[]) {\n"
                              "      %3 = less(%0, %2) : bool[]\n"
                              "      return %3\n"
                              "    }\n"));
  EXPECT_THAT(text,
              HasSubstr("      %7, %8 = cond(%6, %1, %5) : f32[3], f32[] name(\"loop/branch\") "
                        "loc(\"model.cc\":40:7) {\n"));
  EXPECT_THAT(text, HasSubstr("  cond(%0, %1) {\n"
                              "    then (%0: f32[3]) -> () {\n"
                              "      return\n"
                              "    }\n"
                              "    else (%0: f32[3]) -> () {\n"
                              "      return\n"
                              "    }\n"
                              "  }\n"
                              "  return %8, %5\n"
                              "}\n"));
}

TEST(PrinterParser, RoundTripsAStackedWhile) {
  const std::string text =
      "graph @stacked(%0: f32[3], %1: i64[]) -> (f32[3], f32[?,3], i64[]) {\n"
      "  %2 = constant dense<0> : i64[]\n"
      "  %3, %4, %5, %6, %7 = while(%2, %0, %1) : i64[], f32[3], i64[?], f32[?,3], i64[] "
      "stacked name(\"rnn/while\") {\n"
      "    cond (%0: i64[], %1: f32[3], %2: i64[]) -> (bool[]) {\n"
      "      %3 = less(%0, %2) : bool[]\n"
      "      return %3\n"
      "    }\n"
      "    body (%0: i64[], %1: f32[3], %2: i64[]) -> (i64[], f32[3]) {\n"
      "      %3 = constant dense<1> : i64[]\n"
      "      %4 = add(%0, %3) : i64[]\n"
      "      %5 = tanh(%1) : f32[3]\n"
      "      return %4, %5\n"
      "    }\n"
      "  }\n"
      "  return %4, %6, %7\n"
      "}\n";
  std::unique_ptr<Graph> g = parse_graph(text, "stacked.kir");
  EXPECT_TRUE(g->nodes()[1]->while_stacked());
  EXPECT_EQ(g->nodes()[1]->while_loop_variables(), 2u);
  EXPECT_EQ(print_graph(*g), text);
  expect_round_trip(*g);
}

TEST(PrinterParser, PrintsHandWrittenTextCanonically) {
  // Free-form input: comments, odd spacing and line breaks, arbitrary and named values,
  // an int for a float attribute, a splat written as a list, `$` numbers out of order.
  const char* text = R"(# a hand-written graph
graph @train_step ( %10 : f32[?,4], %x: f32[?,4] )
    -> ( f32[?,4], f32[] ) {
  variables {
    $5 = "dense/kernel" : f32[4,4] read trainable -> %w   # flags in any order
    $2 = "steps" : i64[] write -> %100
  }
  %7 = matmul(%10, %w) {transpose_b=false, transpose_a=true} : f32[4,4]
       loc("a.cc":3:9) name("mm")
  %y = leaky_relu(%x) {alpha=1} : f32[?,4]
  %c = constant dense<[2.5, 2.5]> : f32[2]
  %one = constant dense<1> : i64[]
  %s = assign_add $2, %one : i64[]
  %3 = sum(%c) {axes=[], keepdims=false} : f32[]
  return %y,
         %3
}
# trailing comment
)";
  auto g = parse_graph(text, "hand.kir");
  EXPECT_EQ(print_graph(*g),
            "graph @train_step(%0: f32[?,4], %1: f32[?,4]) -> (f32[?,4], f32[]) {\n"
            "  variables {\n"
            "    $0 = \"dense/kernel\" : f32[4,4] trainable read -> %2\n"
            "    $1 = \"steps\" : i64[] write -> %3\n"
            "  }\n"
            "  %4 = matmul(%0, %2) {transpose_b=false, transpose_a=true} : f32[4,4] name(\"mm\") "
            "loc(\"a.cc\":3:9)\n"
            "  %5 = leaky_relu(%1) {alpha=1.0} : f32[?,4]\n"
            "  %6 = constant dense<2.5> : f32[2]\n"
            "  %7 = constant dense<1> : i64[]\n"
            "  %8 = assign_add $1, %7 : i64[]\n"
            "  %9 = sum(%6) {axes=[], keepdims=false} : f32[]\n"
            "  return %5, %9\n"
            "}\n");
  // The flags are the text's: "steps" is written but, per the text, not read.
  EXPECT_FALSE(g->variable(1).read);
  EXPECT_TRUE(g->variable(1).written);
  EXPECT_FALSE(g->variable(1).trainable);
  const AttrValue* alpha = g->nodes()[1]->attrs().find("alpha");
  ASSERT_NE(alpha, nullptr);
  EXPECT_EQ(attr_kind_of(*alpha), AttrKind::f64);
}

TEST(PrinterParser, IntStoredForAFloatAttributePrintsAsAFloat) {
  Graph g("g");
  Value* x = g.add_parameter(T(f32, {3}));
  g.set_outputs({g.add_op(OpKind::LeakyRelu, {x}, {{"alpha", int64_t(0)}})->output()});
  std::string text = print_graph(g);
  EXPECT_THAT(text, HasSubstr("%1 = leaky_relu(%0) {alpha=0.0} : f32[3]\n"));
  EXPECT_EQ(print_graph(*parse_graph(text)), text);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PrinterParser, GoldenFilesPrintBackByteForByte) {
  for (const char* name : {"mlp_train_step", "control_flow", "constants"}) {
    std::string path = std::string(KILN_SOURCE_DIR) + "/tests/ir/golden/" + name + ".kir";
    std::string text = read_text(path);
    ASSERT_FALSE(text.empty()) << "missing golden file " << path;
    std::unique_ptr<Graph> g;
    try {
      g = parse_graph_file(path);
    } catch (const Error& e) {
      FAIL() << e.what();
    }
    EXPECT_EQ(print_graph(*g), text) << path;
    expect_round_trip(*g);
  }
}

}  // namespace
}  // namespace kiln::ir
