// Eager MatMul: out[..., m, n] = op(a)[..., m, k] * op(b)[..., k, n], op = optional transpose of
// the last two axes (attrs transpose_a, transpose_b). Batch axes broadcast like numpy. Every
// product is runtime::gemm; results do not depend on the thread count.
#include <fmt/format.h>

#include <array>

#include "kiln/ir/shape_rules.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

// Offsets (in matrices) of a's and b's batch entries for each output batch entry.
struct BatchIndex {
  int rank = 0;
  std::array<int64_t, kMaxRank> dims{}, a_strides{}, b_strides{};

  BatchIndex(const Shape& out, const Shape& a, const Shape& b) {
    rank = out.rank() - 2;
    auto fill = [&](const Shape& s, std::array<int64_t, kMaxRank>& st) {
      int64_t acc = 1;
      for (int i = rank - 1; i >= 0; --i) {
        int si = i - (rank - (s.rank() - 2));
        int64_t d = si >= 0 ? s[si] : 1;
        st[i] = d == 1 ? 0 : acc;
        acc *= d;
      }
    };
    for (int i = 0; i < rank; ++i) dims[i] = out[i];
    fill(a, a_strides);
    fill(b, b_strides);
  }

  // Matrix offsets of a and b for output batch entry `e`.
  std::pair<int64_t, int64_t> offsets(int64_t e) const {
    int64_t oa = 0, ob = 0;
    for (int i = rank - 1; i >= 0; --i) {
      int64_t idx = e % dims[i];
      e /= dims[i];
      oa += idx * a_strides[i];
      ob += idx * b_strides[i];
    }
    return {oa, ob};
  }
};

int64_t batch_count(const Shape& s) {
  int64_t n = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) n *= s[i];
  return n;
}

template <typename T>
void matmul_typed(const Array& a, const Array& b, bool ta, bool tb, Array& out) {
  const Shape &as = a.shape, &bs = b.shape, &os = out.shape;
  const int64_t m = os.dim(-2), n = os.dim(-1), k = ta ? as.dim(-2) : as.dim(-1);
  const int64_t lda = as.dim(-1), ldb = bs.dim(-1);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = out.data<T>();
  const int64_t batch = batch_count(os);
  if (out.size() == 0) return;

  // b is one matrix and a's batch entries are stacked rows: one (batch*m) x n product.
  if (batch_count(bs) == 1 && !ta && batch_count(as) == batch) {
    gemm<T>(false, tb, batch * m, n, k, pa, lda, pb, ldb, pc, n);
    return;
  }

  const BatchIndex index(os, as, bs);
  const int64_t a_mat = as.dim(-2) * as.dim(-1), b_mat = bs.dim(-2) * bs.dim(-1);
  auto entry = [&](int64_t e, bool serial) {
    auto [oa, ob] = index.offsets(e);
    const T* ea = pa + oa * a_mat;
    const T* eb = pb + ob * b_mat;
    T* ec = pc + e * m * n;
    if (serial)
      gemm_serial<T>(ta, tb, m, n, k, ea, lda, eb, ldb, ec, n);
    else
      gemm<T>(ta, tb, m, n, k, ea, lda, eb, ldb, ec, n);
  };
  // Enough entries to occupy gemm's blocks: one serial product per entry, entries in parallel.
  // Otherwise entries in turn, each split by gemm. The choice depends on shapes only.
  if (batch > 1 && batch >= gemm_tasks<T>(m, n, k)) {
    const double flops = 2.0 * double(m) * double(n) * double(k);
    const int64_t grain =
        std::max<int64_t>(1, int64_t(double(kGemmParallelMinFlops) / std::max(flops, 1.0)));
    parallel_for(batch, grain, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) entry(e, true);
    });
  } else {
    for (int64_t e = 0; e < batch; ++e) entry(e, false);
  }
}

void matmul_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const bool ta = attrs.get_bool("transpose_a", "matmul");
  const bool tb = attrs.get_bool("transpose_b", "matmul");
  visit_dtype(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
                  std::is_same_v<T, uint8_t>) {
      matmul_typed<T>(in[0], in[1], ta, tb, out);
    } else {
      throw Error(fmt::format("matmul: no kernel for dtype {} (a {}, b {})", dtype_name(out.dtype),
                              in[0].shape.to_string(), in[1].shape.to_string()));
    }
  });
}

}  // namespace

void register_matmul_kernels(KernelTable& t) { t[size_t(OpKind::MatMul)] = matmul_kernel; }

}  // namespace kiln::runtime
