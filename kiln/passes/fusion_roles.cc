#include "kiln/passes/fusion_roles.h"

#include <algorithm>
#include <vector>

#include "kiln/ir/shape_rules.h"

namespace kiln::passes::fusion_detail {

using ir::NodeKind;

Role role_of(const Node& n) {
  if (n.kind() != NodeKind::kOp) return Role::kOther;
  if (n.is_op(OpKind::Concat)) {
    const Shape& s = n.output()->shape();
    if (!s.is_fully_known() || s.rank() < 2 || s[0] < 2 ||
        rules::concat_pieces_contiguous(s, n.attrs().get_int("axis", "concat")))
      return Role::kOther;
  }
  switch (op_info(n.op()).fusion) {
    case FusionRole::Loop:
      return Role::kLoop;
    case FusionRole::Reduction:
      return Role::kReduction;
    case FusionRole::Contraction:
      return Role::kContraction;
    case FusionRole::Output:
      return Role::kOutput;
    case FusionRole::NoFusion:
      break;
  }
  return Role::kOther;
}

bool is_view(const Node& n) { return n.is_op(OpKind::Reshape); }

bool is_cheap(const Node& n) {
  return role_of(n) == Role::kLoop && !op_info(n.op()).has(kTranscendental) &&
         !op_info(n.op()).has(kWindow);
}

bool inline_constant(const Node* p) {
  if (p == nullptr || p->kind() != NodeKind::kConstant || p->literal() == nullptr) return false;
  return p->literal()->is_splat() || p->literal()->num_elements() <= 16;
}

int64_t known_elements(const Value* v) {
  return v->shape().is_fully_known() ? v->shape().num_elements() : int64_t(-1);
}

bool duplicable(const Node& n) {
  if (!is_cheap(n)) return false;
  const int64_t size = known_elements(n.output(0));
  int full = 0;
  for (const Value* v : n.inputs()) {
    if (inline_constant(v->producer())) continue;
    const int64_t s = known_elements(v);
    if (size < 0 || s < 0 || s >= size) ++full;  // unknown sizes count as full
  }
  return full <= 1;
}

const ir::Value* full_operand(const Node& n) {
  const int64_t size = known_elements(n.output(0));
  for (const ir::Value* v : n.inputs()) {
    if (inline_constant(v->producer())) continue;
    const int64_t s = known_elements(v);
    if (size < 0 || s < 0 || s >= size) return v;
  }
  return nullptr;
}

ReductionSpan span_of(const Node& n) {
  if (role_of(n) != Role::kReduction) return ReductionSpan::kNone;
  const Shape& in = n.input(0)->shape();
  if (in.rank() == 0) return ReductionSpan::kNone;
  const char* op = op_name(n.op());
  std::vector<int64_t> axes;
  if (n.is_op(OpKind::Softmax) || n.is_op(OpKind::LogSoftmax) || n.is_op(OpKind::ArgMax) ||
      n.is_op(OpKind::ArgMin))
    axes.push_back(n.attrs().get_int("axis", op));
  else
    axes = n.attrs().get_ints("axes", op);
  if (axes.empty()) return ReductionSpan::kAcrossRows;  // all axes
  for (int64_t a : axes)
    if ((a < 0 ? a + in.rank() : a) == 0) return ReductionSpan::kAcrossRows;
  return ReductionSpan::kAlongRows;
}

bool is_row_part_sum(const Node& n) {
  if (!n.is_op(OpKind::Sum) || span_of(n) != ReductionSpan::kAlongRows) return false;
  const int64_t rank = n.input(0)->shape().rank();
  for (int64_t a : n.attrs().get_ints("axes", "sum"))
    if ((a < 0 ? a + rank : a) == rank - 1) return false;
  return rank >= 3;
}

int64_t largest_output(const Node& n) {
  int64_t most = 0;
  for (size_t i = 0; i < n.num_outputs(); ++i) most = std::max(most, known_elements(n.output(i)));
  return most;
}

void GroupKind::add(Node& n) {
  if (role_of(n) == Role::kContraction) contraction = &n;
  if (role_of(n) == Role::kReduction) (is_row_part_sum(n) ? has_part_sum : has_reduction) = true;
  if (is_row_part_sum(n)) add_part_rows(n.output()->shape()[0]);
  along_rows = along_rows || span_of(n) == ReductionSpan::kAlongRows;
  across_rows = across_rows || span_of(n) == ReductionSpan::kAcrossRows;
  largest = std::max(largest, largest_output(n));
}

void GroupKind::add(const GroupKind& o) {
  if (contraction == nullptr) contraction = o.contraction;
  has_reduction = has_reduction || o.has_reduction;
  has_part_sum = has_part_sum || o.has_part_sum;
  if (o.part_rows != -1) add_part_rows(o.part_rows);
  along_rows = along_rows || o.along_rows;
  across_rows = across_rows || o.across_rows;
  largest = std::max(largest, o.largest);
}

void GroupKind::add_part_rows(int64_t rows) {
  part_rows = part_rows == -1 && rows >= 0 ? rows : part_rows == rows ? rows : -2;
}

}  // namespace kiln::passes::fusion_detail
