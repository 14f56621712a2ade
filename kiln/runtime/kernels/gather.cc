// Eager kernels of indexed ops: gather, scatter_add, one_hot.
//  - gather(params, indices, axis): numpy take; out = params[:axis] + indices.shape +
//    params[axis+1:]. Every index must lie in [0, dim): negative indices are not wrapped; a
//    bad one throws kiln::Error (op, value, position, valid range) before anything is read.
//  - scatter_add(updates, indices, axis, dim_size): the adjoint of gather; out starts at zero
//    and out[..., idx[j], ...] += updates[..., j, ...], same index checks. Each output row sums
//    its contributions in increasing j, whatever the thread count (deterministic).
//  - one_hot(indices, depth, dtype): out[..., d] = (indices[...] == d); an index outside
//    [0, depth), negative included, gives an all-zero row (TensorFlow's behaviour).
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/kernels/strided_copy.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

// Position of flat element `flat` of an array of `shape`, as numpy prints it: "(1, 2)".
std::string position(const Shape& shape, int64_t flat) {
  Shape idx = shape;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    idx[i] = shape[i] > 0 ? flat % shape[i] : 0;
    flat = shape[i] > 0 ? flat / shape[i] : 0;
  }
  return idx.to_string();
}

// Checks that every index lies in [0, dim); throws kiln::Error naming the first bad one.
template <typename I>
void check_indices(const Array& indices, int64_t dim, const char* op, const Shape& data, int axis,
                   const char* data_name) {
  const I* p = indices.data<I>();
  for (int64_t j = 0, n = indices.size(); j < n; ++j) {
    if (p[j] < 0 || int64_t(p[j]) >= dim)
      throw Error(fmt::format(
          "{}: index {} at position {} of the indices {} is out of range: axis {} of {} {} "
          "has size {}, so indices must be in [0, {}){}",
          op, int64_t(p[j]), position(indices.shape, j), indices.shape.to_string(), axis, data_name,
          data.to_string(), dim, dim, p[j] < 0 ? " (negative indices are not wrapped)" : ""));
  }
}

template <typename Fn>
void visit_index(const Array& indices, Fn&& fn) {
  if (indices.dtype == DType::i32)
    fn(TypeTag<int32_t>{});
  else
    fn(TypeTag<int64_t>{});
}

// ---------------------------------------------------------------- gather

template <typename W, typename I>
void gather_loop(const Array& params, const Array& indices, int axis, Array& out) {
  const Shape& ps = params.shape;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= ps[i];
  for (int i = axis + 1; i < ps.rank(); ++i) inner *= ps[i];
  const int64_t dim = ps[axis], n = indices.size();
  const W* src = static_cast<const W*>(params.raw());
  const I* idx = indices.data<I>();
  W* dst = static_cast<W*>(out.raw());
  if (inner == 1) {
    parallel_for(outer * n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t o = r / n, j = r % n;
        dst[r] = src[o * dim + int64_t(idx[j])];
      }
    });
    return;
  }
  parallel_for(outer * n, std::max<int64_t>(1, kElementwiseGrain / inner),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t o = r / n, j = r % n;
                   std::memcpy(dst + r * inner, src + (o * dim + int64_t(idx[j])) * inner,
                               size_t(inner) * sizeof(W));
                 }
               });
}

void gather_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const Array &params = in[0], &indices = in[1];
  const int axis = normalize_axis(attrs.get_int("axis", "gather"), params.shape.rank(), "gather");
  visit_index(indices, [&](auto itag) {
    using I = typename decltype(itag)::type;
    check_indices<I>(indices, params.shape[axis], "gather", params.shape, axis, "params");
    if (out.size() == 0) return;
    visit_word(dtype_size(params.dtype), [&](auto wtag) {
      gather_loop<typename decltype(wtag)::type, I>(params, indices, axis, out);
    });
  });
}

// ---------------------------------------------------------------- scatter_add

