// Packing float32 operands into the GEMM engine's panels (contract: gemm_pack.h).
#include "kiln/runtime/gemm_pack.h"

#include <cstring>
#include <utility>

#include "kiln/ir/error.h"
#include "kiln/runtime/gemm_pack_bf16.h"
#include "kiln/runtime/gemm_widen.h"

namespace kiln::runtime::gemm_detail {
namespace {

// Copies `cols` floats; the whole panel widths are copies of a compile-time size, which the
// compiler inlines (a call to memcpy per row of a panel cost a quarter of the packing).
inline void copy_floats(const float* src, int64_t cols, float* dst) {
  switch (cols) {
    case 16:
      std::memcpy(dst, src, 16 * sizeof(float));
      return;
    case 32:
      std::memcpy(dst, src, 32 * sizeof(float));
      return;
    case 48:
      std::memcpy(dst, src, 48 * sizeof(float));
      return;
    case 64:
      std::memcpy(dst, src, 64 * sizeof(float));
      return;
    default:
      std::memcpy(dst, src, size_t(cols) * sizeof(float));
  }
}

// out[p * H + i] = src[p * ld + i] for p < kc, i < H: copies of a compile-time size, which the
// compiler inlines (a call to memcpy per 48 bytes cost a quarter of a filter gradient).
template <int H>
void copy_panel(const float* src, int64_t ld, int64_t kc, float* out) {
  for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * H, src + p * ld, H * sizeof(float));
}

template <int... H>
void copy_panel_of(int64_t h, const float* src, int64_t ld, int64_t kc, float* out,
                   std::integer_sequence<int, H...>) {
  bool done = false;
  ((h == H + 1 ? (copy_panel<H + 1>(src, ld, kc, out), done = true) : false), ...);
  if (!done)
    for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * h, src + p * ld, size_t(h) * 4);
}

// Row p of the kc x nr panels of `block` from `cols` floats of a row of B: whole panels, then
// the last one zero-padded.
void pack_row_into_panels(const float* src, int64_t cols, int64_t nr, int64_t kc, int64_t p,
                          float* block) {
  const int64_t full = cols / nr, rest = cols - full * nr;
  for (int64_t panel = 0; panel < full; ++panel)
    copy_floats(src + panel * nr, nr, block + panel * kc * nr + p * nr);
  if (rest > 0) {
    float* dst = block + full * kc * nr + p * nr;
    std::memcpy(dst, src + full * nr, size_t(rest) * sizeof(float));
    std::fill(dst + rest, dst + nr, 0.0f);
  }
}

// Whether an operand goes through the bf16 packers: stored as bf16, or float32 rounded to bf16
// for the pair kernels (the float32 kernels pack a rounded operand as a float32 one and round
// the packed panel in place, while it is in cache: one read of the operand).
bool bf16_packing(const MicroKernels& mk, const uint16_t* bits, bool rounds) {
  return bits != nullptr || (rounds && mk.k_per_step == 2);
}

}  // namespace

// Packs columns [j0, j0 + nr) of op(B) in k block q, zero-padding columns >= n.
void pack_b_block(const MicroKernels& mk, int64_t nr, const SgemmArgs& g, const KBlocks& kb,
                  int64_t panel, int64_t q, int64_t n_pad, float* out) {
  const int64_t j0 = panel * nr, cols = std::min(nr, g.n - j0);
  const int64_t k0 = kb.begin(q), kc = kb.depth(q, g.k);
  float* dst = out + k0 * n_pad + panel * kc * nr;
  if (bf16_packing(mk, g.b16, g.b_rounds))
    return pack_bf16_b_panel(mk, g, j0, cols, nr, k0, kc, dst);
  if (!g.tb) {
    for (int64_t p = 0; p < kc; ++p) {
      std::memcpy(dst + p * nr, g.b + (k0 + p) * g.ldb + j0, size_t(cols) * sizeof(float));
      std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
    }
  } else {
    mk.transpose(g.b + j0 * g.ldb + k0, g.ldb, cols, kc, dst, nr);
    if (cols < nr)
      for (int64_t p = 0; p < kc; ++p) std::fill(dst + p * nr + cols, dst + (p + 1) * nr, 0.0f);
  }
  if (g.b_rounds) round_to_bf16_in_place(dst, kc * nr);
}

// Packs rows [p0, p1) of k block q of a B that is not transposed, every panel: each row of B is
// read once, sequentially (a panel at a time would read B's rows 128 bytes at a time, a page
// apart, where the hardware prefetchers do not follow: packing a 1024 x 1024 B that way took a
// tenth of the product).
void pack_b_rows(const MicroKernels& mk, int64_t nr, const SgemmArgs& g, const KBlocks& kb,
                 int64_t q, int64_t p0, int64_t p1, int64_t n_pad, float* out) {
  const int64_t k0 = kb.begin(q), kc = kb.depth(q, g.k);
  float* block = out + k0 * n_pad;
  if (bf16_packing(mk, g.b16, g.b_rounds)) {
    for (int64_t p = p0; p < p1; ++p) pack_bf16_b_row(mk, g, nr, k0, p, kc, block);
    return;
  }
  for (int64_t p = p0; p < p1; ++p)
    pack_row_into_panels(g.b + (k0 + p) * g.ldb, g.n, nr, kc, p, block);
  if (g.b_rounds)
    for (int64_t panel = 0; panel * nr < g.n; ++panel)
      round_to_bf16_in_place(block + panel * kc * nr + p0 * nr, (p1 - p0) * nr);
}

