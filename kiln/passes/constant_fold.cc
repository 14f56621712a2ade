#include "kiln/passes/constant_fold.h"

#include <cstring>
#include <unordered_set>
#include <vector>

#include "kiln/ir/graph_rewrite.h"
#include "kiln/ir/shape_rules.h"
#include "kiln/runtime/kernels.h"

namespace kiln::passes {
namespace {

using ir::Graph;
using ir::Literal;
using ir::Node;
using ir::NodeKind;
using ir::Value;
using runtime::Array;

const Literal* constant_of(const Value* v) {
  const Node* p = v->producer();
  return p != nullptr && p->kind() == NodeKind::kConstant ? p->literal().get() : nullptr;
}

// A literal sharing `a`'s storage (no copy).
std::shared_ptr<const Literal> literal_of(const Array& a) {
  std::shared_ptr<const void> owner(a.storage, a.raw());
  return std::make_shared<Literal>(a.type(), std::move(owner), a.raw());
}

class ConstantFold final : public Pass {
 public:
  explicit ConstantFold(int64_t max_elements) : max_elements_(max_elements) {}
  std::string_view name() const override { return "constant-fold"; }
  bool run(Graph& g) override { return fold_graph(g); }

 private:
  bool fold_graph(Graph& g) {
    bool changed = false;
    ir::GraphRewrite rewrite(g);  // folding adds nodes; visit only the original ones
    for (Node* n : rewrite.original_nodes()) {
      rewrite.visit(*n);
      for (const auto& sub : n->subgraphs()) changed |= fold_graph(*sub);
      if (n->kind() != NodeKind::kOp) continue;
      std::shared_ptr<const Literal> lit = try_fold(*n);
      if (lit == nullptr) continue;
      Node* c = g.add_constant(std::move(lit));
      c->set_name(n->name());
      c->set_location(n->location());
      rewrite.insert_before(c, n);
      rewrite.replace(n->output(0), c->output(0));
      rewrite.erase(n);
      statistics().add("nodes folded");
    }
    return rewrite.finish() || changed;
  }

  // The folded value of `n`, or null when it cannot or should not be folded.
  std::shared_ptr<const Literal> try_fold(const Node& n) const {
    const OpInfo& op = op_info(n.op());
    const TensorType& type = n.output(0)->type();
    if (op.has(kRandom) || op.has(kSideEffecting)) return nullptr;
    if (!type.shape.is_fully_known() || type.shape.num_elements() > max_elements_) return nullptr;
    if (n.op() == OpKind::ElementCount) return fold_element_count(n);
    std::vector<Array> inputs;
    for (const Value* v : n.inputs()) {
      const Literal* lit = constant_of(v);
      if (lit == nullptr) return nullptr;
      Array a = Array::empty(lit->type());
      if (lit->byte_size() > 0) std::memcpy(a.raw(), lit->data(), lit->byte_size());
      inputs.push_back(std::move(a));
    }
    Array out;
    try {
      out = runtime::run_op(n.op(), inputs, n.attrs());
    } catch (const Error&) {
      return nullptr;  // left for run time, where the error names this node
    }
    if (!(out.type() == type)) return nullptr;
    return literal_of(out);
  }

  // element_count needs only the input's type: the product of the counted dimensions.
  static std::shared_ptr<const Literal> fold_element_count(const Node& n) {
    const Shape& s = n.input(0)->shape();
    const auto& axes = n.attrs().get_ints("axes", "element_count");
    int64_t count = 1;
    for (int a : rules::reduction_axes(axes, s.rank(), "element_count")) {
      if (s[a] == kUnknownDim) return nullptr;
      count *= s[a];
    }
    Array out = Array::empty(n.output(0)->type());
    visit_storage(out.dtype, [&](auto tag) {  // as the eager kernel (bfloat16: one rounding)
      using T = typename decltype(tag)::type;
      *static_cast<T*>(out.raw()) = storage_from_int64<T>(count);
    });
    return literal_of(out);
  }

  int64_t max_elements_;
};

}  // namespace

std::unique_ptr<Pass> make_constant_fold(int64_t max_elements) {
  return std::make_unique<ConstantFold>(max_elements);
}

}  // namespace kiln::passes
