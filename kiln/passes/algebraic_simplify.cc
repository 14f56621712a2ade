#include "kiln/passes/algebraic_simplify.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "kiln/ir/graph_rewrite.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Literal;
using ir::Node;
using ir::NodeKind;
using ir::Value;

// The splat constants the rules look for (bitwise: -0.0 and +0.0 differ).
enum class Splat { kOne, kZero, kPositiveZero, kNegativeZero };

bool is_splat(const Value* v, Splat want) {
  const Node* p = v->producer();
  if (p == nullptr || p->kind() != NodeKind::kConstant || p->literal() == nullptr) return false;
  const Literal& lit = *p->literal();
  if (lit.num_elements() == 0 || !lit.is_splat()) return false;
  return visit_storage(lit.type().dtype, [&](auto tag) {
    using S = typename decltype(tag)::type;
    const auto x = storage_value(lit.data_as<S>()[0]);  // bfloat16: its float value
    using T = std::remove_const_t<decltype(x)>;
    switch (want) {
      case Splat::kOne:
        return x == T(1);
      case Splat::kZero:
        return x == T(0);
      case Splat::kPositiveZero:
        if constexpr (std::is_floating_point_v<T>) return x == T(0) && !std::signbit(x);
        return x == T(0);
      case Splat::kNegativeZero:
        if constexpr (std::is_floating_point_v<T>) return x == T(0) && std::signbit(x);
        return x == T(0);
    }
    return false;
  });
}

// The additive identity that `x + c == x` holds for every x: -0.0 for floats, 0 for integers.
Splat additive_identity(DType t) { return is_floating(t) ? Splat::kNegativeZero : Splat::kZero; }
// What `x - c == x` needs: +0.0 for floats, 0 for integers.
Splat subtractive_identity(DType t) { return is_floating(t) ? Splat::kPositiveZero : Splat::kZero; }

// The operand of binary `n` other than a splat `want`, or null (either side if commutative).
Value* other_than(const Node& n, Splat want, bool commutative) {
  if (is_splat(n.input(1), want)) return n.input(0);
  if (commutative && is_splat(n.input(0), want)) return n.input(1);
  return nullptr;
}

Node* producer_op(const Value* v, OpKind op) {
  Node* p = v->producer();
  return p != nullptr && p->is_op(op) ? p : nullptr;
}

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

// Equal types with at most one unknown dimension and a non-zero product of the known ones:
// then a reshape between them keeps every element where it is.
bool same_layout(const TensorType& a, const TensorType& b) {
  if (!(a == b)) return false;
  int unknown = 0;
  int64_t known = 1;
  for (int64_t d : a.shape.dims()) {
    if (d == kUnknownDim)
      ++unknown;
    else
      known *= d;
  }
  return unknown == 0 || (unknown == 1 && known != 0);
}

// Would `op(inputs) {attrs}` have exactly type `want`?
bool infers(OpKind op, const std::vector<Value*>& inputs, const Attrs& attrs,
            const TensorType& want) {
  std::vector<TensorType> types;
  for (const Value* v : inputs) types.push_back(v->type());
  try {
    return infer_type(op, types, attrs) == want;
  } catch (const Error&) {
    return false;
  }
}

// Variable values (entry values, assignment results) that a later assignment supersedes,
// with the position (in `order`) of that assignment. A rewrite may use such a value only
// where every use it introduces comes before the assignment, which reads the updated variable
// (the verifier's stale-value rule).
std::unordered_map<const Value*, size_t> superseded_values(const Graph& g,
                                                           const std::vector<Node*>& order) {
  std::unordered_map<const Value*, size_t> out;
  std::vector<const Value*> current;
  for (const ir::GraphVariable& v : g.variables()) current.push_back(v.entry);
  for (size_t i = 0; i < order.size(); ++i) {
    const Node* n = order[i];
    if (!n->is_assignment() || n->variable() < 0 || size_t(n->variable()) >= current.size())
      continue;
    out.emplace(current[size_t(n->variable())], i);
    current[size_t(n->variable())] = n->output(0);
  }
  return out;
}