// Contributions grouped by target row: rows[start[d] .. start[d + 1]) are the j with
// idx[j] == d, in increasing j (a stable counting sort).
struct Buckets {
  std::vector<int64_t> start, rows;
};

template <typename I>
Buckets bucket(const Array& indices, int64_t dim) {
  const I* idx = indices.data<I>();
  const int64_t n = indices.size();
  Buckets b;
  b.start.assign(size_t(dim) + 1, 0);
  for (int64_t j = 0; j < n; ++j) ++b.start[size_t(idx[j]) + 1];
  for (int64_t d = 0; d < dim; ++d) b.start[size_t(d) + 1] += b.start[size_t(d)];
  b.rows.resize(size_t(n));
  std::vector<int64_t> fill(b.start.begin(), b.start.end() - 1);
  for (int64_t j = 0; j < n; ++j) b.rows[size_t(fill[size_t(idx[j])]++)] = j;
  return b;
}

template <typename T>
void scatter_add_loop(const Array& updates, const Buckets& bk, int64_t outer, int64_t dim,
                      int64_t n, int64_t inner, Array& out) {
  const T* src = updates.data<T>();
  T* dst = out.data<T>();
  const int64_t per_row = inner * (1 + n / dim);  // average work per output row
  parallel_for(outer * dim, std::max<int64_t>(1, kElementwiseGrain / per_row),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t o = r / dim, d = r % dim;
                   T* y = dst + r * inner;
                   std::fill_n(y, inner, T(0));
                   for (int64_t q = bk.start[size_t(d)]; q < bk.start[size_t(d) + 1]; ++q) {
                     const T* x = src + (o * n + bk.rows[size_t(q)]) * inner;
                     for (int64_t i = 0; i < inner; ++i) y[i] += x[i];
                   }
                 }
               });
}

void scatter_add_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const Array &updates = in[0], &indices = in[1];
  const int axis = int(attrs.get_int("axis", "scatter_add"));
  const int64_t dim = attrs.get_int("dim_size", "scatter_add");
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= out.shape[i];
  for (int i = axis + 1; i < out.shape.rank(); ++i) inner *= out.shape[i];
  const int64_t n = indices.size();
  visit_index(indices, [&](auto itag) {
    using I = typename decltype(itag)::type;
    check_indices<I>(indices, dim, "scatter_add", out.shape, axis, "the output");
    if (out.size() == 0) return;
    const Buckets bk = bucket<I>(indices, dim);
    visit_dtype(out.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        internal_error(__FILE__, __LINE__, "scatter_add on bool reached a kernel");
      } else {
        scatter_add_loop<T>(updates, bk, outer, dim, n, inner, out);
      }
    });
  });
}

// ---------------------------------------------------------------- one_hot

template <typename T, typename I>
void one_hot_loop(const Array& indices, int64_t depth, Array& out) {
  const I* idx = indices.data<I>();
  T* dst = out.data<T>();
  parallel_for(indices.size(),
               std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(depth, 1)),
               [&](int64_t b, int64_t e) {
                 std::fill(dst + b * depth, dst + e * depth, T(0));
                 for (int64_t j = b; j < e; ++j)
                   if (idx[j] >= 0 && int64_t(idx[j]) < depth) dst[j * depth + idx[j]] = T(1);
               });
}

void one_hot_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const int64_t depth = attrs.get_int("depth", "one_hot");
  if (out.size() == 0) return;
  visit_index(in[0], [&](auto itag) {
    using I = typename decltype(itag)::type;
    visit_dtype(out.dtype, [&](auto tag) {
      one_hot_loop<typename decltype(tag)::type, I>(in[0], depth, out);
    });
  });
}

}  // namespace

void register_gather_kernels(KernelTable& t) {
  auto set = [&](OpKind k, KernelFn f) { t[size_t(k)] = f; };
  set(OpKind::Gather, gather_kernel);
  set(OpKind::ScatterAdd, scatter_add_kernel);
  set(OpKind::OneHot, one_hot_kernel);
}

}  // namespace kiln::runtime
