#include "kiln/codegen/kernel_plan.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "kiln/ir/shape_rules.h"

namespace kiln::codegen {
namespace {

using ir::Node;
using ir::NodeKind;
using ir::Value;

// Ops reading their operands at other indices than the one computed (flat loops share one
// linear index, so none of them runs flat; a window op reads a window of its input).
bool is_layout_reordering(const Node& n) {
  return n.is_op(OpKind::Transpose) || n.is_op(OpKind::Slice) || n.is_op(OpKind::OneHot) ||
         n.is_op(OpKind::Concat) || op_info(n.op()).has(kWindow);
}

// The operands a node's value at some index actually reads (broadcast_like's second operand
// gives only its shape).
size_t read_operands(const Node& n) {
  return n.is_op(OpKind::BroadcastLike) ? 1 : n.inputs().size();
}

bool flat_possible(const ir::Graph& g, int64_t n_out) {
  for (const Value* o : g.outputs())
    if (o->shape().num_elements() != n_out) return false;
  auto ok = [&](const Value* v) {
    int64_t n = v->shape().num_elements();
    return n == n_out || n == 1;
  };
  // Parameters nothing reads (a contraction epilogue's GEMM operands) do not matter.
  std::unordered_set<const Value*> read(g.outputs().begin(), g.outputs().end());
  for (const auto& n : g.nodes())
    for (const Value* v : n->inputs()) read.insert(v);
  for (const auto& p : g.parameters())
    if (read.count(p.get()) && !ok(p.get())) return false;
  for (const auto& n : g.nodes()) {
    if (n->kind() != NodeKind::kOp) continue;
    if (is_reduction(*n) || is_layout_reordering(*n)) return false;
    if (!ok(n->output())) return false;
    for (size_t i = 0; i < read_operands(*n); ++i)
      if (!ok(n->input(i))) return false;
  }
  return true;
}

// Does computing `root` at row r read every other materialized value only at row r?
class RowCheck {
 public:
  explicit RowCheck(const std::unordered_set<const Value*>& materialized)
      : materialized_(materialized) {}

  bool root_ok(const Value* root) {
    const Node* n = op_producer(root);
    if (n == nullptr) return true;  // a parameter or constant output: read at its own row
    if (is_reduction(*n)) {
      auto axes = reduction_axes(*n);
      bool keeps_row = !axes.empty() && axes.front() != 0;
      return visit(n->input(0), keeps_row);
    }
    return operands_ok(*n, true);
  }

 private:
  // `row`: the value is read at index r in its leading dimension (else at other indices).
  bool visit(const Value* v, bool row) {
    if (materialized_.count(v)) return row;
    const Node* n = op_producer(v);
    if (n == nullptr) {  // parameters and constants may be read anywhere
      if (!row && v->def() == Value::Def::kParameter) not_by_row.insert(v);
      return true;
    }
    auto key = std::make_pair(v, row);
    if (seen_.count(key)) return true;
    seen_.insert(key);
    return operands_ok(*n, row);
  }

  bool operands_ok(const Node& n, bool row) {
    const Shape& out = n.output()->shape();
    for (size_t i = 0; i < read_operands(n); ++i) {
      const Shape& in = n.input(i)->shape();
      bool keeps = false;
      if (row && in.rank() >= 1 && out.rank() >= 1) {
        if (n.is_op(OpKind::Transpose)) {
          keeps = n.attrs().get_ints("perm", "transpose").front() == 0;
        } else if (n.is_op(OpKind::Slice)) {
          auto r = rules::slice_ranges(in, n.attrs(), "slice").front();
          keeps = r.start == 0 && r.step == 1 && r.size == in[0];
        } else if (n.is_op(OpKind::Reshape) || n.is_op(OpKind::Copy)) {
          keeps = in[0] == out[0];
        } else if (n.is_op(OpKind::OneHot)) {
          keeps = true;  // the new axis is the last one
        } else {         // elementwise and broadcasts: numpy alignment from the right
          keeps = in.rank() == out.rank() && in[0] == out[0];
        }
      }
      if (!visit(n.input(i), keeps)) return false;
    }
    return true;
  }

  const std::unordered_set<const Value*>& materialized_;

 public:
  std::unordered_set<const Value*> not_by_row;  // parameters read away from the row

