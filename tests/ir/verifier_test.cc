// The IR verifier: a well-formed graph (ops, constants, assignments, cond, while, nested
// sub-graphs) passes; each invariant, broken on purpose by editing a built graph, is reported
// with the graph path, the node (printer numbering) and the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/ir/verifier.h"
#include "tests/support/error_of.h"

namespace kiln::ir {
namespace {

using ::kiln::test::error_of;
using ::testing::HasSubstr;

TensorType f32_type(std::initializer_list<int64_t> dims) { return {DType::f32, Shape(dims)}; }
const TensorType kBool{DType::b8, Shape{}};

std::string verify_error(const Graph& g) {
  return error_of([&] { verify_graph(g); });
}

Attrs matmul_attrs(bool ta = false, bool tb = false) {
  return Attrs{{"transpose_a", ta}, {"transpose_b", tb}};
}

Node* add_constant_node(Graph& g, TensorType t, float value) {
  std::vector<float> data(size_t(t.shape.num_elements()), value);
  return g.add_constant(Literal::copy_of(std::move(t), data.data()));
}

// A one-parameter sub-graph returning op(parameter).
std::unique_ptr<Graph> unary_graph(const char* name, const TensorType& t, OpKind op) {
  auto g = std::make_unique<Graph>(name);
  Value* p = g->add_parameter(t);
  g->set_outputs({g->add_op(op, {p})->output()});
  return g;
}

std::vector<std::unique_ptr<Graph>> two(std::unique_ptr<Graph> a, std::unique_ptr<Graph> b) {
  std::vector<std::unique_ptr<Graph>> v;
  v.push_back(std::move(a));
  v.push_back(std::move(b));
  return v;
}

// cond(pred, x) with then = relu(x), else = neg(x).
Node* add_cond(Graph& g, Value* pred, Value* x) {
  return g.add_control_flow(NodeKind::kCond, {pred, x},
                            two(unary_graph("then", x->type(), OpKind::Relu),
                                unary_graph("else", x->type(), OpKind::Neg)),
                            {x->type()});
}

// while (i < limit) i = i + 1, on f32[] values: inputs (i, limit), one loop variable.
std::unique_ptr<Graph> while_cond_graph() {
  auto g = std::make_unique<Graph>("cond");
  Value* i = g->add_parameter(f32_type({}));
  Value* limit = g->add_parameter(f32_type({}));
  g->set_outputs({g->add_op(OpKind::Less, {i, limit})->output()});
  return g;
}
std::unique_ptr<Graph> while_body_graph() {
  auto g = std::make_unique<Graph>("body");
  Value* i = g->add_parameter(f32_type({}));
  g->add_parameter(f32_type({}));
  Value* one = add_constant_node(*g, f32_type({}), 1.0f)->output();
  g->set_outputs({g->add_op(OpKind::Add, {i, one})->output()});
  return g;
}
Node* add_counted_while(Graph& g, Value* i, Value* limit) {
  return g.add_control_flow(NodeKind::kWhile, {i, limit},
                            two(while_cond_graph(), while_body_graph()), {f32_type({})});
}

// The valid "train_step" graph most tests break (value numbers in the comments).
struct TrainStep {
  Graph g{"train_step"};
  Value* x;
  int kernel, step;
  Node *mm, *bias, *add, *grad, *update, *mm2, *total, *zero, *positive, *cond, *limit, *loop,
      *step_update;

