// Eager MatMul: out[..., m, n] = op(a)[..., m, k] * op(b)[..., k, n], op = optional transpose of
// the last two axes (attrs transpose_a, transpose_b). Batch axes broadcast like numpy. Every
// product is runtime::gemm (bf16: runtime::gemm_bf16, the operands widened as they are packed);
// results do not depend on the thread count.
#include <fmt/format.h>

#include <array>

#include "kiln/ir/shape_rules.h"
#include "kiln/runtime/gemm.h"
#include "kiln/runtime/kernels/register.h"
#include "kiln/runtime/scratch.h"
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

// Runs every product of a batched matmul through `product(ta, tb, rows, a_offset, b_offset,
// c_offset, parallel)` (offsets in elements; rows of C at c_offset, n apart): one
// (batch*m) x n product when b is one matrix and a's entries are stacked rows, else one product
// per batch entry, entries in parallel (each on one thread) when there are enough of them to
// occupy gemm's blocks, else in turn (each split by gemm). The choice depends on shapes only.
template <typename T, class Product>
void for_each_product(const Shape& as, const Shape& bs, const Shape& os, bool ta, bool tb,
                      Product&& product) {
  const int64_t m = os.dim(-2), n = os.dim(-1), k = ta ? as.dim(-2) : as.dim(-1);
  const int64_t batch = batch_count(os);
  if (batch_count(bs) == 1 && !ta && batch_count(as) == batch)
    return product(false, tb, batch * m, int64_t{0}, int64_t{0}, int64_t{0}, true);
  const BatchIndex index(os, as, bs);
  const int64_t a_mat = as.dim(-2) * as.dim(-1), b_mat = bs.dim(-2) * bs.dim(-1);
  auto entry = [&](int64_t e, bool parallel) {
    auto [oa, ob] = index.offsets(e);
    product(ta, tb, m, oa * a_mat, ob * b_mat, e * m * n, parallel);
  };
  if (batch > 1 && batch >= gemm_tasks<T>(m, n, k)) {
    const double flops = 2.0 * double(m) * double(n) * double(k);
    const int64_t grain =
        std::max<int64_t>(1, int64_t(double(kGemmParallelMinFlops) / std::max(flops, 1.0)));
    parallel_for(batch, grain, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) entry(e, false);
    });
  } else {
    for (int64_t e = 0; e < batch; ++e) entry(e, true);
  }
}

template <typename T>
void matmul_typed(const Array& a, const Array& b, bool ta, bool tb, Array& out) {
  if (out.size() == 0) return;
  const int64_t n = out.shape.dim(-1), k = ta ? a.shape.dim(-2) : a.shape.dim(-1);
  const int64_t lda = a.shape.dim(-1), ldb = b.shape.dim(-1);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = out.data<T>();
  for_each_product<T>(
      a.shape, b.shape, out.shape, ta, tb,
      [&](bool ta_, bool tb_, int64_t rows, int64_t oa, int64_t ob, int64_t oc, bool parallel) {
        if (parallel)
          gemm<T>(ta_, tb_, rows, n, k, pa + oa, lda, pb + ob, ldb, pc + oc, n);
        else
          gemm_serial<T>(ta_, tb_, rows, n, k, pa + oa, lda, pb + ob, ldb, pc + oc, n);
      });
}

// A bf16 result: each product of the widened operands in float32 (gemm_bf16: the engine widens
// them as it packs them, float32 operands of a fused cast rounded first), into the calling
// thread's float32 scratch, rounded to bf16 once (nearest even) right after its rows are
// computed, while they are in cache. The values of the op table's via-f32 rule, without its
// passes that widen the operands and round the result over memory.
void matmul_bf16(const Array& a, const Array& b, bool ta, bool tb, Array& out) {
  if (out.size() == 0) return;
  const int64_t n = out.shape.dim(-1), k = ta ? a.shape.dim(-2) : a.shape.dim(-1);
  const int64_t lda = a.shape.dim(-1), ldb = b.shape.dim(-1);
  const Bf16Operand pa = bf16_matmul_operand(a), pb = bf16_matmul_operand(b);
  bfloat16* po = out.data<bfloat16>();
  Scratch c_buf(ScratchSlot::kBf16Result, size_t(out.size()) * sizeof(float));
  float* pc = c_buf.as<float>();
  auto round = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = bfloat16::from_float(pc[i]);
  };
  for_each_product<float>(
      a.shape, b.shape, out.shape, ta, tb,
      [&](bool ta_, bool tb_, int64_t rows, int64_t oa, int64_t ob, int64_t oc, bool parallel) {
        if (!parallel) {
          gemm_bf16(ta_, tb_, rows, n, k, pa.offset(oa), lda, pb.offset(ob), ldb, pc + oc, n,
                    false);
          return round(oc, oc + rows * n);
        }
        const std::function<void(int64_t, int64_t)> rounded = [&](int64_t r0, int64_t r1) {
          round(oc + r0 * n, oc + r1 * n);
        };
        gemm_bf16(ta_, tb_, rows, n, k, pa.offset(oa), lda, pb.offset(ob), ldb, pc + oc, n, true,
                  &rounded);
      });
}

void matmul_kernel(std::span<const Array> in, const Attrs& attrs, Array& out) {
  const bool ta = attrs.get_bool("transpose_a", "matmul");
  const bool tb = attrs.get_bool("transpose_b", "matmul");
  if (out.dtype == DType::bf16) return matmul_bf16(in[0], in[1], ta, tb, out);
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

Bf16Operand bf16_matmul_operand(const Array& x) {
  if (x.dtype == DType::bf16) return x.data<bfloat16>();
  if (x.dtype == DType::f32) return Bf16Operand::rounded(x.data<float>());
  throw Error(fmt::format(
      "matmul: a bf16 product reads bf16 operands (or float32 ones rounded to bf16 by a fused "
      "cast), not {} {}",
      dtype_name(x.dtype), x.shape.to_string()));
}

void register_matmul_kernels(KernelTable& t) { t[size_t(OpKind::MatMul)] = matmul_kernel; }

void register_matmul_bf16_kernels(KernelTable& t) { t[size_t(OpKind::MatMul)] = matmul_kernel; }

}  // namespace kiln::runtime
