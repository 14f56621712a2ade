// Eager kernels of layout ops: reshape, transpose, broadcast_to, concat, slice, pad.
// They only move elements, so each works on every dtype (bool included) by element size:
// transpose, concat, slice and pad describe their input or output as a strided view and call
// strided_copy; broadcast_to walks BroadcastPlan runs. Attributes were checked by the op's
// shape rule before the kernel runs.
#include <algorithm>
#include <array>
#include <cstring>

#include "kiln/ir/shape_rules.h"
#include "kiln/runtime/kernels/broadcast.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/kernels/strided_copy.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

using Strides = std::array<int64_t, kMaxRank>;

std::span<const int64_t> first(const Strides& s, int rank) { return {s.data(), size_t(rank)}; }

// The output is preallocated, so a reshape is a copy of the bytes (the frontend can use
// Array::reshaped for a zero-copy reshape instead of calling the kernel).
void reshape_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  parallel_memcpy(out.raw(), in[0].raw(), out.nbytes());
}

void transpose_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const Array& x = in[0];
  const auto& perm = attrs.get_ints("perm", "transpose");
  const Strides xs = x.shape.strides();
  Strides ss{};
  for (size_t i = 0; i < perm.size(); ++i) ss[i] = xs[size_t(perm[i])];
  strided_copy_to_contiguous(dtype_size(x.dtype), out.shape.dims(), x.raw(), 0,
                             first(ss, out.shape.rank()), out.raw());
}

void broadcast_to_kernel(std::span<const Array> in, const Attrs&, Array& out) {
  const Array& x = in[0];
  BroadcastPlan<1> plan(out.shape, {&x.shape});
  visit_word(dtype_size(x.dtype), [&](auto tag) {
    using W = typename decltype(tag)::type;
    const W* px = static_cast<const W*>(x.raw());
    W* po = static_cast<W*>(out.raw());
    parallel_for(plan.total, kElementwiseGrain, [&](int64_t b, int64_t e) {
      plan.for_each_run(b, e, [&](int64_t o, auto off, auto st, int64_t n) {
        if (st[0])
          std::memcpy(po + o, px + off[0], size_t(n) * sizeof(W));
        else
          std::fill_n(po + o, n, px[off[0]]);
      });
    });
  });
}

void element_count_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const Shape& s = in[0].shape;
  int64_t count = 1;
  for (int a :
       rules::reduction_axes(attrs.get_ints("axes", "element_count"), s.rank(), "element_count"))
    count *= s[a];
  visit_storage(out.dtype, [&](auto tag) {  // bfloat16: one rounding (its bf16 column: convert)
    using T = typename decltype(tag)::type;
    *static_cast<T*>(out.raw()) = storage_from_int64<T>(count);
  });
}

// Each piece is copied into its window of the output (a strided view along `axis`). Where
// the windows are whole blocks of the output (every dimension before `axis` is 1), a piece
// already at its place is not moved: the compiled executable computes a concat's operands in
// its result's bytes where it can (codegen/memory_plan.h, concat regions).
void concat_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const int axis = normalize_axis(attrs.get_int("axis", "concat"), out.shape.rank(), "concat");
  const Strides os = out.shape.strides();
  const size_t es = dtype_size(out.dtype);
  const bool whole_blocks = rules::concat_pieces_contiguous(out.shape, axis);
  int64_t pos = 0;
  for (const Array& x : in) {
    const int64_t at = pos * os[size_t(axis)];
    pos += x.shape[axis];
    if (whole_blocks && x.raw() == static_cast<const char*>(out.raw()) + size_t(at) * es) continue;
    const Strides xs = x.shape.strides();
    strided_copy(es, x.shape.dims(), x.raw(), 0, first(xs, x.shape.rank()), out.raw(), at,
                 first(os, out.shape.rank()));
  }
}

void slice_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const Array& x = in[0];
  const auto ranges = rules::slice_ranges(x.shape, attrs, "slice");
  const Strides xs = x.shape.strides();
  Strides ss{};
  int64_t offset = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    offset += ranges[i].start * xs[i];
    ss[i] = ranges[i].step * xs[i];
  }
  // An empty slice copies nothing, so an offset at the end of the input is never read.
  strided_copy_to_contiguous(dtype_size(x.dtype), out.shape.dims(), x.raw(), offset,
                             first(ss, x.shape.rank()), out.raw());
}

// Zero fill, then the input goes to out[low + i * (interior + 1)] (the adjoint of a strided
// slice).
void pad_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const Array& x = in[0];
  const auto& low = attrs.get_ints("low", "pad");
  const auto& interior = attrs.get_ints("interior", "pad");
  const Strides xs = x.shape.strides(), os = out.shape.strides();
  Strides ds{};
  int64_t offset = 0;
  for (int i = 0; i < x.shape.rank(); ++i) {
    offset += low[size_t(i)] * os[size_t(i)];
    ds[size_t(i)] = (interior[size_t(i)] + 1) * os[size_t(i)];
  }
  if (out.size() != x.size()) parallel_zero(out.raw(), out.nbytes());
  strided_copy(dtype_size(x.dtype), x.shape.dims(), x.raw(), 0, first(xs, x.shape.rank()),
               out.raw(), offset, first(ds, x.shape.rank()));
}

}  // namespace

void register_layout_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Reshape, reshape_kernel);
  set(OpKind::Copy, reshape_kernel);  // a plain copy of the bytes
  set(OpKind::Transpose, transpose_kernel);
  set(OpKind::BroadcastTo, broadcast_to_kernel);
  set(OpKind::BroadcastLike, broadcast_to_kernel);  // input 1 only gives the output shape
  set(OpKind::ElementCount, element_count_kernel);
  set(OpKind::Concat, concat_kernel);
  set(OpKind::Slice, slice_kernel);
  set(OpKind::Pad, pad_kernel);
}

}  // namespace kiln::runtime