// The position (in `order`) of each value's last use; graph outputs count as used after
// every node. Sub-graphs are closed, so a graph's values are used only by its own nodes.
std::unordered_map<const Value*, size_t> last_uses(const Graph& g,
                                                   const std::vector<Node*>& order) {
  std::unordered_map<const Value*, size_t> out;
  for (size_t i = 0; i < order.size(); ++i)
    for (const Value* v : order[i]->inputs()) out[v] = i;
  for (const Value* v : g.outputs()) out[v] = order.size();
  return out;
}

// A new op node inserted right before `before`, with its name and location: the output.
Value* insert_op(Graph& g, ir::GraphRewrite& rewrite, Node& before, OpKind op,
                 std::vector<Value*> inputs, Attrs attrs = {}) {
  Node* node = g.add_op(op, std::move(inputs), std::move(attrs));
  node->set_name(before.name());
  node->set_location(before.location());
  rewrite.insert_before(node, &before);
  return node->output(0);
}

class AlgebraicSimplify final : public Pass {
 public:
  std::string_view name() const override { return "algebraic-simplify"; }
  bool run(Graph& g) override { return simplify_graph(g); }

 private:
  bool simplify_graph(Graph& g) {
    bool changed = false;
    ir::GraphRewrite rewrite(g);  // rules may add nodes; visit only the original ones
    const std::vector<Node*>& order = rewrite.original_nodes();
    const std::unordered_map<const Value*, size_t> superseded = superseded_values(g, order);
    const std::unordered_map<const Value*, size_t> last_use = last_uses(g, order);
    for (size_t at = 0; at < order.size(); ++at) {
      Node* n = order[at];
      rewrite.visit(*n);
      // A rewrite of n adds uses at n (new inputs) or at the users of n's outputs (a
      // replacement): a superseded value is usable when all of them precede its assignment.
      size_t latest_use = at;
      for (size_t o = 0; o < n->num_outputs(); ++o)
        if (auto it = last_use.find(n->output(o)); it != last_use.end())
          latest_use = std::max(latest_use, it->second);
      auto usable = [&](const Value* v) {
        auto it = superseded.find(v);
        return it == superseded.end() || latest_use < it->second;
      };
      for (const auto& sub : n->subgraphs()) changed |= simplify_graph(*sub);
      if (n->kind() != NodeKind::kOp) continue;
      bool edited = false;
      const OpKind op = n->op();
      const std::vector<Value*> inputs = n->inputs();
      Value* to = simplify(g, rewrite, *n, usable, edited);
      changed |= edited;
      if (to != nullptr || edited) statistics().add(rule_name(op, inputs, to));
      if (to == nullptr) continue;
      KILN_ASSERT(to->type() == n->output(0)->type(), "algebraic-simplify changed a type");
      rewrite.replace(n->output(0), to);
      rewrite.erase(n);
    }
    return rewrite.finish() || changed;
  }

  // The rule that rewrote a node of `op` reading `in` (its inputs before the rewrite) into
  // `to` (null: the node itself was edited), as the statistics name it.
  static const char* rule_name(OpKind op, const std::vector<Value*>& in, const Value* to) {
    const bool to_input = std::find(in.begin(), in.end(), to) != in.end();
    switch (op) {
      case OpKind::Mul:
        return to_input ? "x*1 -> x" : "x*1 -> broadcast_to(x)";
      case OpKind::Div:
        return "x/1 -> x";
      case OpKind::Add:
        return to_input ? "x+0 -> x" : "pad(a)+pad(b) -> pad(concat(a, b))";
      case OpKind::Sub:
        return "x-0 -> x";
      case OpKind::Pad:
        return "pad without padding -> x";
      case OpKind::Neg:
        return "neg(neg x) -> x";
      case OpKind::Transpose:
        if (to == nullptr) return "transpose(transpose x) composed";
        return to_input ? "identity transpose -> x" : "transpose(transpose x) -> x";
      case OpKind::Reshape:
        return to_input ? "reshape to x's layout -> x" : "reshape(reshape x) -> reshape x";
      case OpKind::BroadcastTo:
      case OpKind::BroadcastLike:
        return "broadcast to x's type -> x";
      case OpKind::Cast:
        return "cast to x's type -> x";
      case OpKind::MatMul:
        return "matmul by zeros -> broadcast(sum(x*0) + 0)";
      default:
        return "other";
    }
  }

