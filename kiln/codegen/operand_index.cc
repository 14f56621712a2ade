#include "kiln/codegen/operand_index.h"

#include "kiln/ir/shape_rules.h"

namespace kiln::codegen {

using ir::Node;

Index operand_index(llvm::IRBuilder<>& b, IterationMode mode, const Node& n, size_t i,
                    const Index& idx) {
  const Shape& in = n.input(i)->shape();
  const Shape& out = n.output()->shape();
  if (mode == IterationMode::kFlat) return in.num_elements() == 1 ? Index{} : idx;
  if (n.is_op(OpKind::Transpose)) {
    const auto& perm = n.attrs().get_ints("perm", "transpose");
    Index r(size_t(in.rank()));
    for (size_t d = 0; d < perm.size(); ++d) r[size_t(perm[d])] = idx[d];
    return r;
  }
  if (n.is_op(OpKind::Slice)) {
    auto ranges = rules::slice_ranges(in, n.attrs(), "slice");
    Index r;
    for (size_t d = 0; d < ranges.size(); ++d) {
      llvm::Value* x = idx[d];
      if (ranges[d].step != 1) x = b.CreateMul(x, b.getInt64(ranges[d].step));
      if (ranges[d].start != 0) x = b.CreateAdd(x, b.getInt64(ranges[d].start));
      r.push_back(x);
    }
    return r;
  }
  if (n.is_op(OpKind::Reshape) || n.is_op(OpKind::Copy)) return reshape_index(b, in, out, idx);
  if (n.is_op(OpKind::OneHot)) return Index(idx.begin(), idx.begin() + in.rank());
  // elementwise and broadcasts: numpy alignment from the right
  Index r;
  const int shift = out.rank() - in.rank();
  for (int d = 0; d < in.rank(); ++d)
    r.push_back(in[d] == 1 ? b.getInt64(0) : idx[size_t(d + shift)]);
  return r;
}

Index reshape_index(llvm::IRBuilder<>& b, const Shape& in, const Shape& out, const Index& idx) {
  std::vector<int> in_dims, out_dims;  // positions of the dimensions that are not 1
  for (int d = 0; d < in.rank(); ++d)
    if (in[d] != 1) in_dims.push_back(d);
  for (int d = 0; d < out.rank(); ++d)
    if (out[d] != 1) out_dims.push_back(d);
  bool same = in_dims.size() == out_dims.size();
  for (size_t k = 0; same && k < in_dims.size(); ++k) same = in[in_dims[k]] == out[out_dims[k]];
  Index r(size_t(in.rank()), b.getInt64(0));
  if (same) {  // only size-1 dimensions inserted or removed
    for (size_t k = 0; k < in_dims.size(); ++k) r[size_t(in_dims[k])] = idx[size_t(out_dims[k])];
    return r;
  }
  llvm::Value* linear = b.getInt64(0);
  for (int d = 0; d < out.rank(); ++d)
    linear = b.CreateAdd(b.CreateMul(linear, b.getInt64(out[d]), "", true, true), idx[size_t(d)],
                         "", true, true);
  // The outermost dimension takes what is left: `linear` is below the element count, so its
  // remainder would be the quotient itself. Without that remainder LLVM folds the divisions
  // back into `linear` where the reshape keeps the row-major order (every reshape kiln makes),
  // and a kernel reading a reshape is a contiguous vector loop instead of a scalar one with a
  // 64-bit division per element.
  int outer = 0;
  while (outer < in.rank() && in[outer] == 1) ++outer;
  for (int d = in.rank() - 1; d >= outer; --d) {
    if (in[d] == 1) continue;
    if (d == outer) {
      r[size_t(d)] = linear;
      break;
    }
    r[size_t(d)] = b.CreateURem(linear, b.getInt64(in[d]));
    linear = b.CreateUDiv(linear, b.getInt64(in[d]));
  }
  return r;
}

llvm::Value* row_major_offset(llvm::IRBuilder<>& b, const Shape& s, bool row_only,
                              const Index& idx) {
  llvm::Value* off = nullptr;
  int64_t stride = 1;
  for (int d = s.rank() - 1; d >= (row_only ? 1 : 0); --d) {
    if (s[d] != 1) {
      llvm::Value* term = stride == 1
                              ? idx[size_t(d)]
                              : b.CreateMul(idx[size_t(d)], b.getInt64(stride), "", true, true);
      off = off == nullptr ? term : b.CreateAdd(off, term, "", true, true);
    }
    stride *= s[d];
  }
  return off == nullptr ? b.getInt64(0) : off;
}

}  // namespace kiln::codegen
