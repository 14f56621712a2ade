#include "kiln/codegen/row_passes.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace kiln::codegen {
namespace {

using ir::Node;
using ir::NodeKind;
using ir::Value;
using Space = std::vector<int64_t>;

bool is_full_row_reduction(const Node& n) {
  if (!is_reduction(n) || n.is_op(OpKind::ArgMax) || n.is_op(OpKind::ArgMin)) return false;
  const int rank = n.input(0)->shape().rank();
  std::vector<int> axes = reduction_axes(n);
  return rank >= 2 && int(axes.size()) == rank - 1 && axes.front() == 1;
}

Space tail(const Shape& s) { return Space(s.dims().begin() + 1, s.dims().end()); }

// The row space a materialized value's loops cover, if it can share a pass.
std::optional<Space> row_space(const Value* v) {
  const Node* n = op_producer(v);
  if (n == nullptr || v->shape().rank() < 1) return std::nullopt;
  if (is_reduction(*n)) {
    if (!is_full_row_reduction(*n)) return std::nullopt;
    return tail(n->input(0)->shape());
  }
  if (n->is_op(OpKind::Concat)) {  // its pieces' space, where they share one shape
    const Shape* pieces = shared_piece_shape(*n);
    if (pieces == nullptr || pieces->rank() < 1) return std::nullopt;
    return tail(*pieces);
  }
  return tail(v->shape());
}

// Whether a value of the pass can be read by a later value of the same pass: an elementwise
// one, computed at the index being computed; not a reduction (complete when the pass ends) nor
// a concat (stored piece by piece, never computed at an index of its own).
bool readable_in_its_pass(const Value* v) {
  const Node* n = op_producer(v);
  return n != nullptr && !is_reduction(*n) && !n->is_op(OpKind::Concat);
}

// What computing a materialized value reads, not following other materialized values.
struct Reads {
  std::unordered_set<const Value*> materialized;
  // Values computed on the way, with whether each is read only at the index being computed
  // (through elementwise ops of one shape, from the value's loop index).
  std::unordered_map<const Value*, bool> same_index;
};

Reads reads_of(const Value* root, const std::unordered_set<const Value*>& materialized) {
  Reads r;
  const Node* n = op_producer(root);
  if (n == nullptr) return r;
  std::set<std::pair<const Value*, bool>> seen;
  std::vector<std::pair<const Value*, bool>> stack;
  auto operands = [&](const Node& m, bool same) {
    const bool elementwise = op_info(m.op()).has(kElementwise) && !is_reduction(m);
    // (A concat, always the root here, walks its pieces' space: where they share one shape,
    // each is read at the loop's index.)
    const bool pieces = m.is_op(OpKind::Concat) && shared_piece_shape(m) != nullptr;
    for (const Value* in : m.inputs())
      stack.emplace_back(in,
                         same && (pieces || (elementwise && in->shape() == m.output()->shape())));
  };
  if (is_reduction(*n))
    stack.emplace_back(n->input(0), true);  // read at the reduction loop's index
  else
    operands(*n, true);
  while (!stack.empty()) {
    auto [v, same] = stack.back();
    stack.pop_back();
    if (!seen.insert({v, same}).second) continue;
    if (materialized.count(v)) {
      r.materialized.insert(v);
      continue;
    }
    auto [it, fresh] = r.same_index.emplace(v, same);
    if (!fresh) it->second = it->second && same;
    if (const Node* m = op_producer(v)) operands(*m, same);
  }
  return r;
}

}  // namespace

RowPlan plan_row_passes(const ir::Graph& body, const KernelPlan& plan,
                        const std::vector<std::pair<size_t, size_t>>& overwrites) {
  std::unordered_set<const Value*> alone;
  for (const auto& [o, i] : overwrites) alone.insert(body.outputs()[o]);
  const std::unordered_set<const Value*> materialized(plan.materialized.begin(),
                                                      plan.materialized.end());
  RowPlan out;
  std::vector<std::optional<Space>> spaces;  // per pass, when shared
  std::unordered_map<const Value*, size_t> pass_of;
  std::vector<Reads> reads;
  for (const Value* v : plan.materialized) {
    reads.push_back(reads_of(v, materialized));
    std::optional<Space> space = alone.count(v) ? std::nullopt : row_space(v);
    size_t lo = 0;  // the earliest pass v may join
    for (const Value* w : reads.back().materialized) {
      const size_t p = pass_of.at(w);
      const bool same_pass_ok = out.passes[p].shared && readable_in_its_pass(w);
      lo = std::max(lo, same_pass_ok ? p : p + 1);
    }
    size_t p = lo;
    while (space && p < out.passes.size() && !(spaces[p] && *spaces[p] == *space)) ++p;
    if (!space || p == out.passes.size()) {
      p = out.passes.size();
      out.passes.push_back(RowPass{{}, space.has_value()});
      spaces.push_back(space);
    }
    out.passes[p].values.push_back(v);
    pass_of[v] = p;
  }

  // Row buffers: expensive elementwise values read at their own index by several passes.
  for (const auto& n : body.nodes()) {
    if (n->kind() != NodeKind::kOp || n->num_outputs() != 1) continue;
    const OpInfo& info = op_info(n->op());
    const Value* v = n->output();
    if (!info.has(kElementwise) || !info.has(kTranscendental) || materialized.count(v)) continue;
    const Shape& s = v->shape();
    if (s.rank() < 2 || s[0] != plan.extent ||
        (s.num_elements() / s[0]) * int64_t(dtype_size(v->dtype())) > kRowBufferBytes)
      continue;
    std::set<size_t> passes;
    bool same = true;
    for (size_t k = 0; k < plan.materialized.size(); ++k) {
      auto it = reads[k].same_index.find(v);
      if (it == reads[k].same_index.end()) continue;
      same = same && it->second;
      passes.insert(pass_of.at(plan.materialized[k]));
    }
    if (!same || passes.size() < 2) continue;
    const size_t first = *passes.begin();
    if (!spaces[first] || *spaces[first] != tail(s)) continue;
    // v's own inputs must be complete before that pass (or elementwise values of it).
    bool ready = true;
    for (const Value* w : reads_of(v, materialized).materialized) {
      const size_t p = pass_of.at(w);
      ready = ready && (p < first || (p == first && readable_in_its_pass(w)));
    }
    // (reads_of(v) starts from v's operands; a materialized operand counts the same way.)
    if (!ready) continue;
    auto& values = out.passes[first].values;
    values.insert(values.begin(), v);
    out.row_buffers.push_back(v);
  }
  return out;
}

}  // namespace kiln::codegen