  // The value replacing `n`'s output, or null; sets `edited` when `n` itself was rewritten.
  // Only values for which usable(v) holds become results or new inputs.
  template <typename Usable>
  static Value* simplify(Graph& g, ir::GraphRewrite& rewrite, Node& n, const Usable& usable,
                         bool& edited) {
    const TensorType& type = n.output(0)->type();
    auto same_type = [&](Value* v) {
      return v != nullptr && v->type() == type && usable(v) ? v : nullptr;
    };
    switch (n.op()) {
      case OpKind::Mul: {
        Value* x = other_than(n, Splat::kOne, /*commutative=*/true);
        if (x == nullptr || !usable(x)) return nullptr;
        return x->type() == type ? x : broadcast(g, rewrite, n, x);
      }
      case OpKind::Div:
        return same_type(other_than(n, Splat::kOne, false));
      case OpKind::Add:
        if (Value* v = same_type(other_than(n, additive_identity(type.dtype), true))) return v;
        return adjacent_pads(g, rewrite, n, usable);
      case OpKind::Pad: {
        bool no_padding = true;
        for (const char* a : {"low", "high", "interior"})
          for (int64_t d : n.attrs().get_ints(a, "pad")) no_padding &= d == 0;
        return no_padding ? same_type(n.input(0)) : nullptr;
      }
      case OpKind::Sub:
        return same_type(other_than(n, subtractive_identity(type.dtype), false));
      case OpKind::Neg: {
        Node* inner = producer_op(n.input(0), OpKind::Neg);
        return inner ? same_type(inner->input(0)) : nullptr;
      }
      case OpKind::Transpose:
        return simplify_transpose(n, usable, edited);
      case OpKind::Reshape: {
        if (same_layout(n.input(0)->type(), type)) return same_type(n.input(0));
        Node* inner = producer_op(n.input(0), OpKind::Reshape);
        if (inner == nullptr || !usable(inner->input(0)) ||
            !infers(OpKind::Reshape, {inner->input(0)}, n.attrs(), type))
          return nullptr;
        n.set_input(0, inner->input(0));
        edited = true;
        return same_layout(n.input(0)->type(), type) ? n.input(0) : nullptr;
      }
      case OpKind::BroadcastTo:
      case OpKind::BroadcastLike:
        return type.shape.is_fully_known() ? same_type(n.input(0)) : nullptr;
      case OpKind::Cast:
        return same_type(n.input(0));
      case OpKind::MatMul:
        return product_by_zeros(g, rewrite, n, usable);
      default:
        return nullptr;
    }
  }