  TrainStep() {
    x = g.add_parameter(f32_type({2, 3}));                            // %0
    kernel = g.add_variable("dense/kernel", f32_type({3, 4}), true);  // %1
    step = g.add_variable("step", f32_type({}), false);               // %2
    g.variable(size_t(kernel)).read = true;
    g.variable(size_t(step)).read = true;
    mm = g.add_op(OpKind::MatMul, {x, g.variable(0).entry}, matmul_attrs());  // %3
    bias = add_constant_node(g, f32_type({4}), 0.5f);                         // %4
    add = g.add_op(OpKind::Add, {mm->output(), bias->output()});              // %5
    grad = g.add_op(OpKind::MatMul, {x, add->output()}, matmul_attrs(true));  // %6
    update = g.add_assignment(NodeKind::kAssignSub, kernel, grad->output());  // %7
    mm2 = g.add_op(OpKind::MatMul, {x, update->output()}, matmul_attrs());    // %8
    total = g.add_op(OpKind::Sum, {mm2->output()},
                     Attrs{{"axes", std::vector<int64_t>{}}, {"keepdims", false}});  // %9
    zero = add_constant_node(g, f32_type({}), 0.0f);                                 // %10
    positive = g.add_op(OpKind::Greater, {total->output(), zero->output()});         // %11
    cond = add_cond(g, positive->output(), mm2->output());                           // %12
    limit = add_constant_node(g, f32_type({}), 10.0f);                               // %13
    loop = add_counted_while(g, g.variable(1).entry, limit->output());               // %14
    step_update = g.add_assignment(NodeKind::kAssign, step, loop->output());         // %15
    g.set_outputs({cond->output(), update->output(), step_update->output()});
  }
};

TEST(Verifier, ValidGraphPasses) {
  TrainStep t;
  EXPECT_NO_THROW(verify_graph(t.g));
  // Flags may be set without a use.
  Graph g("flags");
  int v = g.add_variable("unused", f32_type({2}), true);
  g.variable(size_t(v)).read = true;
  g.variable(size_t(v)).written = true;
  g.set_outputs({g.add_parameter(f32_type({2}))});
  EXPECT_NO_THROW(verify_graph(g));
}

TEST(Verifier, NestedSubgraphsPassAndNumberFromZero) {
  // while body containing a cond: the nested path names both.
  Graph g("nested");
  Value* i = g.add_parameter(f32_type({}));
  Value* limit = g.add_parameter(f32_type({}));
  auto body = std::make_unique<Graph>("body");
  Value* bi = body->add_parameter(f32_type({}));
  body->add_parameter(f32_type({}));
  Value* pos = body->add_op(OpKind::Greater, {bi, bi})->output();  // %2
  Node* inner = add_cond(*body, pos, bi);                          // %3
  body->set_outputs({inner->output()});
  Node* loop = g.add_control_flow(NodeKind::kWhile, {i, limit},
                                  two(while_cond_graph(), std::move(body)), {f32_type({})});
  g.set_outputs({loop->output()});
  EXPECT_NO_THROW(verify_graph(g));

  // Break the innermost else branch: neg's output declared with the wrong type.
  Graph& else_graph = loop->subgraph(1).nodes()[1]->subgraph(1);
  else_graph.nodes()[0]->output()->set_type(f32_type({7}));
  EXPECT_EQ(verify_error(g),
            "verifier: graph @nested / while %2 body / cond %3 else: node %1 = neg: the output "
            "is declared f32[7] but the op table infers f32[] from the inputs (f32[])");
}

// ---- use-before-def and closed sub-graphs

TEST(Verifier, UseBeforeDefinition) {
  TrainStep t;
  t.add->set_input(1, t.grad->output());
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %5 = add: input 1 (%6) is used before it is "
            "defined (by node %6 = matmul, later in the graph)");
}

TEST(Verifier, OwnOutputAsInput) {
  TrainStep t;
  t.add->set_input(0, t.add->output());
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %5 = add: input 0 (%5) is the node's own output");
}

TEST(Verifier, NullInput) {
  TrainStep t;
  t.mm->set_input(0, nullptr);
  EXPECT_EQ(verify_error(t.g), "verifier: graph @train_step: node %3 = matmul: input 0 is null");
}

TEST(Verifier, SubgraphUsingAnOuterValueIsAnError) {
  TrainStep t;
  Graph& then_graph = t.cond->subgraph(0);
  then_graph.nodes()[0]->set_input(0, t.mm2->output());
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step / cond %12 then: node %1 = relu: input 0 is a value of "
            "another graph (%8 of the enclosing graph @train_step); sub-graphs are closed: pass "
            "outer values in as operands of the cond / while node");
}

