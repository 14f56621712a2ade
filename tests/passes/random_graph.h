// Test helper: deterministic random valid graphs (for the pass property test and memory
// planning), and random inputs for them.
//
// random_graph(seed) builds a DAG of 3-30 top-level nodes over 1-3 parameters (f32 mostly,
// some i32) of small known shapes drawn so every op type-checks: elementwise unary / binary
// with broadcasting, comparisons and select, constants (0, 1, -0.0, splat and non-splat),
// reductions, softmax, reshape / transpose chains, slice, concat, matmul, attention, the
// patterns the passes rewrite (neg(neg x), x*1, x+(-0.0), cast to the same dtype, ...), duplicated
// subexpressions, dead nodes, cond / while nodes with random bodies (one level) and sometimes
// a variable updated with assign / assign_add / assign_sub. Integer values stay small (no
// integer mul of two values, no integer div) so nothing overflows. The same seed gives the
// same graph (two calls give two independent, identical graphs).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/array.h"

namespace kiln::test {

class RandomGraphBuilder {
 public:
  explicit RandomGraphBuilder(uint64_t seed) : rng_(seed) {}

  // The ops this generator emits (property_test.cc checks that its graphs hold exactly these),
  // and the ones it is eligible for but leaves out, with why. Eligible: the elementwise ops
  // that are not internal (ir/ops.def); the op row completeness test
  // (tests/ops/op_row_completeness_test.cc) fails for an eligible op in neither list.
  static const std::vector<OpKind>& ops() {
    static const std::vector<OpKind> k = {
        OpKind::Add,        OpKind::Sub,         OpKind::Mul,          OpKind::Div,
        OpKind::Pow,        OpKind::Maximum,     OpKind::Minimum,      OpKind::Equal,
        OpKind::Less,       OpKind::Greater,     OpKind::GreaterEqual, OpKind::LogicalAnd,
        OpKind::LogicalOr,  OpKind::Neg,         OpKind::Abs,          OpKind::Sign,
        OpKind::Square,     OpKind::Sqrt,        OpKind::Rsqrt,        OpKind::Exp,
        OpKind::Log,        OpKind::Log1p,       OpKind::Tanh,         OpKind::Sigmoid,
        OpKind::Relu,       OpKind::LeakyRelu,   OpKind::Erf,          OpKind::Softplus,
        OpKind::LogicalNot, OpKind::Cast,        OpKind::Select,       OpKind::Sum,
        OpKind::Mean,       OpKind::Max,         OpKind::Min,          OpKind::Softmax,
        OpKind::LogSoftmax, OpKind::MatMul,      OpKind::Attention,    OpKind::Reshape,
        OpKind::Transpose,  OpKind::BroadcastTo, OpKind::Slice,        OpKind::Concat,
        OpKind::NotEqual,   OpKind::LessEqual,   OpKind::Gelu};
    return k;
  }
  static const std::vector<std::pair<OpKind, const char*>>& left_out() {
    static const std::vector<std::pair<OpKind, const char*>> k = {};
    return k;
  }

  // A sub-graph (cond branch, while body): parameters of `params`, `steps` random ops, and
  // outputs of the types `outputs` (each one of the parameters' types, so one always exists).
  std::unique_ptr<ir::Graph> build_sub(std::string name, const std::vector<TensorType>& params,
                                       const std::vector<TensorType>& outputs, int steps) {
    g_ = std::make_unique<ir::Graph>(std::move(name));
    depth_ = 1;
    for (const TensorType& t : params) pool_.push_back(g_->add_parameter(t));
    for (int i = 0; i < steps; ++i) step();
    std::vector<ir::Value*> outs;
    for (const TensorType& t : outputs) {
      ir::Value* chosen = nullptr;
      for (auto it = pool_.rbegin(); it != pool_.rend(); ++it)
        if ((*it)->type() == t && (!chosen || chance(0.3))) chosen = *it;
      outs.push_back(chosen);
    }
    g_->set_outputs(outs);
    return std::move(g_);
  }