 private:
  std::set<std::pair<const Value*, bool>> seen_;
};

}  // namespace

int concat_axis(const Node& n) {
  const int64_t axis = n.attrs().get_int("axis", "concat");
  return int(axis < 0 ? axis + n.output()->shape().rank() : axis);
}

const Shape* shared_piece_shape(const Node& n) {
  for (const Value* in : n.inputs())
    if (in->shape() != n.input(0)->shape()) return nullptr;
  return &n.input(0)->shape();
}

const Node* op_producer(const Value* v) {
  const Node* p = v->producer();
  return (p != nullptr && p->kind() == NodeKind::kOp) ? p : nullptr;
}

bool is_reduction(const Node& n) {
  return n.kind() == NodeKind::kOp && op_info(n.op()).has(kReduction);
}

std::vector<int> reduction_axes(const Node& n) {
  const int rank = n.input(0)->shape().rank();
  std::vector<int> axes;
  if (n.is_op(OpKind::ArgMax) || n.is_op(OpKind::ArgMin)) {
    int64_t a = n.attrs().get_int("axis", op_name(n.op()));
    axes.push_back(int(a < 0 ? a + rank : a));
    return axes;
  }
  const auto& list = n.attrs().get_ints("axes", op_name(n.op()));
  if (list.empty()) {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
    return axes;
  }
  for (int64_t a : list) axes.push_back(int(a < 0 ? a + rank : a));
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

static bool spans_last_level_cache(const ir::Graph& body) {
  long long bytes = 0;
  auto add = [&](const Value* v) {
    bytes += v->shape().num_elements() * (long long)(dtype_size(v->dtype()));
  };
  for (const auto& p : body.parameters()) add(p.get());
  for (const Value* o : body.outputs()) add(o);
  return bytes >= kStreamingFootprintBytes;
}

bool keeps_last_axis(const ir::Node& n) {
  if (!is_reduction(n) || n.is_op(OpKind::ArgMax) || n.is_op(OpKind::ArgMin)) return false;
  const int rank = n.input(0)->shape().rank();
  std::vector<int> axes = reduction_axes(n);
  return rank >= 2 && !axes.empty() && axes.back() != rank - 1;
}

KernelPlan plan_kernel(const ir::Graph& body) {
  KernelPlan plan;
  plan.streaming_stores = spans_last_level_cache(body);
  std::unordered_set<const Value*> outputs(body.outputs().begin(), body.outputs().end());
  std::unordered_set<const Value*> seen;
  auto add = [&](const Value* v) {
    if (seen.insert(v).second) plan.materialized.push_back(v);
  };
  for (const Value* o : body.outputs())
    if (op_producer(o) == nullptr) add(o);
  for (const auto& n : body.nodes()) {
    if (n->kind() != NodeKind::kOp) continue;
    if (is_reduction(*n) || n->is_op(OpKind::Concat) || outputs.count(n->output()))
      add(n->output());
  }
  int temps = 0;
  for (const Value* v : plan.materialized)
    if (!outputs.count(v)) plan.temporaries[v] = temps++;

  int64_t total = 0;
  for (const Value* v : plan.materialized) total += v->shape().num_elements();
  // Vector-math ops cost several elements' worth of loads and stores each.
  int64_t math = 0, math_per_element = 0;
  for (const auto& n : body.nodes()) {
    if (n->kind() == NodeKind::kOp && op_info(n->op()).has(kTranscendental)) {
      math += kTranscendentalWork * n->output()->shape().num_elements();
      math_per_element += kTranscendentalWork;
    }
    if (n->kind() == NodeKind::kOp && op_info(n->op()).has(kWindow)) {  // a read per element
      const auto& pool = n->attrs().get_ints("pool_size", op_name(n->op()));
      math += pool[0] * pool[1] * n->output()->shape().num_elements();
    }
  }
  const int64_t n_out = body.outputs().empty() ? 0 : body.outputs().front()->shape().num_elements();
  if (!body.outputs().empty() && flat_possible(body, n_out)) {
    plan.mode = IterationMode::kFlat;
    plan.extent = n_out;
    plan.row_elements =
        int64_t(body.outputs().size() + body.parameters().size()) + math_per_element;
    plan.inputs_by_row.assign(body.parameters().size(), true);
    return plan;
  }
  // Rows: one leading dimension P > 1 shared by every materialized value, row-local reads.
  int64_t p = -1;
  bool rows = !plan.materialized.empty();
  for (const Value* v : plan.materialized) {
    // (A concat along the leading axis puts its pieces' rows at other rows.)
    const ir::Node* n = op_producer(v);
    if (v->shape().rank() == 0 ||
        (n != nullptr && n->is_op(OpKind::Concat) && concat_axis(*n) == 0))
      rows = false;
    else if (p < 0)
      p = v->shape()[0];
    else if (v->shape()[0] != p)
      rows = false;
  }
  // A reduction over the leading axis that keeps the last one (a bias gradient: sum over the
  // batch) would reduce one strided column per row; serially it accumulates through memory
  // along contiguous rows instead (lower_kernel.cc), measured 6.7 ms -> well under 1 ms for
  // [512, 1024].
  for (const Value* v : plan.materialized) {
    const ir::Node* n = op_producer(v);
    if (n == nullptr || !is_reduction(*n) || n->is_op(OpKind::ArgMax) || n->is_op(OpKind::ArgMin))
      continue;
    std::vector<int> axes = reduction_axes(*n);
    const int rank = n->input(0)->shape().rank();
    if (rank >= 2 && !axes.empty() && axes.front() == 0 && axes.back() != rank - 1) rows = false;
  }
  if (rows && p > 1) {
    RowCheck check(seen);
    for (const Value* v : plan.materialized)
      if (!check.root_ok(v)) rows = false;
    for (const auto& param : body.parameters())
      plan.inputs_by_row.push_back(rows && !check.not_by_row.count(param.get()));
  } else {
    rows = false;
  }
  if (rows) {
    plan.mode = IterationMode::kRows;
    plan.extent = p;
    int64_t work = total + math;
    for (const auto& n : body.nodes())
      if (is_reduction(*n)) work += n->input(0)->shape().num_elements();
    plan.row_elements = std::max<int64_t>(1, work / p);
    return plan;
  }
  plan.mode = IterationMode::kSerial;
  int accumulators = int(plan.temporaries.size());
  for (const Value* v : plan.materialized) {
    const ir::Node* n = op_producer(v);
    if (v->dtype() == DType::bf16 && n != nullptr && keeps_last_axis(*n))
      plan.accumulators[v] = accumulators++;
  }
  plan.streaming_stores = false;
  plan.inputs_by_row.assign(body.parameters().size(), false);
  plan.extent = 1;
  plan.row_elements = std::max<int64_t>(1, total);
  return plan;
}

}  // namespace kiln::codegen