TEST(Verifier, ValueOfAnUnrelatedGraph) {
  TrainStep t;
  Graph other("other");
  Value* foreign = other.add_parameter(f32_type({2, 3}));
  t.mm->set_input(0, foreign);
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %3 = matmul: input 0 is a value of another graph");
}

TEST(Verifier, GraphOutputsMustBeValuesOfTheGraph) {
  TrainStep t;
  Graph other("other");
  t.g.set_outputs({t.cond->output(), other.add_parameter(f32_type({}))});
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: output 1: the output is a value of another graph; a "
            "graph returns values it defines");
  t.g.set_outputs({nullptr});
  EXPECT_EQ(verify_error(t.g), "verifier: graph @train_step: output 0: the output value is null");
}

// ---- op nodes

TEST(Verifier, OpThatDoesNotTypeCheck) {
  TrainStep t;
  t.mm->set_input(0, t.g.variable(1).entry);  // f32[] is not a matrix
  EXPECT_THAT(verify_error(t.g),
              HasSubstr("verifier: graph @train_step: node %3 = matmul: the op does not "
                        "type-check: matmul: both operands need rank >= 2"));
}

TEST(Verifier, OpOutputTypeMustMatchTheTable) {
  TrainStep t;
  t.mm->set_name("dense/matmul");
  t.mm->set_location(SourceLocation{"model.cc", 40, 7});
  t.mm->output()->set_type(f32_type({2, 5}));
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %3 = matmul \"dense/matmul\" (model.cc:40:7): "
            "the output is declared f32[2,5] but the op table infers f32[2,4] from the inputs "
            "(f32[2,3], f32[3,4])");
}

// ---- constants

TEST(Verifier, ConstantLiteralTypeMustMatchItsOutput) {
  TrainStep t;
  t.bias->output()->set_type(f32_type({5}));
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %4 = constant: the literal is f32[4] but the "
            "output is declared f32[5]");
}

// ---- assignments and the variable registry

TEST(Verifier, AssignedValueTypeMustMatchTheVariable) {
  Graph g("assign");
  Value* x = g.add_parameter(f32_type({3}));
  int v = g.add_variable("w", f32_type({3}), true);
  Node* a = g.add_assignment(NodeKind::kAssign, v, x);
  g.set_outputs({a->output()});
  EXPECT_NO_THROW(verify_graph(g));
  x->set_type(f32_type({5}));
  EXPECT_EQ(verify_error(g),
            "verifier: graph @assign: node %2 = assign: the assigned value %0 is f32[5] but "
            "variable $0 \"w\" is f32[3]");
  x->set_type(f32_type({3}));
  a->output()->set_type(f32_type({1}));
  EXPECT_EQ(verify_error(g),
            "verifier: graph @assign: node %2 = assign: the output is declared f32[1] but "
            "variable $0 \"w\" is f32[3]");
}

TEST(Verifier, VariableEntryTypeMustMatchTheVariable) {
  TrainStep t;
  t.g.variable(1).type = f32_type({1});
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: variable $1 \"step\": its entry value %2 has type f32[] "
            "but the variable is f32[1]");
}

TEST(Verifier, AssignedVariableMustBeMarkedWritten) {
  TrainStep t;
  t.g.variable(0).written = false;
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %7 = assign_sub: assigns variable $0 "
            "\"dense/kernel\", but the variable's registry entry says written = false");
}

TEST(Verifier, AssignAddReadsTheVariable) {
  Graph g("acc");
  Value* x = g.add_parameter(f32_type({3}));
  int v = g.add_variable("total", f32_type({3}), false);
  Node* a = g.add_assignment(NodeKind::kAssignAdd, v, x);
  g.set_outputs({a->output()});
  EXPECT_NO_THROW(verify_graph(g));  // add_assignment marks it read
  g.variable(0).read = false;
  EXPECT_EQ(verify_error(g),
            "verifier: graph @acc: node %2 = assign_add: assign_add reads variable $0 \"total\", "
            "but the variable's registry entry says read = false");
}