void pack_b_columns(int64_t nr, const SgemmArgs& g, int64_t k0, int64_t kc, int64_t j0, int64_t j1,
                    float* dst) {
  KILN_ASSERT(!g.tb && g.b16 == nullptr && j0 % nr == 0,
              "gemm: blocks packed by their tasks take a float32 B stored k x n");
  j1 = std::min(j1, g.n);
  for (int64_t p = 0; p < kc; ++p)
    pack_row_into_panels(g.b + (k0 + p) * g.ldb + j0, j1 - j0, nr, kc, p, dst);
  if (g.b_rounds) round_to_bf16_in_place(dst, ceil_div(j1 - j0, nr) * nr * kc);
}

void widen_b_rows(const SgemmArgs& g, int64_t p0, int64_t p1, float* out) {
  KILN_ASSERT(!g.tb && (g.b16 != nullptr || g.b_rounds) && g.k_elements == 0,
              "gemm: a B widened in rows is a bf16 B stored k x n on the float32 kernels");
  out += p0 * g.n;
  if (g.b16 != nullptr) return widen_bf16_rows(g.b16 + p0 * g.ldb, g.ldb, p1 - p0, g.n, out, g.n);
  if (g.ldb == g.n) {  // one run: rounded in one pass, not row by row
    std::memcpy(out, g.b + p0 * g.n, size_t((p1 - p0) * g.n) * sizeof(float));
    return round_to_bf16_in_place(out, (p1 - p0) * g.n);
  }
  for (int64_t p = p0; p < p1; ++p, out += g.n) {
    std::memcpy(out, g.b + p * g.ldb, size_t(g.n) * sizeof(float));
    round_to_bf16_in_place(out, g.n);
  }
}

void widen_a_rows(const SgemmArgs& g, int64_t r0, int64_t h, int64_t k0, int64_t kc, float* out) {
  KILN_ASSERT(!g.ta && (g.a16 != nullptr || g.a_rounds),
              "gemm: rows of A are widened for a bf16 A read as it is stored only");
  if (g.a16 != nullptr) return widen_bf16_rows(g.a16 + r0 * g.lda + k0, g.lda, h, kc, out, kc);
  for (int64_t i = 0; i < h; ++i) {
    std::memcpy(out + i * kc, g.a + (r0 + i) * g.lda + k0, size_t(kc) * sizeof(float));
    round_to_bf16_in_place(out + i * kc, kc);
  }
}

// Packs rows [r0, r0 + h) of op(A), columns [k0, k0 + kc), as out[p * h + i].
void pack_a_panel(const MicroKernels& mk, const SgemmArgs& g, int64_t r0, int64_t h, int64_t k0,
                  int64_t kc, float* out) {
  if (bf16_packing(mk, g.a16, g.a_rounds)) return pack_bf16_a_panel(mk, g, r0, h, k0, kc, out);
  if (g.ta)
    copy_panel_of(h, g.a + k0 * g.lda + r0, g.lda, kc, out, std::make_integer_sequence<int, 16>{});
  else
    mk.transpose(g.a + r0 * g.lda + k0, g.lda, h, kc, out, h);
  if (g.a_rounds) round_to_bf16_in_place(out, kc * h);
}

int64_t packed_b_floats(const GemmPlan& plan) {
  const int64_t nr = plan.kernel->nr;
  return plan.k * ceil_div(plan.n, nr) * nr;
}

void pack_b_once(const MicroKernels& mk, const GemmPlan& plan, const SgemmArgs& g, float* out) {
  KILN_ASSERT((g.b != nullptr || g.b16 != nullptr) && mk.k_per_step == 1 && !plan.transposed(),
              "gemm: only a B of the float32 kernels' product computed as it is is packed once "
              "per loop");
  const int64_t nr = plan.kernel->nr;
  const KBlocks kb(g.k, plan.kc, plan.k_quantum);
  const int64_t panels_n = ceil_div(g.n, nr), n_pad = panels_n * nr;
  if (g.tb) {
    for (int64_t panel = 0; panel < panels_n; ++panel)
      for (int64_t q = 0; q < kb.count; ++q) pack_b_block(mk, nr, g, kb, panel, q, n_pad, out);
  } else {
    for (int64_t p = 0; p < g.k; ++p)
      pack_b_rows(mk, nr, g, kb, p / kb.step, p % kb.step, p % kb.step + 1, n_pad, out);
  }
}

}  // namespace kiln::runtime::gemm_detail
