// Test helper: seeded random graphs with static shapes made of what the fusion pass groups
// (tests/codegen/random_fused_graphs_test.cc): chains and DAGs of elementwise ops with
// broadcasting, reductions with keepdims broadcast back (layer-norm and softmax-like
// patterns, softmax / log_softmax / logsumexp ops), reshapes and transposes, matmul with an
// epilogue, max-pooling and its gradient, several outputs, and a variable updated by assign /
// assign_add / assign_sub.
//
// Results must be well-conditioned, so that the reference executor (eager kernels) and the
// compiled kernels (vector math, reassociated sums) agree to ~1e-4: float values stay bounded
// (unbounded ops get bounded operands: exp(tanh x), log1p(|x|), x / (|y| + 1), ...), and the
// discontinuous ops (comparisons, select, sign, argmax, casts to integers) read only
// parameters (exact on both paths). Integer graphs (i32) use exact ops only. The same seed
// gives the same graph.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/array.h"

namespace kiln::testing {

class RandomFusedGraphBuilder {
 public:
  explicit RandomFusedGraphBuilder(uint64_t seed) : rng_(seed) {}

  // The ops this generator emits (random_fused_graphs_test.cc checks that its graphs hold
  // exactly these), and the ones it is eligible for but leaves out, with why. Eligible: the
  // Loop and Reduction ops codegen generates (ir/ops.def); the op row completeness test
  // (tests/ops/op_row_completeness_test.cc) fails for an eligible op in neither list.
  static const std::vector<OpKind>& ops() {
    static const std::vector<OpKind> k = {
        OpKind::Add,        OpKind::Sub,        OpKind::Mul,          OpKind::Div,
        OpKind::Pow,        OpKind::Maximum,    OpKind::Minimum,      OpKind::NotEqual,
        OpKind::Less,       OpKind::Greater,    OpKind::GreaterEqual, OpKind::Neg,
        OpKind::Abs,        OpKind::Square,     OpKind::Sqrt,         OpKind::Rsqrt,
        OpKind::Exp,        OpKind::Log,        OpKind::Log1p,        OpKind::Tanh,
        OpKind::Sigmoid,    OpKind::Relu,       OpKind::LeakyRelu,    OpKind::Gelu,
        OpKind::Erf,        OpKind::Softplus,   OpKind::Cast,         OpKind::Select,
        OpKind::Sum,        OpKind::Mean,       OpKind::Max,          OpKind::Min,
        OpKind::LogSumExp,  OpKind::ArgMax,     OpKind::ArgMin,       OpKind::Softmax,
        OpKind::LogSoftmax, OpKind::MatMul,     OpKind::MaxPool2D,    OpKind::MaxPool2DGrad,
        OpKind::Reshape,    OpKind::Transpose,  OpKind::BroadcastTo,  OpKind::Equal,
        OpKind::LessEqual,  OpKind::LogicalAnd, OpKind::LogicalOr,    OpKind::LogicalNot,
        OpKind::Sign,       OpKind::Slice};
    return k;
  }
  static const std::vector<std::pair<OpKind, const char*>>& left_out() {
    static const std::vector<std::pair<OpKind, const char*>> k = {
        {OpKind::Prod, "a product of many terms overflows or vanishes: not well-conditioned"},
        {OpKind::BroadcastLike, "internal, for unknown dimensions: the graphs' shapes are static"},
        {OpKind::OneHot, "reads integer indices and adds an axis: none of the patterns here"}};
    return k;
  }

  std::unique_ptr<ir::Graph> build() {
    g_ = std::make_unique<ir::Graph>("random_fused");
    double r = real();
    dt_ = r < 0.75 ? DType::f32 : r < 0.9 ? DType::f64 : DType::i32;
    const int64_t dims[] = {1, 2, 3, 5, 7, 16, 17, 33};
    int rank = uniform(1, 3);
    for (int i = 0; i < rank; ++i) base_.push_back(dims[uniform(0, 7)]);
    if (shape_of(base_).num_elements() > 4000) base_.back() = 3;
    pool_.push_back(param(Shape(base_)));
    if (chance(0.5)) pool_.push_back(param(compatible(base_)));
    if (chance(0.3)) {
      variable_ = g_->add_variable("var", {dt_, Shape(base_)}, true);
      g_->variable(size_t(variable_)).read = true;
      current_var_ = g_->variable(size_t(variable_)).entry;
      pool_.push_back(current_var_);
    }
    int steps = uniform(2, 10);
    for (int i = 0; i < steps; ++i) step();
    if (variable_ >= 0 && !assigned_) assign();
    // Outputs: the last value, and some other computed values (multi-output groups).
    std::vector<ir::Value*> outs = {pool_.back()};
    for (ir::Value* v : pool_)
      if (v != pool_.back() && v->producer() != nullptr && chance(0.25)) outs.push_back(v);
    g_->set_outputs(outs);
    return std::move(g_);
  }