TEST(Verifier, UsedEntryValueNeedsTheReadFlag) {
  TrainStep t;
  t.g.variable(0).read = false;
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %3 = matmul: uses %1, the entry value of variable "
            "$0 \"dense/kernel\", but the variable's registry entry says read = false");
  // Returning the entry value is a use too.
  Graph g("ret");
  int v = g.add_variable("w", f32_type({2}), true);
  g.set_outputs({g.variable(size_t(v)).entry});
  EXPECT_EQ(verify_error(g),
            "verifier: graph @ret: output 0: uses %0, the entry value of variable $0 \"w\", but "
            "the variable's registry entry says read = false");
}

// ---- stale variable values

TEST(Verifier, EntryValueUsedAfterAnAssignmentIsStale) {
  TrainStep t;
  t.mm2->set_input(1, t.g.variable(0).entry);
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %8 = matmul: uses %1, a stale value of variable "
            "$0 \"dense/kernel\" (it was assigned by %7 before this node); use the newest value "
            "(%7)");
}

TEST(Verifier, OlderAssignmentOutputIsStale) {
  Graph g("twice");
  Value* x = g.add_parameter(f32_type({2}));
  int v = g.add_variable("w", f32_type({2}), true);
  Node* a1 = g.add_assignment(NodeKind::kAssign, v, x);                // %2
  Node* a2 = g.add_assignment(NodeKind::kAssignAdd, v, a1->output());  // %3
  Node* use = g.add_op(OpKind::Mul, {a2->output(), x});                // %4
  g.set_outputs({use->output()});
  EXPECT_NO_THROW(verify_graph(g));
  use->set_input(0, a1->output());
  EXPECT_EQ(verify_error(g),
            "verifier: graph @twice: node %4 = mul: uses %2, a stale value of variable $0 \"w\" "
            "(it was assigned by %3 before this node); use the newest value (%3)");
  use->set_input(0, a2->output());
  g.set_outputs({use->output(), a1->output()});
  EXPECT_EQ(verify_error(g),
            "verifier: graph @twice: output 1: uses %2, a stale value of variable $0 \"w\" (it "
            "was assigned by %3 before the graph returns it); use the newest value (%3)");
}

// ---- cond

TEST(Verifier, CondPredicateMustBeABoolScalar) {
  TrainStep t;
  t.cond->set_input(0, t.total->output());
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %12 = cond: the predicate (input 0, %9) must be "
            "bool[], got f32[]");
}

TEST(Verifier, CondNeedsAPredicateAndTwoSubgraphs) {
  Graph g("c");
  g.add_control_flow(NodeKind::kCond, {}, {}, {});
  EXPECT_EQ(verify_error(g),
            "verifier: graph @c: node cond: a cond needs a predicate (input 0), this one has no "
            "inputs");
  Graph h("c");
  Value* p = h.add_parameter(kBool);
  std::vector<std::unique_ptr<Graph>> one;
  one.push_back(std::make_unique<Graph>("then"));
  h.add_control_flow(NodeKind::kCond, {p}, std::move(one), {});
  EXPECT_EQ(verify_error(h),
            "verifier: graph @c: node cond: a cond has 2 sub-graphs (then, else), this one has 1");
}

TEST(Verifier, CondBranchParametersMustMatchTheOperands) {
  Graph g("c");
  Value* p = g.add_parameter(kBool);
  Value* x = g.add_parameter(f32_type({3}));
  Node* c = g.add_control_flow(NodeKind::kCond, {p, x},
                               two(unary_graph("then", f32_type({3}), OpKind::Relu),
                                   unary_graph("else", f32_type({4}), OpKind::Neg)),
                               {f32_type({3})});
  g.set_outputs({c->output()});
  EXPECT_EQ(verify_error(g),
            "verifier: graph @c: node %2 = cond: the else sub-graph's parameter 0 is f32[4] but "
            "operand 0 (input 1, %1) is f32[3]");
  c->subgraph(1).parameter(0)->set_type(f32_type({3}));
  c->subgraph(1).nodes()[0]->output()->set_type(f32_type({3}));
  EXPECT_NO_THROW(verify_graph(g));
  c->subgraph(0).add_parameter(f32_type({}));
  EXPECT_EQ(verify_error(g),
            "verifier: graph @c: node %2 = cond: the then sub-graph has 2 parameters but the "
            "cond passes it 1 operand");
}