  std::unique_ptr<ir::Graph> build() {
    g_ = std::make_unique<ir::Graph>("random");
    // A base shape; parameters broadcast to it.
    int rank = uniform(0, 3);
    for (int i = 0; i < rank; ++i) base_.push_back(uniform(1, 5));
    int params = uniform(1, 3);
    for (int i = 0; i < params; ++i) {
      DType dt = chance(0.2) ? DType::i32 : DType::f32;
      pool_.push_back(g_->add_parameter({dt, i == 0 ? Shape(base_) : compatible_shape(base_)}));
    }
    if (chance(0.3)) {
      int v = g_->add_variable("var", {DType::f32, Shape(base_)}, true);
      variable_ = v;
      g_->variable(size_t(v)).read = true;
      pool_.push_back(g_->variable(size_t(v)).entry);
    }
    int target = uniform(3, 30);
    int guard = 0;
    while (int(g_->nodes().size()) < target && ++guard < 1000) step();
    // Outputs: most unused node values (always the last one; the rest stay dead, for dce) and
    // sometimes any value (a parameter, a constant, a value used twice).
    std::vector<ir::Value*> outs;
    std::vector<ir::Value*> unused;
    for (const auto& n : g_->nodes()) {
      ir::Value* v = n->output(0);
      if (std::find(pool_.begin(), pool_.end(), v) == pool_.end()) continue;
      bool used = false;
      for (const auto& m : g_->nodes())
        used |= std::find(m->inputs().begin(), m->inputs().end(), v) != m->inputs().end();
      if (!used) unused.push_back(v);
    }
    for (size_t i = 0; i < unused.size(); ++i)
      if (i + 1 == unused.size() || chance(0.6)) outs.push_back(unused[i]);
    if (outs.empty() || chance(0.2)) outs.push_back(pick());
    g_->set_outputs(outs);
    return std::move(g_);
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  const T& one_of(const std::vector<T>& v) {
    return v[size_t(uniform(0, int(v.size()) - 1))];
  }

  ir::Value* pick() { return pool_[size_t(uniform(0, int(pool_.size()) - 1))]; }
  ir::Value* pick_where(auto pred) {
    std::vector<ir::Value*> c;
    for (ir::Value* v : pool_)
      if (pred(v)) c.push_back(v);
    return c.empty() ? nullptr : one_of(c);
  }

  // A shape broadcasting with `s` (not growing the result): a suffix of it, some dims 1.
  Shape compatible_shape(const std::vector<int64_t>& s) {
    size_t keep = size_t(uniform(0, int(s.size())));
    std::vector<int64_t> d(s.end() - long(keep), s.end());
    for (auto& x : d)
      if (chance(0.3)) x = 1;
    return Shape(d);
  }

  static bool broadcasts(const Shape& a, const Shape& b) {
    int r = std::max(a.rank(), b.rank());
    for (int i = 0; i < r; ++i) {
      int64_t x = i < a.rank() ? a[a.rank() - 1 - i] : 1;
      int64_t y = i < b.rank() ? b[b.rank() - 1 - i] : 1;
      if (x != y && x != 1 && y != 1) return false;
    }
    return true;
  }

  ir::Value* op(OpKind k, std::vector<ir::Value*> in, Attrs a = {}) {
    ir::Value* v = g_->add_op(k, std::move(in), std::move(a))->output(0);
    pool_.push_back(v);
    return v;
  }

  double random_scalar(DType dt) {
    if (dt == DType::b8) return chance(0.5) ? 1 : 0;
    if (is_integer(dt)) return uniform(-5, 5);
    static const double specials[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.25};
    if (chance(0.5)) return specials[uniform(0, 6)];
    return std::normal_distribution<double>(0, 1.5)(rng_);
  }

  // A constant of type (dt, shape): every element `splat` when given, else random (splat or
  // not).
  ir::Value* constant(DType dt, const Shape& shape, std::optional<double> splat = {}) {
    int64_t n = shape.num_elements();
    bool is_splat = splat.has_value() || chance(0.5);
    double first = splat ? *splat : random_scalar(dt);
    std::vector<char> bytes(size_t(n) * dtype_size(dt));
    visit_dtype(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = reinterpret_cast<T*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) p[i] = T(is_splat ? first : random_scalar(dt));
    });
    ir::Value* v = g_->add_constant(ir::Literal::copy_of({dt, shape}, bytes.data()))->output(0);
    pool_.push_back(v);
    return v;
  }