  // Inputs for a graph of this generator: floats in [-2, 2], integers in [-10, 10].
  static runtime::Array input(const TensorType& t, std::mt19937_64& rng) {
    runtime::Array a = runtime::Array::empty(t);
    std::uniform_real_distribution<double> u(-2, 2);
    visit_dtype(t.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = static_cast<T*>(a.raw());
      for (int64_t i = 0; i < a.size(); ++i) {
        if constexpr (std::is_same_v<T, bool>)
          p[i] = u(rng) > 0;
        else if constexpr (std::is_floating_point_v<T>)
          p[i] = T(u(rng));
        else
          p[i] = T(std::lround(u(rng) * 5));
      }
    });
    return a;
  }

 private:
  using V = ir::Value*;

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double real() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  bool chance(double p) { return real() < p; }
  bool is_float() const { return dt_ != DType::i32; }
  static Shape shape_of(const std::vector<int64_t>& d) { return Shape(d); }

  V param(const Shape& s, DType dt) {
    V p = g_->add_parameter({dt, s});
    params_.push_back(p);
    return p;
  }
  V param(const Shape& s) { return param(s, dt_); }
  V op(OpKind k, std::vector<V> in, Attrs a = {}) {
    return g_->add_op(k, std::move(in), std::move(a))->output();
  }
  V scalar(double v) {
    std::vector<char> bytes(dtype_size(dt_));
    visit_dtype(dt_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      *reinterpret_cast<T*>(bytes.data()) = T(v);
    });
    return g_->add_constant(ir::Literal::copy_of({dt_, Shape{}}, bytes.data()))->output();
  }
  // A small constant of shape `s` (splat or not).
  V constant(const Shape& s) {
    int64_t n = s.num_elements();
    bool splat = chance(0.5);
    double first = is_float() ? std::round(real() * 40 - 20) / 8 : uniform(-3, 3);
    std::vector<char> bytes(size_t(n) * dtype_size(dt_));
    visit_dtype(dt_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = reinterpret_cast<T*>(bytes.data());
      for (int64_t i = 0; i < n; ++i)
        p[i] = T(splat || i == 0 ? first : is_float() ? real() * 4 - 2 : uniform(-3, 3));
    });
    return g_->add_constant(ir::Literal::copy_of({dt_, s}, bytes.data()))->output();
  }

  // A shape broadcasting into `d`: a suffix of it with some dimensions 1.
  Shape compatible(const std::vector<int64_t>& d) {
    size_t keep = size_t(uniform(0, int(d.size())));
    std::vector<int64_t> s(d.end() - long(keep), d.end());
    for (auto& x : s)
      if (chance(0.35)) x = 1;
    return Shape(s);
  }
  static bool broadcasts_into(const Shape& a, const Shape& out) {
    if (a.rank() > out.rank()) return false;
    for (int i = 0; i < a.rank(); ++i) {
      int64_t x = a[a.rank() - 1 - i], y = out[out.rank() - 1 - i];
      if (x != y && x != 1) return false;
    }
    return true;
  }

  V pick() { return pool_[size_t(uniform(0, int(pool_.size()) - 1))]; }
  // Prefer recent values (chains), sometimes older ones (DAGs).
  V pick_recent() {
    if (chance(0.6)) return pool_.back();
    return pick();
  }
  // A value of `dt_` broadcasting into x's shape: from the pool, a new parameter or a constant.
  V partner(V x) {
    if (chance(0.5)) {
      std::vector<V> c;
      for (V v : pool_)
        if (v != x && v->dtype() == dt_ && broadcasts_into(v->shape(), x->shape())) c.push_back(v);
      if (!c.empty()) return c[size_t(uniform(0, int(c.size()) - 1))];
    }
    Shape s = compatible(x->shape().to_vector());
    if (chance(0.6)) {
      V p = param(s);
      return p;
    }
    return constant(s);
  }

  // ---- bounded unary transforms of float values
  V unary(V x) {
    if (!is_float()) {
      static const OpKind k[] = {OpKind::Neg, OpKind::Abs, OpKind::Relu, OpKind::Square};
      OpKind o = k[uniform(0, 3)];
      if (o == OpKind::Square)
        x = op(OpKind::Minimum, {op(OpKind::Maximum, {x, scalar(-50)}), scalar(50)});
      return op(o, {x});
    }
    switch (uniform(0, 17)) {
      case 0:
        return op(OpKind::Neg, {x});
      case 1:
        return op(OpKind::Abs, {x});
      case 2:
        return op(OpKind::Relu, {x});
      case 3:
        return op(OpKind::LeakyRelu, {x}, {{"alpha", 0.1}});
      case 4:
        return op(OpKind::Tanh, {x});
      case 5:
        return op(OpKind::Sigmoid, {x});
      case 6:
        return op(OpKind::Erf, {x});
      case 7:
        return op(OpKind::Gelu, {bounded(x)}, {{"approximate", chance(0.5)}});
      case 8:
        return op(OpKind::Softplus, {bounded(x)});
      case 9:
        return op(OpKind::Exp, {op(OpKind::Tanh, {x})});
      case 10:
        return op(OpKind::Exp, {op(OpKind::Neg, {op(OpKind::Abs, {x})})});
      case 11:
        return op(OpKind::Log1p, {op(OpKind::Abs, {x})});
      case 12:
        return op(OpKind::Log, {op(OpKind::Add, {op(OpKind::Square, {x}), scalar(1)})});
      case 13:  // not at 0, where sqrt amplifies rounding noise without bound
        return op(OpKind::Sqrt, {op(OpKind::Add, {op(OpKind::Abs, {x}), scalar(0.25)})});
      case 14:
        return op(OpKind::Rsqrt, {op(OpKind::Add, {op(OpKind::Abs, {x}), scalar(1)})});
      case 15:
        return op(OpKind::Square, {op(OpKind::Tanh, {x})});
      case 16: {  // through the other float type and back
        DType other = dt_ == DType::f32 ? DType::f64 : DType::f32;
        return op(OpKind::Cast, {op(OpKind::Cast, {x}, {{"dtype", other}})}, {{"dtype", dt_}});
      }
      default:
        return op(OpKind::Mul, {x, scalar(0.5)});
    }
  }
  // tanh(x) * 3: keeps chains bounded
  V bounded(V x) {
    if (!is_float()) return x;
    return op(OpKind::Mul, {op(OpKind::Tanh, {x}), scalar(3)});
  }

  V binary(V x) {
    V y = partner(x);
    bool swap = chance(0.4);
    V a = swap ? y : x, b = swap ? x : y;
    int k = uniform(0, is_float() ? 8 : 5);
    switch (k) {
      case 0:
        return op(OpKind::Add, {a, b});
      case 1:
        return op(OpKind::Sub, {a, b});
      case 2:
        return op(OpKind::Mul, {bounded(a), bounded(b)});
      case 3:
        return op(OpKind::Maximum, {a, b});
      case 4:
        return op(OpKind::Minimum, {a, b});
      case 5: {
        // select on comparisons of parameters only, or a times the sign of a parameter
        // (exact on both paths)
        V p = param(x->shape(), dt_);
        V q = param(compatible(x->shape().to_vector()), dt_);
        if (chance(0.2)) return op(OpKind::Mul, {a, op(OpKind::Sign, {q})});
        static const OpKind cmp[] = {OpKind::Less,         OpKind::LessEqual, OpKind::Greater,
                                     OpKind::GreaterEqual, OpKind::Equal,     OpKind::NotEqual};
        V c = op(cmp[uniform(0, 5)], {chance(0.5) ? p : q, chance(0.5) ? q : p});
        double r = real();
        if (r < 0.2)
          c = op(OpKind::LogicalNot, {c});
        else if (r < 0.4)
          c = op(chance(0.5) ? OpKind::LogicalAnd : OpKind::LogicalOr,
                 {c, op(cmp[uniform(0, 5)], {q, p})});
        return op(OpKind::Select, {c, a, b});
      }
      case 6:  // x / (|y| + 1)
        return op(OpKind::Div, {a, op(OpKind::Add, {op(OpKind::Abs, {b}), scalar(1)})});
      case 7:  // (sigmoid(a) + 0.5) ^ tanh(b)
        return op(OpKind::Pow, {op(OpKind::Add, {op(OpKind::Sigmoid, {a}), scalar(0.5)}),
                                op(OpKind::Tanh, {b})});
      default:
        return op(OpKind::Add, {op(OpKind::Mul, {a, scalar(0.25)}), b});
    }
  }

  std::vector<int64_t> random_axes(int rank) {
    std::vector<int64_t> axes;
    for (int i = 0; i < rank; ++i)
      if (chance(0.5)) axes.push_back(chance(0.3) ? i - rank : i);
    if (axes.empty() && rank > 0 && chance(0.7)) axes.push_back(rank - 1);
    return axes;
  }

  // reduce(x, keepdims) then an elementwise op with x (broadcast back).
  V reduce_back(V x) {
    int rank = x->shape().rank();
    std::vector<int64_t> axes = random_axes(rank);
    std::vector<OpKind> ks = {OpKind::Sum, OpKind::Max, OpKind::Min};
    if (is_float()) {
      ks.push_back(OpKind::Mean);
      ks.push_back(OpKind::LogSumExp);
    }
    OpKind k = ks[size_t(uniform(0, int(ks.size()) - 1))];
    V in = k == OpKind::LogSumExp ? bounded(x) : x;
    bool keep = chance(0.7);
    V r = op(k, {in}, {{"axes", axes}, {"keepdims", keep}});
    if (!keep) {
      // back to a broadcastable shape: reshape to the keepdims shape (or leave it: the reduced
      // shape broadcasts when only leading axes were reduced)
      std::vector<int64_t> kd = x->shape().to_vector();
      std::vector<int> norm;
      for (int64_t a : axes) norm.push_back(int(a < 0 ? a + rank : a));
      for (int d = 0; d < rank; ++d)
        if (axes.empty() || std::find(norm.begin(), norm.end(), d) != norm.end()) kd[size_t(d)] = 1;
      if (chance(0.7)) r = op(OpKind::Reshape, {r}, {{"shape", kd}});
      if (!broadcasts_into(r->shape(), x->shape())) return r;
    }
    if (chance(0.2)) r = op(OpKind::BroadcastTo, {r}, {{"shape", x->shape().to_vector()}});
    switch (uniform(0, 2)) {
      case 0:
        return op(OpKind::Sub, {x, r});
      case 1:
        return op(OpKind::Add, {r, x});
      default:
        return is_float() ? op(OpKind::Mul, {x, op(OpKind::Tanh, {r})}) : op(OpKind::Sub, {r, x});
    }
  }

  V layer_norm(V x) {
    int rank = x->shape().rank();
    std::vector<int64_t> axes = {rank - 1};
    V m = op(OpKind::Mean, {x}, {{"axes", axes}, {"keepdims", true}});
    V d = op(OpKind::Sub, {x, m});
    V var = op(OpKind::Mean, {op(OpKind::Square, {d})}, {{"axes", axes}, {"keepdims", true}});
    // epsilon 0.5: x - mean(x) of a row of equal values is rounding noise, which a small
    // epsilon would amplify (1 / sqrt(eps))
    V y = op(OpKind::Mul, {d, op(OpKind::Rsqrt, {op(OpKind::Add, {var, scalar(0.5)})})});
    if (chance(0.5)) {
      V gamma = param(Shape{x->shape()[rank - 1]});
      y = op(OpKind::Add, {op(OpKind::Mul, {y, gamma}), constant(Shape{x->shape()[rank - 1]})});
    }
    return y;
  }

  V softmax_like(V x) {
    int rank = x->shape().rank();
    int64_t axis = uniform(-rank, rank - 1);
    switch (uniform(0, 2)) {
      case 0:
        return op(OpKind::Softmax, {bounded(x)}, {{"axis", axis}});
      case 1:
        return op(OpKind::LogSoftmax, {bounded(x)}, {{"axis", axis}});
      default: {  // spelled out: max, sub, exp, sum, div
        std::vector<int64_t> axes = {axis};
        V m = op(OpKind::Max, {x}, {{"axes", axes}, {"keepdims", true}});
        V e = op(OpKind::Exp, {op(OpKind::Sub, {bounded(x), op(OpKind::Tanh, {m})})});
        V s = op(OpKind::Sum, {e}, {{"axes", axes}, {"keepdims", true}});
        return op(OpKind::Div, {e, s});
      }
    }
  }

  // reshape to another shape and back (or keep the new shape when it is the base shape).
  V reshape(V x) {
    std::vector<int64_t> d = x->shape().to_vector();
    std::vector<int64_t> to;
    switch (uniform(0, 2)) {
      case 0:
        to = {x->shape().num_elements()};
        break;
      case 1:
        to = d;
        to.insert(to.begin() + uniform(0, int(d.size())), 1);
        break;
      default:
        to = d;
        std::reverse(to.begin(), to.end());
        break;
    }
    V r = op(OpKind::Reshape, {x}, {{"shape", to}});
    if (is_float() && chance(0.7)) r = unary(r);
    return op(OpKind::Reshape, {r}, {{"shape", d}});
  }

  V transpose(V x) {
    int rank = x->shape().rank();
    std::vector<int64_t> perm(static_cast<size_t>(rank)), inv(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    for (int i = 0; i < rank; ++i) inv[size_t(perm[size_t(i)])] = i;
    V t = op(OpKind::Transpose, {x}, {{"perm", perm}});
    t = is_float() ? unary(t) : op(OpKind::Neg, {t});
    return op(OpKind::Transpose, {t}, {{"perm", inv}});
  }

  // x plus a slice of a larger value (a parameter, or one computed from it inside the group):
  // one axis longer, read from an offset of 0 or 1 with a step of 1 or 2 (a strided view).
  V slice(V x) {
    std::vector<int64_t> d = x->shape().to_vector(), big = d, start(d.size(), 0), stop = d,
                         step(d.size(), 1);
    const size_t axis = size_t(uniform(0, int(d.size()) - 1));
    step[axis] = uniform(1, 2);
    start[axis] = uniform(0, 1);
    stop[axis] = start[axis] + (d[axis] - 1) * step[axis] + 1;
    big[axis] = stop[axis] + uniform(0, 1);
    V p = param(Shape(big));
    if (chance(0.5)) p = is_float() ? unary(p) : op(OpKind::Neg, {p});
    V sliced = op(OpKind::Slice, {p}, {{"start", start}, {"stop", stop}, {"step", step}});
    return op(OpKind::Add, {x, sliced});
  }

  // x[..., K] viewed as [M, K] times w[K, N], + bias[N], activation; reshaped so that the
  // result has x's shape when N == K.
  V matmul(V x) {
    const Shape& s = x->shape();
    int64_t k = s[s.rank() - 1];
    int64_t m = s.num_elements() / k;
    V a = s.rank() == 2 ? x : op(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{m, k}}});
    bool tb = chance(0.3);
    V w = param(tb ? Shape{k, k} : Shape{k, k});
    V y = op(OpKind::MatMul, {a, w}, {{"transpose_a", false}, {"transpose_b", tb}});
    if (chance(0.7)) y = op(OpKind::Add, {y, chance(0.5) ? param(Shape{k}) : constant(Shape{k})});
    if (is_float() && chance(0.7)) {
      static const OpKind acts[] = {OpKind::Relu, OpKind::Tanh, OpKind::Sigmoid};
      y = op(acts[uniform(0, 2)], {y});
    } else if (!is_float()) {
      y = op(OpKind::Relu, {y});
    }
    if (s.rank() != 2) y = op(OpKind::Reshape, {y}, {{"shape", s.to_vector()}});
    return y;
  }

  // argmax of a parameter, cast back to the graph's dtype and added (exact on both paths).
  V arg_reduce(V x) {
    int rank = x->shape().rank();
    V p = param(x->shape(), dt_);
    int64_t axis = uniform(0, rank - 1);
    V i = op(chance(0.5) ? OpKind::ArgMax : OpKind::ArgMin, {p},
             {{"axis", axis}, {"keepdims", true}});
    V c = op(OpKind::Cast, {i}, {{"dtype", dt_}});
    return op(OpKind::Add, {x, c});
  }

  // x viewed as NHWC through max_pool2d, or as the gradient that max_pool2d_grad routes to the
  // first maxima of a parameter (its argmax is exact on both paths); strides 1 and "same"
  // padding keep the shape (overlapping windows, clipped at the edges).
  V window(V x) {
    std::vector<int64_t> d = x->shape().to_vector(), nhwc;
    if (d.size() == 1) nhwc = {1, d[0], 1, 1};
    if (d.size() == 2)
      nhwc = chance(0.5) ? std::vector<int64_t>{1, d[0], d[1], 1}
                         : std::vector<int64_t>{d[0], d[1], 1, 1};
    if (d.size() == 3)
      nhwc = chance(0.5) ? std::vector<int64_t>{1, d[0], d[1], d[2]}
                         : std::vector<int64_t>{d[0], d[1], d[2], 1};
    Attrs a{{"pool_size", std::vector<int64_t>{uniform(1, 3), uniform(1, 3)}},
            {"strides", std::vector<int64_t>{1, 1}},
            {"padding", std::string("same")}};
    V v = op(OpKind::Reshape, {x}, {{"shape", nhwc}});
    V y = is_float() && chance(0.5) ? op(OpKind::MaxPool2DGrad, {param(Shape(nhwc)), v}, a)
                                    : op(OpKind::MaxPool2D, {v}, a);
    if (is_float() && chance(0.5)) y = unary(y);
    return op(OpKind::Reshape, {y}, {{"shape", d}});
  }

  void assign() {
    const ir::GraphVariable& var = g_->variable(size_t(variable_));
    V x = nullptr;
    for (auto it = pool_.rbegin(); it != pool_.rend(); ++it)
      if ((*it)->type() == var.type && *it != current_var_) {
        x = *it;
        break;
      }
    if (x == nullptr) x = op(OpKind::Mul, {current_var_, scalar(is_float() ? 0.5 : 2)});
    if (is_float()) x = bounded(x);
    ir::NodeKind kinds[] = {ir::NodeKind::kAssign, ir::NodeKind::kAssignAdd,
                            ir::NodeKind::kAssignSub};
    ir::Node* a = g_->add_assignment(kinds[uniform(0, 2)], variable_, x);
    std::erase(pool_, current_var_);
    current_var_ = a->output();
    pool_.push_back(current_var_);
    assigned_ = true;
  }

  void step() {
    V x = pick_recent();
    int r = uniform(0, 99);
    V y = nullptr;
    if (r < 25) {
      y = unary(x);
    } else if (r < 47) {
      y = binary(x);
    } else if (r < 50) {
      y = x->shape().rank() > 0 ? slice(x) : binary(x);
    } else if (r < 62) {
      y = x->shape().rank() > 0 ? reduce_back(x) : unary(x);
    } else if (r < 68) {
      y = is_float() && x->shape().rank() > 0 ? layer_norm(x) : binary(x);
    } else if (r < 75) {
      y = is_float() && x->shape().rank() > 0 ? softmax_like(x) : binary(x);
    } else if (r < 81) {
      y = reshape(x);
    } else if (r < 85) {
      y = x->shape().rank() > 1 ? transpose(x) : unary(x);
    } else if (r < 91) {
      y = x->shape().rank() > 0 && x->shape().num_elements() <= 2048 ? matmul(x) : binary(x);
    } else if (r < 93) {
      y = x->shape().rank() > 0 ? arg_reduce(x) : binary(x);
    } else if (r < 97) {
      y = x->shape().rank() > 0 ? window(x) : unary(x);
    } else {
      if (variable_ >= 0) {
        assign();
        return;
      }
      y = binary(x);
    }
    pool_.push_back(y);
  }

  std::mt19937_64 rng_;
  std::unique_ptr<ir::Graph> g_;
  DType dt_ = DType::f32;
  std::vector<int64_t> base_;
  std::vector<V> pool_, params_;
  int variable_ = -1;
  V current_var_ = nullptr;
  bool assigned_ = false;
};

inline std::unique_ptr<ir::Graph> random_fused_graph(uint64_t seed) {
  return RandomFusedGraphBuilder(seed).build();
}

}  // namespace kiln::testing