TEST(Verifier, CondBranchResultsMustMatchTheOutputs) {
  TrainStep t;
  Graph& else_graph = t.cond->subgraph(1);
  Value* p = else_graph.parameter(0);
  Value* s =
      else_graph
          .add_op(OpKind::Sum, {p}, Attrs{{"axes", std::vector<int64_t>{1}}, {"keepdims", false}})
          ->output();
  else_graph.set_outputs({s});
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %12 = cond: the else sub-graph's output 0 is "
            "f32[2] but the cond's output %12 is f32[2,4]");
  else_graph.set_outputs({p, p});
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %12 = cond: the else sub-graph returns 2 values "
            "but the cond has 1 output");
}

// ---- while

TEST(Verifier, WhileNeedsTwoSubgraphsAndEnoughInputs) {
  Graph g("w");
  Value* i = g.add_parameter(f32_type({}));
  std::vector<std::unique_ptr<Graph>> one;
  one.push_back(while_cond_graph());
  Node* loop = g.add_control_flow(NodeKind::kWhile, {i}, std::move(one), {f32_type({})});
  g.set_outputs({loop->output()});
  EXPECT_EQ(verify_error(g),
            "verifier: graph @w: node %1 = while: a while has 2 sub-graphs (cond, body), this one "
            "has 1");
  Graph h("w");
  Value* j = h.add_parameter(f32_type({}));
  h.add_control_flow(NodeKind::kWhile, {j}, two(while_cond_graph(), while_body_graph()),
                     {f32_type({}), f32_type({})});
  EXPECT_EQ(verify_error(h),
            "verifier: graph @w: node %1, %2 = while: a while with 2 loop variables (its outputs) "
            "needs at least as many inputs, this one has 1");
  Graph k("w");
  Value* m = k.add_parameter(f32_type({}));
  k.add_control_flow(NodeKind::kWhile, {m}, two(while_cond_graph(), nullptr), {});
  EXPECT_EQ(verify_error(k), "verifier: graph @w: node while: sub-graph 1 (body) is null");
}

TEST(Verifier, WhileSubgraphParametersMustMatchAllInputs) {
  TrainStep t;
  t.loop->subgraph(1).parameter(1)->set_type(f32_type({1}));
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %14 = while: the body sub-graph's parameter 1 is "
            "f32[1] but capture 0 (input 1, %13) is f32[]");
}

TEST(Verifier, WhileConditionMustReturnOneBoolScalar) {
  TrainStep t;
  Graph& c = t.loop->subgraph(0);
  c.set_outputs({c.parameter(0)});
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %14 = while: the cond sub-graph's output 0 is f32[] "
            "but the loop predicate is bool[]");
  c.set_outputs({});
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %14 = while: the cond sub-graph returns 0 values "
            "but the while has 1 predicate");
}

TEST(Verifier, WhileBodyMustReturnTheLoopVariables) {
  TrainStep t;
  Graph& body = t.loop->subgraph(1);
  Value* wide = body.add_op(OpKind::BroadcastTo, {body.outputs()[0]},
                            Attrs{{"shape", std::vector<int64_t>{2}}})
                    ->output();
  body.set_outputs({wide});
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %14 = while: the body sub-graph's output 0 is "
            "f32[2] but loop variable 0 (input 0, %2) is f32[]");
}