  // matmul(A, B) of 2-d operands where one is a zero splat constant (a recurrent layer's zero
  // initial state in its kernel's gradient): each element of C is a sum of zeros times a column
  // of op(B) (A zero) or a row of op(A) (B zero), so it is +0.0 where that column (row) is finite
  // and NaN where it holds an inf or a NaN (0 * inf), the same for every row (column) of C. The
  // product's chain starts at +0.0, and +0.0 plus a signed zero is +0.0. Without the product:
  // broadcast_to(sum(x * 0, k axis) + 0.0), x the other operand: the sum is a signed zero or NaN,
  // and the + 0.0 makes it +0.0 (floats; other dtypes sum zeros to 0). Bitwise the product.
  template <typename Usable>
  static Value* product_by_zeros(Graph& g, ir::GraphRewrite& rewrite, Node& n,
                                 const Usable& usable) {
    const TensorType& type = n.output(0)->type();
    Value* a = n.input(0);
    Value* b = n.input(1);
    if (type.shape.rank() != 2 || !type.shape.is_fully_known() || a->type().shape.rank() != 2 ||
        b->type().shape.rank() != 2 || a->dtype() != type.dtype || b->dtype() != type.dtype)
      return nullptr;
    const bool ta = n.attrs().get_bool("transpose_a", "matmul"),
               tb = n.attrs().get_bool("transpose_b", "matmul");
    // The other operand, the axis of it that k runs along, and the sum's shape in C ([1, n]
    // for a zero A: a row of C; [m, 1] for a zero B: a column).
    Value* x = nullptr;
    int64_t axis = 0;
    std::vector<int64_t> line;
    if (is_splat(a, Splat::kZero)) {
      x = b, axis = tb ? 1 : 0, line = {1, type.shape[1]};
    } else if (is_splat(b, Splat::kZero)) {
      x = a, axis = ta ? 0 : 1, line = {type.shape[0], 1};
    } else {
      return nullptr;
    }
    if (!usable(x) || !x->type().shape.is_fully_known()) return nullptr;
    const uint64_t zero_bytes = 0;  // 0 in every dtype kiln has (at most 8 bytes)
    Node* zero = g.add_constant(ir::Literal::copy_of({x->dtype(), Shape{}}, &zero_bytes));
    rewrite.insert_before(zero, &n);
    Value* times_zero = insert_op(g, rewrite, n, OpKind::Mul, {x, zero->output(0)});
    Value* sum = insert_op(g, rewrite, n, OpKind::Sum, {times_zero},
                           {{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}});
    if (sum->type().shape.to_vector() != line)
      sum = insert_op(g, rewrite, n, OpKind::Reshape, {sum}, {{"shape", line}});
    // (A line of C broadcasts to C's fully known shape: add_op cannot refuse it.)
    return insert_op(g, rewrite, n, OpKind::BroadcastTo, {plus_zero(g, rewrite, n, sum)},
                     {{"shape", type.shape.to_vector()}});
  }

  template <typename Usable>
  static Value* simplify_transpose(Node& n, const Usable& usable, bool& edited) {
    const TensorType& type = n.output(0)->type();
    const auto& perm = n.attrs().get_ints("perm", "transpose");
    if (is_identity_perm(perm))
      return n.input(0)->type() == type && usable(n.input(0)) ? n.input(0) : nullptr;
    Node* inner = producer_op(n.input(0), OpKind::Transpose);
    if (inner == nullptr || !usable(inner->input(0))) return nullptr;
    const auto& inner_perm = inner->attrs().get_ints("perm", "transpose");
    std::vector<int64_t> composed(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) composed[i] = inner_perm.at(size_t(perm[i]));
    Value* x = inner->input(0);
    if (is_identity_perm(composed)) return x->type() == type ? x : nullptr;
    Attrs attrs = n.attrs();
    attrs.set("perm", composed);
    if (!infers(OpKind::Transpose, {x}, attrs, type)) return nullptr;
    n.set_input(0, x);
    n.mutable_attrs() = std::move(attrs);
    edited = true;
    return nullptr;
  }