  // An operand for a binary op with `x`: another value or a new constant.
  ir::Value* partner(ir::Value* x) {
    if (chance(0.5)) {
      ir::Value* y = pick_where([&](ir::Value* v) {
        return v->dtype() == x->dtype() && broadcasts(v->shape(), x->shape()) &&
               std::max(v->shape().rank(), x->shape().rank()) <= 4;
      });
      if (y) return y;
    }
    return constant(x->dtype(), compatible_shape(x->shape().to_vector()));
  }

  void unary(ir::Value* x) {
    static const std::vector<OpKind> kFloat = {
        OpKind::Neg,   OpKind::Abs,   OpKind::Sign, OpKind::Square,  OpKind::Sqrt,
        OpKind::Exp,   OpKind::Log,   OpKind::Tanh, OpKind::Sigmoid, OpKind::Relu,
        OpKind::Rsqrt, OpKind::Log1p, OpKind::Erf,  OpKind::Softplus};
    static const std::vector<OpKind> kInt = {OpKind::Neg, OpKind::Abs, OpKind::Sign, OpKind::Relu};
    if (x->dtype() == DType::b8) {
      op(OpKind::LogicalNot, {x});
    } else if (is_floating(x->dtype())) {
      if (chance(0.1)) {
        if (chance(0.5))
          op(OpKind::LeakyRelu, {x}, {{"alpha", 0.1}});
        else
          op(OpKind::Gelu, {x}, {{"approximate", chance(0.5)}});
      } else {
        op(one_of(kFloat), {x});
      }
    } else {
      op(one_of(kInt), {x});
    }
  }

  void binary(ir::Value* x) {
    if (x->dtype() == DType::b8) {
      ir::Value* y = partner(x);
      op(chance(0.5) ? OpKind::LogicalAnd : OpKind::LogicalOr, {x, y});
      return;
    }
    static const std::vector<OpKind> kFloat = {OpKind::Add, OpKind::Sub,     OpKind::Mul,
                                               OpKind::Div, OpKind::Maximum, OpKind::Minimum,
                                               OpKind::Pow};
    static const std::vector<OpKind> kInt = {OpKind::Add, OpKind::Sub, OpKind::Maximum,
                                             OpKind::Minimum};
    static const std::vector<OpKind> kCompare = {OpKind::Less,    OpKind::LessEqual,
                                                 OpKind::Greater, OpKind::GreaterEqual,
                                                 OpKind::Equal,   OpKind::NotEqual};
    ir::Value* y = partner(x);
    bool swap = chance(0.3);
    if (chance(0.15)) {
      ir::Value* c = op(one_of(kCompare), {swap ? y : x, swap ? x : y});
      if (chance(0.6)) {
        // select(c, x, y'): c broadcasts with both.
        ir::Value* z = partner(x);
        if (broadcasts(c->shape(), z->shape()) && broadcasts(c->shape(), x->shape()))
          op(OpKind::Select, {c, x, z});
      }
      return;
    }
    OpKind k = is_floating(x->dtype()) ? one_of(kFloat) : one_of(kInt);
    op(k, {swap ? y : x, swap ? x : y});
  }

  void reduce(ir::Value* x) {
    std::vector<int64_t> axes;
    for (int i = 0; i < x->shape().rank(); ++i)
      if (chance(0.5)) axes.push_back(chance(0.3) ? i - x->shape().rank() : i);
    std::vector<OpKind> ks = {OpKind::Sum, OpKind::Max, OpKind::Min};
    if (is_floating(x->dtype())) ks.push_back(OpKind::Mean);
    if (x->dtype() == DType::b8) return;
    op(one_of(ks), {x}, {{"axes", axes}, {"keepdims", chance(0.4)}});
  }

  void reshape(ir::Value* x) {
    std::vector<int64_t> d = x->shape().to_vector();
    int how = uniform(0, 3);
    if (how == 0) {
      d = {x->shape().num_elements()};
    } else if (how == 1 && d.size() < 4) {
      d.insert(d.begin() + uniform(0, int(d.size())), 1);
    } else if (how == 2) {
      std::reverse(d.begin(), d.end());
    } else {
      d.erase(std::remove(d.begin(), d.end(), 1), d.end());
    }
    if (chance(0.2) && !d.empty()) d[size_t(uniform(0, int(d.size()) - 1))] = -1;
    ir::Value* r = op(OpKind::Reshape, {x}, {{"shape", d}});
    if (chance(0.4)) reshape(r);
  }