TEST(Verifier, WhileOutputsMustBeTheLoopVariableTypes) {
  TrainStep t;
  t.loop->output()->set_type(f32_type({1}));
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step: node %14 = while: output %14 (loop variable 0) is "
            "declared f32[1] but loop variable 0 (input 0, %2) is f32[]");
}

// A stacked while: loop variables, one stack per loop variable ([?, ...]), the trip count.
TEST(Verifier, StackedWhileOutputsStacksAndTheTripCount) {
  Graph g("stacked");
  Value* i = g.add_parameter(f32_type({}));
  Value* limit = g.add_parameter(f32_type({}));
  Node* loop =
      g.add_control_flow(NodeKind::kWhile, {i, limit}, two(while_cond_graph(), while_body_graph()),
                         {f32_type({}), f32_type({kUnknownDim}), {DType::i64, Shape{}}});
  loop->mutable_attrs().set("stacked", true);
  g.set_outputs({loop->output(0), loop->output(2)});
  verify_graph(g);
  loop->output(1)->set_type(f32_type({kUnknownDim, 1}));
  EXPECT_THAT(verify_error(g), HasSubstr("output %3 (the stack of loop variable 0) is declared "
                                         "f32[?,1] but must be f32[?]"));
  loop->output(1)->set_type(f32_type({kUnknownDim}));
  loop->output(2)->set_type(f32_type({}));
  EXPECT_THAT(verify_error(g),
              HasSubstr("output %4 (the trip count) is declared f32[] but must be i64[]"));
  loop->output(2)->set_type({DType::i64, Shape{}});
  loop->mutable_attrs().set("stacked", false);
  EXPECT_THAT(verify_error(g), HasSubstr("a while has no attributes, or exactly stacked = true"));
}

// ---- sub-graphs are stateless

TEST(Verifier, SubgraphsHaveNoVariablesOrAssignments) {
  TrainStep t;
  Graph& then_graph = t.cond->subgraph(0);
  int v = then_graph.add_variable("inner", f32_type({2, 4}), true);
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step / cond %12 then: variable $0 \"inner\": a sub-graph "
            "cannot capture variables (it has 1); sub-graphs see only their parameters");
  then_graph.add_assignment(NodeKind::kAssign, v, then_graph.parameter(0));
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step / cond %12 then: node %3 = assign: assignments are not "
            "allowed in a sub-graph (sub-graphs capture no variables; assign in the enclosing "
            "graph instead)");
}

TEST(Verifier, ErrorsInsideSubgraphsNameThePath) {
  TrainStep t;
  Graph& body = t.loop->subgraph(1);
  body.nodes()[1]->output()->set_type(f32_type({3}));  // %3 = add in the body
  EXPECT_EQ(verify_error(t.g),
            "verifier: graph @train_step / while %14 body: node %3 = add: the output is declared "
            "f32[3] but the op table infers f32[] from the inputs (f32[], f32[])");
}

}  // namespace
}  // namespace kiln::ir

namespace kiln::ir {
namespace {

// all_reduce (a collective): its output has its input's type, and it sums floating tensors
// only (the op table's dtype column).
TEST(Verifier, AllReduceChecksItsTypes) {
  Graph g("grads");
  Value* grad = g.add_parameter(f32_type({3, 4}));
  Node* sum = g.add_op(OpKind::AllReduce, {grad}, {});
  g.set_outputs({sum->output()});
  EXPECT_NO_THROW(verify_graph(g));
  sum->output()->set_type(f32_type({4, 3}));
  EXPECT_THAT(verify_error(g),
              HasSubstr("all_reduce: the output is declared f32[4,3] but the op table infers "
                        "f32[3,4]"));
  Graph ints("ints");
  Value* i = ints.add_parameter({DType::i32, Shape{2}});
  EXPECT_THAT(error_of([&] { ints.add_op(OpKind::AllReduce, {i}, {}); }),
              HasSubstr("all_reduce: input 0 has dtype int32, but all_reduce needs a floating "
                        "dtype"));
}

}  // namespace
}  // namespace kiln::ir
