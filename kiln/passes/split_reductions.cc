#include "kiln/passes/split_reductions.h"

#include <algorithm>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::passes {
namespace {

// Whether `n` sums every axis of its operand but the last (rank >= 2).
bool sums_all_but_last_axis(const ir::Node& n) {
  if (!n.is_op(OpKind::Sum)) return false;
  const int64_t rank = n.input(0)->shape().rank();
  if (rank < 2) return false;
  std::vector<int64_t> axes;
  if (n.attrs().has("axes")) axes = n.attrs().get_ints("axes", "sum");
  if (axes.empty()) return false;  // every axis, the last one too
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (int64_t(axes.size()) != rank - 1) return false;
  for (int64_t i = 0; i < rank - 1; ++i)
    if (axes[size_t(i)] != i) return false;
  return true;
}

class SplitReductions final : public Pass {
 public:
  std::string_view name() const override { return "split-reductions"; }

  bool run(ir::Graph& g) override {
    bool changed = false;
    for (const auto& node : g.nodes())
      for (const auto& sub : node->subgraphs()) changed = run(*sub) || changed;
    std::vector<ir::Node*> sums;
    for (const auto& node : g.nodes()) {
      if (node->kind() != ir::NodeKind::kOp || !sums_all_but_last_axis(*node)) continue;
      const DType t = node->output()->dtype();
      if (t != DType::f32 && t != DType::bf16) continue;
      if (split_parts(node->input(0)->shape()) == 0) continue;
      sums.push_back(node.get());
    }
    for (ir::Node* sum : sums) split(g, *sum);
    g.erase_nodes_if(
        [&](const ir::Node& n) { return std::find(sums.begin(), sums.end(), &n) != sums.end(); });
    if (!sums.empty()) statistics().add("column sums split", int64_t(sums.size()));
    return changed || !sums.empty();
  }

 private:
  void split(ir::Graph& g, ir::Node& sum) {
    ir::Value* x = sum.input(0);
    const Shape& in = x->shape();
    const int64_t columns = in[in.rank() - 1], rows = in.num_elements() / columns;
    const int64_t parts = split_parts(in);
    const bool bf16 = x->dtype() == DType::bf16;
    std::vector<ir::Node*> added;
    auto add = [&](OpKind op, std::vector<ir::Value*> inputs, Attrs attrs, const char* suffix) {
      ir::Node* n = g.add_op(op, std::move(inputs), std::move(attrs));
      n->set_name(sum.name().empty() ? std::string("split_sum/") + suffix
                                     : sum.name() + "/" + suffix);
      n->set_location(sum.location());
      added.push_back(n);
      return n->output();
    };
    ir::Value* v =
        add(OpKind::Reshape, {x},
            Attrs{{"shape", std::vector<int64_t>{parts, rows / parts, columns}}}, "parts");
    if (bf16) v = add(OpKind::Cast, {v}, Attrs{{"dtype", DType::f32}}, "float32");
    v = add(OpKind::Sum, {v}, Attrs{{"axes", std::vector<int64_t>{1}}, {"keepdims", false}},
            "part_sums");
    v = add(OpKind::Sum, {v}, Attrs{{"axes", std::vector<int64_t>{0}}, {"keepdims", false}},
            "sum_of_parts");
    if (bf16) v = add(OpKind::Cast, {v}, Attrs{{"dtype", DType::bf16}}, "bfloat16");
    if (v->shape() != sum.output()->shape())  // keepdims
      v = add(OpKind::Reshape, {v},
              Attrs{{"shape", std::vector<int64_t>(sum.output()->shape().dims().begin(),
                                                   sum.output()->shape().dims().end())}},
              "keepdims");
    for (ir::Node* n : added) g.move_before(n, &sum);
    g.replace_all_uses(sum.output(), v);
    statistics().add("parts summed in parallel", parts);
  }
};

}  // namespace

int64_t split_parts(const Shape& x) {
  if (x.rank() < 3 || !x.is_fully_known()) return 0;
  const int64_t parts = x[0], columns = x[x.rank() - 1];
  if (parts < 2 || columns < 1) return 0;
  const int64_t part_rows = x.num_elements() / (parts * columns);
  return part_rows >= kMinPartRows && x.num_elements() >= kMinSplitElements ? parts : 0;
}

std::unique_ptr<Pass> make_split_reductions() { return std::make_unique<SplitReductions>(); }

}  // namespace kiln::passes