  void transpose(ir::Value* x) {
    std::vector<int64_t> perm(size_t(x->shape().rank()));
    std::iota(perm.begin(), perm.end(), 0);
    if (chance(0.8)) std::shuffle(perm.begin(), perm.end(), rng_);
    ir::Value* t = op(OpKind::Transpose, {x}, {{"perm", perm}});
    if (chance(0.4)) transpose(t);
  }

  void matmul(ir::Value* x) {
    bool ta = chance(0.3), tb = chance(0.3);
    int64_t k = ta ? x->shape()[0] : x->shape()[1];
    int64_t n = uniform(1, 5);
    ir::Value* y = pick_where([&](ir::Value* v) {
      if (v->dtype() != x->dtype() || v->shape().rank() != 2) return false;
      return tb ? v->shape()[1] == k : v->shape()[0] == k;
    });
    if (!y || chance(0.3)) y = constant(x->dtype(), tb ? Shape{n, k} : Shape{k, n});
    op(OpKind::MatMul, {x, y}, {{"transpose_a", ta}, {"transpose_b", tb}});
  }

  // Fused self-attention over x's rows (attention(x, x, x)), causal or not.
  void attention(ir::Value* x) {
    op(OpKind::Attention, {x, x, x}, {{"scale", 0.5}, {"causal", chance(0.5)}});
  }

  // The identities the passes rewrite.
  void pattern(ir::Value* x) {
    DType dt = x->dtype();
    if (dt == DType::b8) {
      op(OpKind::Cast, {x}, {{"dtype", dt}});
      return;
    }
    Shape scalar;
    auto some_shape = [&]() -> Shape {
      int c = uniform(0, 2);
      if (c == 0) return scalar;
      if (c == 1) return x->shape();
      return compatible_shape(x->shape().to_vector());
    };
    switch (uniform(0, 9)) {
      case 0:
        op(OpKind::Neg, {op(OpKind::Neg, {x})});
        break;
      case 1: {
        ir::Value* one = constant(dt, some_shape(), 1.0);
        op(OpKind::Mul, {chance(0.5) ? x : one, chance(0.5) ? one : x});
        break;
      }
      case 2: {
        // ones that broadcast x to a bigger shape.
        std::vector<int64_t> d = x->shape().to_vector();
        if (d.size() < 4) d.insert(d.begin(), uniform(1, 3));
        ir::Value* one = constant(dt, Shape(d), 1.0);
        op(OpKind::Mul, {x, one});
        break;
      }
      case 3: {
        ir::Value* z = constant(dt, some_shape(), is_floating(dt) ? -0.0 : 0.0);
        if (chance(0.5))
          op(OpKind::Add, {x, z});
        else
          op(OpKind::Add, {z, x});
        break;
      }
      case 4:
        op(OpKind::Sub, {x, constant(dt, some_shape(), 0.0)});
        break;
      case 5:
        if (is_floating(dt))
          op(OpKind::Div, {x, constant(dt, some_shape(), 1.0)});
        else
          op(OpKind::Mul, {x, constant(dt, some_shape(), 1.0)});
        break;
      case 6:
        op(OpKind::Cast, {x}, {{"dtype", dt}});
        break;
      case 7:
        op(OpKind::BroadcastTo, {x}, {{"shape", x->shape().to_vector()}});
        break;
      case 8:
        op(OpKind::Reshape, {x}, {{"shape", x->shape().to_vector()}});
        break;
      default:
        // x + +0.0 and x * 0 must stay (not exact rewrites).
        op(chance(0.5) ? OpKind::Add : OpKind::Mul, {x, constant(dt, some_shape(), 0.0)});
        break;
    }
  }