  // pad(a) + pad(b), both padded along one axis only (no interior padding) where a's window
  // ends at b's start: pad(concat(a + 0.0, b + 0.0)), one pass instead of two full-size pads
  // and a sum (the gradient of slices that cut a tensor into pieces, an LSTM's four gates).
  // Exact: each element of the sum is a value plus a padding +0.0, which turns a -0.0 into
  // +0.0; the `+ 0.0` (floats only) does the same, and fuses into the pieces' producers.
  // Chains of adds fold one pad at a time into one concat; the last pad, with no padding
  // left, is its input.
  template <typename Usable>
  static Value* adjacent_pads(Graph& g, ir::GraphRewrite& rewrite, Node& n, const Usable& usable) {
    Node* pa = producer_op(n.input(0), OpKind::Pad);
    Node* pb = producer_op(n.input(1), OpKind::Pad);
    const TensorType& type = n.output(0)->type();
    if (pa == nullptr || pb == nullptr || pa->output(0)->type() != type ||
        pb->output(0)->type() != type || !type.shape.is_fully_known() || !usable(pa->input(0)) ||
        !usable(pb->input(0)))
      return nullptr;
    auto axis_of = [&](const Node& p) -> int {
      const auto &low = p.attrs().get_ints("low", "pad"), &high = p.attrs().get_ints("high", "pad"),
                 &interior = p.attrs().get_ints("interior", "pad");
      int axis = -1;
      for (size_t d = 0; d < low.size(); ++d) {
        if (interior[d] != 0) return -2;
        if (low[d] == 0 && high[d] == 0) continue;
        if (axis >= 0) return -2;
        axis = int(d);
      }
      return axis;
    };
    const int axis = axis_of(*pa);
    if (axis < 0 || axis_of(*pb) != axis) return nullptr;
    Node* first = pa;
    Node* second = pb;
    auto low = [](const Node& p, int a) { return p.attrs().get_ints("low", "pad")[size_t(a)]; };
    auto high = [](const Node& p, int a) { return p.attrs().get_ints("high", "pad")[size_t(a)]; };
    const int64_t dim = type.shape[axis];
    if (dim - high(*first, axis) != low(*second, axis)) std::swap(first, second);
    if (dim - high(*first, axis) != low(*second, axis)) return nullptr;
    // Pieces already joined by this rule stay one concat (not a concat of concats).
    std::vector<Value*> pieces;
    for (Node* p : {first, second}) {
      Node* joined = producer_op(p->input(0), OpKind::Concat);
      if (joined != nullptr && joined->attrs().get_int("axis", "concat") == axis &&
          std::all_of(joined->inputs().begin(), joined->inputs().end(), usable))
        pieces.insert(pieces.end(), joined->inputs().begin(), joined->inputs().end());
      else
        pieces.push_back(p->input(0));
    }
    for (Value*& piece : pieces) piece = plus_zero(g, rewrite, n, piece);
    Attrs concat_attrs{{"axis", int64_t(axis)}};
    TensorType joined_type = type;
    joined_type.shape[axis] = dim - low(*first, axis) - high(*second, axis);
    if (!infers(OpKind::Concat, pieces, concat_attrs, joined_type)) return nullptr;
    Value* c = insert_op(g, rewrite, n, OpKind::Concat, std::move(pieces), concat_attrs);
    std::vector<int64_t> lo(size_t(type.shape.rank()), 0), hi = lo, in = lo;
    lo[size_t(axis)] = low(*first, axis);
    hi[size_t(axis)] = high(*second, axis);
    Attrs pad_attrs{{"low", lo}, {"high", hi}, {"interior", in}};
    if (!infers(OpKind::Pad, {c}, pad_attrs, type)) return nullptr;
    if (lo[size_t(axis)] == 0 && hi[size_t(axis)] == 0) return c;
    return insert_op(g, rewrite, n, OpKind::Pad, {c}, std::move(pad_attrs));
  }

  // x + 0.0 (a +0.0 scalar) for floats, unless x is one already; x for other dtypes.
  static Value* plus_zero(Graph& g, ir::GraphRewrite& rewrite, Node& before, Value* x) {
    if (!is_floating(x->dtype())) return x;
    if (const Node* a = producer_op(x, OpKind::Add);
        a != nullptr && is_splat(a->input(1), Splat::kPositiveZero))
      return x;
    const uint64_t zero_bytes = 0;  // +0.0 in every floating dtype kiln has (at most 8 bytes)
    Node* zero = g.add_constant(ir::Literal::copy_of({x->dtype(), Shape{}}, &zero_bytes));
    rewrite.insert_before(zero, &before);
    return insert_op(g, rewrite, before, OpKind::Add, {x, zero->output(0)});
  }

  // x * 1 where the 1 only broadcasts x: broadcast_to(x) to the (fully known) result shape.
  static Value* broadcast(Graph& g, ir::GraphRewrite& rewrite, Node& n, Value* x) {
    const TensorType& type = n.output(0)->type();
    if (x->dtype() != type.dtype || !type.shape.is_fully_known()) return nullptr;
    Attrs attrs{{"shape", type.shape.to_vector()}};
    if (!infers(OpKind::BroadcastTo, {x}, attrs, type)) return nullptr;
    return insert_op(g, rewrite, n, OpKind::BroadcastTo, {x}, std::move(attrs));
  }
};

}  // namespace

std::unique_ptr<Pass> make_algebraic_simplify() { return std::make_unique<AlgebraicSimplify>(); }

}  // namespace kiln::passes