  // Repeats an earlier op node whose inputs are all still current (for cse).
  void duplicate() {
    std::vector<const ir::Node*> c;
    for (const auto& n : g_->nodes()) {
      if (n->kind() != ir::NodeKind::kOp) continue;
      bool ok = std::all_of(n->inputs().begin(), n->inputs().end(), [&](ir::Value* v) {
        return std::find(pool_.begin(), pool_.end(), v) != pool_.end();
      });
      if (ok) c.push_back(n.get());
    }
    if (c.empty()) return;
    const ir::Node* n = one_of(c);
    std::vector<ir::Value*> in = n->inputs();
    if (in.size() == 2 && op_info(n->op()).has(kCommutative) && chance(0.5))
      std::swap(in[0], in[1]);
    op(n->op(), in, n->attrs());
  }

  void assign() {
    const ir::GraphVariable& var = g_->variable(size_t(variable_));
    ir::Value* x = pick_where([&](ir::Value* v) { return v->type() == var.type; });
    if (!x) x = constant(var.type.dtype, var.type.shape);
    ir::Value* current = nullptr;
    for (ir::Value* v : pool_)
      if (v == var.entry || std::find(assigned_.begin(), assigned_.end(), v) != assigned_.end())
        current = v;
    ir::NodeKind kinds[] = {ir::NodeKind::kAssign, ir::NodeKind::kAssignAdd,
                            ir::NodeKind::kAssignSub};
    ir::Node* a = g_->add_assignment(kinds[uniform(0, 2)], variable_, x);
    std::erase(pool_, current);
    pool_.push_back(a->output(0));
    assigned_.push_back(a->output(0));
  }

  void softmax(ir::Value* x) {
    if (!is_floating(x->dtype()) || x->shape().rank() == 0) return;
    int64_t axis = uniform(-x->shape().rank(), x->shape().rank() - 1);
    op(chance(0.5) ? OpKind::Softmax : OpKind::LogSoftmax, {x}, {{"axis", axis}});
  }

  void slice_or_concat(ir::Value* x) {
    int rank = x->shape().rank();
    if (rank == 0) return;
    if (chance(0.5)) {
      std::vector<int64_t> start, stop, step;
      for (int i = 0; i < rank; ++i) {
        int64_t d = x->shape()[i];
        int64_t b = uniform(0, int(d) - 1);
        start.push_back(b);
        stop.push_back(uniform(int(b) + 1, int(d)));
        step.push_back(uniform(1, 2));
      }
      op(OpKind::Slice, {x}, {{"start", start}, {"stop", stop}, {"step", step}});
    } else {
      int axis = uniform(0, rank - 1);
      ir::Value* y = pick_where([&](ir::Value* v) {
        if (v->dtype() != x->dtype() || v->shape().rank() != rank) return false;
        for (int i = 0; i < rank; ++i)
          if (i != axis && v->shape()[i] != x->shape()[i]) return false;
        return true;
      });
      op(OpKind::Concat, {x, y ? y : x}, {{"axis", int64_t{axis}}});
    }
  }

  // A bool[] predicate computed from `x` (numeric).
  ir::Value* predicate(ir::Value* x) {
    ir::Value* s = op(OpKind::Sum, {x}, {{"axes", std::vector<int64_t>{}}, {"keepdims", false}});
    return op(OpKind::Greater, {s, constant(x->dtype(), Shape{}, 0.0)});
  }

  // cond(p, x[, y]) with random branches returning x's type; or while (i < 3) over (i, x).
  void control_flow(ir::Value* x) {
    if (x->dtype() == DType::b8) return;
    std::vector<ir::Value*> operands = {x};
    if (chance(0.5)) operands.push_back(pick());
    std::vector<TensorType> types;
    for (ir::Value* v : operands) types.push_back(v->type());
    auto sub = [&](std::string name, std::vector<TensorType> params, std::vector<TensorType> outs) {
      RandomGraphBuilder b(rng_());
      return b.build_sub(std::move(name), params, outs, uniform(1, 6));
    };
    if (chance(0.5)) {
      ir::Value* p = predicate(x);
      std::vector<std::unique_ptr<ir::Graph>> branches;
      branches.push_back(sub("then", types, {x->type()}));
      branches.push_back(sub("else", types, {x->type()}));
      std::vector<ir::Value*> in = {p};
      in.insert(in.end(), operands.begin(), operands.end());
      ir::Node* c = g_->add_control_flow(ir::NodeKind::kCond, in, std::move(branches), {x->type()});
      pool_.push_back(c->output(0));
      return;
    }
    TensorType counter{DType::i32, Shape{}};
    std::vector<TensorType> loop = {counter};
    loop.insert(loop.end(), types.begin(), types.end());
    auto cond = std::make_unique<ir::Graph>("cond");
    {
      std::vector<ir::Value*> ps;
      for (const TensorType& t : loop) ps.push_back(cond->add_parameter(t));
      int32_t three = 3;
      ir::Value* limit = cond->add_constant(ir::Literal::copy_of(counter, &three))->output(0);
      cond->set_outputs({cond->add_op(OpKind::Less, {ps[0], limit})->output(0)});
    }
    // body: (i, x[, y]) -> (i + 1, x'): the counter update is added after the random part.
    std::unique_ptr<ir::Graph> body = sub("body", loop, {x->type()});
    {
      int32_t one = 1;
      ir::Value* inc = body->add_constant(ir::Literal::copy_of(counter, &one))->output(0);
      ir::Value* next = body->add_op(OpKind::Add, {body->parameter(0), inc})->output(0);
      ir::Value* new_x = body->outputs()[0];
      body->set_outputs({next, new_x});
    }
    int32_t zero = 0;
    ir::Value* i0 = g_->add_constant(ir::Literal::copy_of(counter, &zero))->output(0);
    std::vector<ir::Value*> in = {i0};
    in.insert(in.end(), operands.begin(), operands.end());
    std::vector<std::unique_ptr<ir::Graph>> subs;
    subs.push_back(std::move(cond));
    subs.push_back(std::move(body));
    // Loop variables: i and x; a second operand is an invariant capture.
    std::vector<TensorType> outs = {counter, x->type()};
    ir::Node* w = g_->add_control_flow(ir::NodeKind::kWhile, in, std::move(subs), outs);
    pool_.push_back(w->output(1));
  }

  void step() {
    ir::Value* x = pick();
    int r = uniform(0, 111);
    if (r < 18) {
      unary(x);
    } else if (r < 40) {
      binary(x);
    } else if (r < 48) {
      reduce(x);
    } else if (r < 54) {
      reshape(x);
    } else if (r < 60) {
      transpose(x);
    } else if (r < 68) {
      if (x->shape().rank() == 2 && x->dtype() != DType::b8) {
        if (is_floating(x->dtype()) && chance(0.2))
          attention(x);
        else
          matmul(x);
      }
    } else if (r < 84) {
      pattern(x);
    } else if (r < 92) {
      duplicate();
    } else if (r < 94) {
      if (x->dtype() != DType::b8) constant(x->dtype(), x->shape());
    } else if (r < 100) {
      if (variable_ >= 0) assign();
    } else if (r < 104) {
      softmax(x);
    } else if (r < 108) {
      slice_or_concat(x);
    } else if (depth_ == 0) {
      control_flow(x);
    }
  }

  std::mt19937_64 rng_;
  std::unique_ptr<ir::Graph> g_;
  std::vector<int64_t> base_;
  std::vector<ir::Value*> pool_;
  std::vector<ir::Value*> assigned_;
  int variable_ = -1;
  int depth_ = 0;  // 1 inside a sub-graph (no control flow, no variables there)
};

inline std::unique_ptr<ir::Graph> random_graph(uint64_t seed) {
  return RandomGraphBuilder(seed).build();
}

// A random Array of type `t` (floats: normal values with some 0, -0.0, 1 and -1; integers in
// [-10, 10]; bools).
inline runtime::Array random_array(const TensorType& t, std::mt19937_64& rng) {
  runtime::Array a = runtime::Array::empty(t);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> normal(0, 1);
  visit_dtype(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(a.raw());
    for (int64_t i = 0; i < a.size(); ++i) {
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = u(rng) < 0.5;
      } else if constexpr (std::is_floating_point_v<T>) {
        static const double specials[] = {0.0,  -0.0,     1.0,       -1.0, 0.0,
                                          -0.0, INFINITY, -INFINITY, NAN};
        double r = u(rng);
        p[i] = T(r < 0.15 ? specials[int(r * 1000) % (r < 0.02 ? 9 : 6)] : normal(rng) * 2);
      } else {
        p[i] = T(std::uniform_int_distribution<int>(-10, 10)(rng));
      }
    }
  });
  return a;
}

}  // namespace kiln::test
